-- SPDX-License-Identifier: Apache-2.0
-- GCRA on one key, deciding exactly what sl_gcra_decide (src/core/gcra.c) decides. The engine
-- counts time in units of 1/limit ms on 128-bit integers; Lua has only doubles, so this script
-- works on the distance X = TAT - t in those units (t = max(decision time, 0)), which is small
-- for any real limit (at most (burst + 1) * duration, plus a granted delay), and answers the
-- status -1 ("out of the Redis store's exact range", a per-item error) whenever a value it needs
-- would reach 2^53, where doubles stop being exact.
--   KEYS[i]  a key: a string, struct.pack('Bdddddd', 2, tat_ms, tat_frac, limit, duration,
--            burst, expire_at)
--   ARGV[i]  hits limit duration t now margin reset drain | burst max_delay_ms
-- answers a record per item: status limit remaining reset_time retry_after delay_ms.
-- Many items per call, and the helpers used below: common/prelude.lua.
-- floor(a / b) and a mod b for 0 <= a < 2^53, 0 < b < 2^53, exactly

local ITEM = items(10)
prepare(ITEM)
for i = 1, #KEYS do
  local k = KEYS[i]
  local n, L, D, t, now, margin, reset, drain, b, maxd = item(i, ITEM)

  local v = vals[i]
  if nk > 0 then v = state(i) end
  local tag, tat, frac, oldL, e0 = nil, 0, 0, 0, nil
  if v then
    tag = sbyte(v, 1) -- another algorithm's state: not ours
    if tag == 2 and #v ~= 49 then tag = -1 end -- not a state: as another algorithm's
    if tag == 2 then
      local _d, _b, e
      tag, tat, frac, oldL, _d, _b, e = sunpack('Bdddddd', v)
      e0 = e
      if e < t then tag = nil end -- expired at the decision time t: as if absent
    end
  end

  local status, lim, rem, rt, ra, delay = 0, 0, 0, 0, 0, 0
  if L == 0 then
    -- rate 0: deny every hit; a GCRA state is left alone, another algorithm's is dropped
    if n > 0 then status = 1 end
    rt = t
    if v and tag ~= 2 then put(i, false, nil, nil, nil, nil, v) end
  else
    local bad = false
    local tc = t
    if tc < 0 then tc = 0 end
    local cap = (b + 1) * D -- tau + T, in 1/L ms
    if cap >= EXACT then bad = true end
    local X = 0
    if tag == 2 and not reset and not bad and tat >= tc then
      if oldL ~= L then
        if frac * L >= EXACT then bad = true else frac = ceil_div(frac * L, oldL) end
      end
      if (tat - tc) * L + frac >= EXACT then bad = true else X = (tat - tc) * L + frac end
    end
    local over = false
    if not bad and n > 0 then
      if n > b + 1 or X > (b + 1 - n) * D then
        over = true
        if maxd > 0 and n <= b + 1 then
          local w = X - (b + 1 - n) * D
          local cw = ceil_div(w, L)
          if cw <= maxd then
            over, delay = false, cw
          end
        end
      end
      if over then
        if drain and X < cap then X = cap end
      else
        X = X + n * D
        if X >= EXACT then bad = true end
      end
    elseif not bad and n < 0 and X > 0 then
      if -n >= ceil_div(X, D) then X = 0 else X = X + n * D end
    end
    if bad then
      status = -1
    else
      if over then status = 1 end
      lim = b + 1
      if X == 0 then
        rem, rt = lim, tc
      else
        local left = cap - X
        if left > 0 then rem = divmod(left, D) end
        rt = tc + ceil_div(X, L)
      end
      if over then
        if n > b + 1 then
          ra = rt - tc
        else
          local wait = X - (b + 1 - n) * D
          if wait > 0 then ra = ceil_div(wait, L) end
        end
      end
      if X == 0 then
        if v then put(i, false, nil, nil, nil, nil, v) end
      else
        local q, r = divmod(X, L)
        local e = rt - 1
        put(i, spack('Bdddddd', 2, tc + q, r, L, D, b, e), e, e0, now, margin, v)
      end
    end
  end
  nout = nout + 1
  out[nout] = spack(REC, status, lim, rem, rt, ra, delay)
end
flush()
return table.concat(out)
