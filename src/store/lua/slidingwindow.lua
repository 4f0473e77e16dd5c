-- SLIDING_WINDOW on one key, deciding exactly what sl_win_sliding_decide (src/core/window.c)
-- decides: S sub-windows of w = duration / S ms, the estimate c0 + .. + c(S-1) + cS * (w - e) / w
-- of the last duration's hits (e: how far t is into the current sub-window), n hits admitted iff
-- estimate + n <= limit. The engine decides on 128-bit integers; here every product must stay
-- under 2^53 (doubles are exact below), else the answer is the status -1 ("out of the Redis
-- store's exact range", a per-item error): limit * w < 2^53 covers every real limit.
--   KEYS[i]  a key: a string, struct.pack('Bddddd' .. S x 'd', 4, S, duration, window_start,
--            cur, expire_at, ring...) (ring[j mod S]: the count of sub-window j)
--   ARGV     hits limit duration t now margin reset drain | S
-- returns {status, limit, remaining, reset_time, retry_after, delay_ms = 0} as decimal strings.
-- Many items per call: KEYS[i] with the S = #ARGV / #KEYS arguments ARGV[(i-1)*S + 1 ..] each,
-- decided in order (a key repeated in one call sees its earlier items), answers appended.
local TOP = 9223372036854775808 -- 2^63: int64 saturates here
local EXACT = 9007199254740992  -- 2^53
local function fmt(x)
  if x >= TOP then return '9223372036854775807' end
  if x <= -TOP then return '-9223372036854775808' end
  return string.format('%d', x)
end
local function floor_div(a, b) -- exact for |a| < 2^53, 0 < b < 2^53
  local q = math.floor(a / b)
  local r = a - q * b
  while r < 0 do q, r = q - 1, r + b end
  while r >= b do q, r = q + 1, r - b end
  return q
end
local function ceil_div(a, b)
  local q = floor_div(a, b)
  if q * b < a then q = q + 1 end
  return q
end

-- Keys are read with one MGET and written once each at the end (SET PX, or DEL): a command
-- from Lua costs about what the whole decision does, so a call of many keys pays two per key at
-- most, not two per item. `seen` carries a key's state between its items in this call.
local vals = redis.call('MGET', unpack(KEYS))
local seen, px, order = {}, {}, {}
local function state(i)
  local v = seen[KEYS[i]]
  if v == nil then v = vals[i] end
  return v
end
local function put(k, v, ttl) -- v false: delete
  if seen[k] == nil then order[#order + 1] = k end
  seen[k], px[k] = v, ttl
end
local NA = #ARGV / #KEYS
local out = {}
for i = 1, #KEYS do
  local k, o = KEYS[i], (i - 1) * NA
  local n, L, D = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
  local t, now = tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5])
  local margin, reset, drain = tonumber(ARGV[o + 6]), ARGV[o + 7] == '1', ARGV[o + 8] == '1'
  local S = tonumber(ARGV[o + 9])
  local w = D / S -- D % S == 0: validated

  local ring = {}
  for j = 0, S - 1 do ring[j] = 0 end
  local same, ws, cur = false, 0, 0
  local v = state(i)
  if v and string.byte(v, 1) == 4 then
    local _, s2, d2, ws2, cur2, ex, pos = struct.unpack('Bddddd', v)
    if ex >= now and s2 == S and d2 == D and not reset then
      same, ws, cur = true, ws2, cur2
      local r = {struct.unpack(string.rep('d', S), v, pos)}
      for j = 0, S - 1 do ring[j] = r[j + 1] end
    end
  end
  local function slot(j) return j - floor_div(j, S) * S end
  local kk
  if same then
    kk = floor_div(ws, w)
    if t < ws then t = ws end
    local k2 = floor_div(t, w)
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
    kk = floor_div(t, w)
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
            local need = w - floor_div(room * w, old)
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
    out[#out + 1] = '-1'
    for _ = 1, 5 do out[#out + 1] = '0' end
  else
    if newest < 0 then
      if v then put(k, false) end
    else
      local ex = rt
      if ex < TOP then ex = ex - 1 end
      local ttl = ex - now + margin
      if ttl < 1 then ttl = 1 end
      if ttl > 1e13 then ttl = 1e13 end
      local st = {4, S, D, kk * w, cur, ex}
      for j = 0, S - 1 do st[#st + 1] = ring[j] end
      put(k, struct.pack('Bddddd' .. string.rep('d', S), unpack(st)), string.format('%d', ttl))
    end
    out[#out + 1] = fmt(status)
    out[#out + 1] = fmt(L)
    out[#out + 1] = fmt(rem)
    out[#out + 1] = fmt(rt)
    out[#out + 1] = fmt(ra)
    out[#out + 1] = '0'
  end
end
for _, k in ipairs(order) do
  if seen[k] then redis.call('SET', k, seen[k], 'PX', px[k]) else redis.call('DEL', k) end
end
return out
