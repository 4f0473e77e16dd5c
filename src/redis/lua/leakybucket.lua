-- SPDX-License-Identifier: Apache-2.0
-- LEAKY_BUCKET on one key, deciding exactly what src/core/leakybucket.c decides (Gubernator v2's
-- semantics: the comments there say why each rule is what it is). remaining is a double, as in
-- Gubernator, and Lua's numbers are the same IEEE doubles, so the fraction leaks identically.
--   KEYS[i]  a key: a string, struct.pack('Bdddd', 1, remaining, updated_at, burst, expire_at)
--            (the algorithm's number, then doubles, which hold remaining exactly)
--   ARGV[i]  hits limit duration t now margin reset drain | burst rate_d item_duration
--            (burst: 0 means limit, resolved in C; rate_d: the ms that limit hits take, the
--            Gregorian interval's length when Gregorian; item_duration: how long a hit keeps the
--            item, to the interval's end when Gregorian)
-- answers a record per item: status limit remaining reset_time retry_after delay_ms (0).
-- Many items per call, and the helpers used below: common/prelude.lua.
-- Gubernator's reset_time: t + (limit - remaining) * int64(rate)
local function reset_time(t, limit, rem, rate_ms)
  return sat(t + sat((limit - rem) * rate_ms))
end
-- the integer remaining the bucket would show at t2
local function remaining_at(r, u, t2, rate, burst)
  local leak = sat(t2 - u) / rate
  if f2i(leak) > 0 then r = r + leak end
  if f2i(r) > burst then r = burst end
  return f2i(r)
end
-- ms from t until `hits` would pass (leakybucket.c's retry_after)
local function retry_after(r, u, exp, hits, t, rate, burst)
  local want = hits
  if hits > burst then
    if f2i(r) >= burst then return 0 end
    want = burst
  end
  local best = sat(exp + 1)
  local need = want - r
  if need < 1 then need = 1 end
  local when = u + need * rate
  if when < TOP then
    local cand = f2i(math.ceil(when))
    if cand < t then cand = t end
    local n = 0
    while n < 4 and cand > t and remaining_at(r, u, cand - 1, rate, burst) >= want do
      cand, n = cand - 1, n + 1
    end
    n = 0
    while n < 4 and cand < TOP and remaining_at(r, u, cand, rate, burst) < want do
      cand, n = cand + 1, n + 1
    end
    if remaining_at(r, u, cand, rate, burst) >= want and cand < best then best = cand end
  end
  local x = sat(best - t)
  if x < 0 then return 0 end
  return x
end

local ITEM = items(11)
prepare(ITEM)
for i = 1, #KEYS do
  local k = KEYS[i]
  local hits, limit, _, t, now, margin, reset, drain, burst, d, pdur = item(i, ITEM)
  local rate = d / limit
  local rate_ms = 0
  if limit ~= 0 then rate_ms = f2i(rate) end

  local v = vals[i]
  if nk > 0 then v = state(i) end
  local a, r, u, b, e, e0 = nil, 0, 0, 0, 0, nil
  if v and sbyte(v, 1) == 1 and #v == 33 then
    a, r, u, b, e = sunpack('Bdddd', v)
    e0 = e
    if e < t then a = nil end -- expired at the decision time t: as if absent
  end

  local status, rem, rt, ra = 0, 0, 0, 0
  if a ~= 1 then
    local remaining = sat(burst - hits)
    r, u, b, e = remaining, t, burst, sat(t + pdur)
    status, rem, rt = 0, remaining, reset_time(t, limit, remaining, rate_ms)
    if hits > burst then
      status, rem, rt, r = 1, 0, reset_time(t, limit, 0, rate_ms), 0
      ra = retry_after(r, u, e, hits, t, rate, burst)
    end
  else
    if reset then r = burst end
    if b ~= burst then
      if burst > f2i(r) then r = burst end
      b = burst
    end
    if hits ~= 0 then e = sat(t + pdur) end
    local leak = sat(t - u) / rate
    if f2i(leak) > 0 then
      r = r + leak
      u = t
    end
    if f2i(r) > burst then r = burst end
    rem = f2i(r)
    rt = reset_time(t, limit, rem, rate_ms)
    if rem == 0 and hits > 0 then
      status = 1
    elseif rem == hits then
      r, rem, rt = 0, 0, reset_time(t, limit, 0, rate_ms)
    elseif hits > rem then
      status = 1
      if drain then r, rem = 0, 0 end
    elseif hits ~= 0 then
      r = r - hits
      rem = f2i(r)
      rt = reset_time(t, limit, rem, rate_ms)
    end
    if status == 1 then ra = retry_after(r, u, e, hits, t, rate, burst) end
  end

  put(i, spack('Bdddd', 1, r, u, b, e), e, e0, now, margin, v)
  nout = nout + 1
  out[nout] = spack(REC, status, limit, rem, rt, ra, 0)
end
flush()
return table.concat(out)
