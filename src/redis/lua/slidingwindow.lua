-- SPDX-License-Identifier: Apache-2.0
-- SLIDING_WINDOW on one key, deciding exactly what sl_win_sliding_decide (src/core/window.c)
-- decides: S sub-windows of w = duration / S ms, the estimate c0 + .. + c(S-1) + cS * (w - e) / w
-- of the last duration's hits (e: how far t is into the current sub-window), n hits admitted iff
-- estimate + n <= limit. The engine decides on 128-bit integers; here every product must stay
-- under 2^53 (doubles are exact below), else the answer is the status -1 ("out of the Redis
-- store's exact range", a per-item error): limit * w < 2^53 covers every real limit.
--   KEYS[i]  a key: a string, struct.pack('Bddddd' .. S x 'd', 4, S, duration, window_start,
--            cur, expire_at, ring...) (ring[j mod S]: the count of sub-window j)
--   ARGV[i]  hits limit duration t now margin reset drain | S
-- answers a record per item: status limit remaining reset_time retry_after delay_ms (0).
-- Many items per call, and the helpers used below: common/prelude.lua.

local ITEM = items(9)
prepare(ITEM)
for i = 1, #KEYS do
  local k = KEYS[i]
  local n, L, D, t, now, margin, reset, drain, S = item(i, ITEM)
  local w = D / S -- D % S == 0: validated

  local ring = {}
  for j = 0, S - 1 do ring[j] = 0 end
  local same, ws, cur, e0 = false, 0, 0, nil
  local v = vals[i]
  if nk > 0 then v = state(i) end
  if v and sbyte(v, 1) == 4 and #v >= 41 then
    local _, s2, d2, ws2, cur2, ex, pos = sunpack('Bddddd', v)
    e0 = ex
    if ex >= t and s2 == S and d2 == D and not reset and #v == 41 + 8 * S then
      same, ws, cur = true, ws2, cur2
      local r = {sunpack(string.rep('d', S), v, pos)}
      for j = 0, S - 1 do ring[j] = r[j + 1] end
    end
  end
  local function slot(j) return j - divmod(j, S) * S end
  local kk
  if same then
    kk = divmod(ws, w)
    if t < ws then t = ws end
    local k2 = divmod(t, w)
    if k2 ~= kk then -- advance
      if k2 - kk > S then
        for j = 0, S - 1 do ring[j] = 0 end
      else
        ring[slot(kk)] = cur
        for j = kk + 1, k2 - 1 do ring[slot(j)] = 0 end
      end
      cur, kk = 0, k2
    end
  else
    kk = divmod(t, w)
  end
  local function prev(m) return ring[slot(kk - m)] end
  local e = t - kk * w
  local bad = L * w >= EXACT

  local function sums()
    local full = cur
    for m = 1, S - 1 do full = full + prev(m) end
    return full, prev(S)
  end
  local function share(oldest)
    if oldest * w >= EXACT then bad = true; return 0 end
    return ceil_div(oldest * (w - e), w)
  end

  local full, oldest = sums()
  local over = false
  if not bad and n > 0 then
    if full + n <= L and oldest * w < EXACT and oldest * (w - e) <= L * w - (full + n) * w then
      cur = cur + n
    else
      if oldest * w >= EXACT then bad = true end
      over = true
      local room = L - full - share(oldest)
      if drain and room > 0 then cur = cur + room end
    end
  elseif n < 0 then
    local give = -n
    local take = cur
    if give < take then take = give end
    cur, give = cur - take, give - take
    for m = 1, S do
      if give <= 0 then break end
      local c = prev(m)
      take = c
      if give < take then take = give end
      ring[slot(kk - m)], give = c - take, give - take
    end
  end
  full, oldest = sums()
  local sh = share(oldest)

  local newest = -1
  if cur > 0 then newest = 0 end
  for m = 1, S do
    if newest >= 0 then break end
    if prev(m) > 0 then newest = m end
  end

  local status, rem, rt, ra = 0, 0, 0, 0
  if over then status = 1 end
  if L - full - sh > 0 then rem = L - full - sh end
  if newest < 0 then rt = t else rt = (kk - newest + S + 1) * w end
  if over then
    local at
    if n > L then
      at = rt
    else -- sliding_retry: the earliest time the n hits pass if nothing else arrives
      local f, old = full, oldest
      at = (kk + S + 1) * w
      for s = 0, S do
        if s > 0 then
          local leaving
          if S - s == 0 then leaving = cur else leaving = prev(S - s) end
          f, old = f - leaving, leaving
        end
        local e0 = 0
        if s == 0 then e0 = e end
        local room = L - f - n
        if room >= 0 then
          local a2
          if old == 0 then
            a2 = e0
          else
            local need = w - divmod(room * w, old)
            a2 = e0
            if need > e0 then a2 = need end
          end
          if a2 < w then
            at = (kk + s) * w + a2
            break
          end
        end
      end
    end
    ra = at - t
    if ra < 0 then ra = 0 end
  end

  if bad then
    nout = nout + 1
    out[nout] = spack(REC, -1, 0, 0, 0, 0, 0)
  else
    if newest < 0 then
      if v then put(i, false, nil, nil, nil, nil, v) end
    else
      local ex = rt
      if ex < TOP then ex = ex - 1 end
      local st = {4, S, D, kk * w, cur, ex}
      for j = 0, S - 1 do st[#st + 1] = ring[j] end
      put(i, spack('Bddddd' .. string.rep('d', S), unpack(st)), ex, e0, now, margin, v)
    end
    nout = nout + 1
    out[nout] = spack(REC, status, L, rem, rt, ra, 0)
  end
end
flush()
return table.concat(out)
