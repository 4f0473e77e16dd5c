-- LEAKY_BUCKET on one key, deciding exactly what src/core/leakybucket.c decides (Gubernator v2's
-- semantics: the comments there say why each rule is what it is). remaining is a double, as in
-- Gubernator, and Lua's numbers are the same IEEE doubles, so the fraction leaks identically; it
-- is stored with 17 significant digits, which read back to the same double.
--   KEYS[i]  a key (a hash: a algorithm, r remaining, u updated_at, b burst, e expire_at)
--   ARGV     hits limit duration t now margin reset drain | burst rate_d item_duration
--            (burst: 0 means limit, resolved in C; rate_d: the ms that limit hits take, the
--            Gregorian interval's length when Gregorian; item_duration: how long a hit keeps the
--            item, to the interval's end when Gregorian)
-- returns {status, limit, remaining, reset_time, retry_after} as decimal strings (int64 values
-- past 2^53 cannot be Lua integers).
-- Many items per call: KEYS[i] with the S = #ARGV / #KEYS arguments ARGV[(i-1)*S + 1 ..] each,
-- decided in order (a key repeated in one call sees its earlier items), answers appended.
local S = #ARGV / #KEYS
local out = {}
for i = 1, #KEYS do
  local k, o = KEYS[i], (i - 1) * S
  local hits, limit, t, now = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5])
  local margin, reset, drain = tonumber(ARGV[o + 6]), ARGV[o + 7] == '1', ARGV[o + 8] == '1'
  local burst, d, pdur = tonumber(ARGV[o + 9]), tonumber(ARGV[o + 10]), tonumber(ARGV[o + 11])

  local TOP = 9223372036854775808 -- 2^63: int64 saturates here
  local function sat(x)
    if x ~= x then return 0 end
    if x >= TOP then return TOP end
    if x <= -TOP then return -TOP end
    return x
  end
  local function f2i(x) -- truncation toward zero, saturating (sl_f2i)
    x = sat(x)
    if x >= 0 then return math.floor(x) end
    return math.ceil(x)
  end
  local function fmt(x)
    if x >= TOP then return '9223372036854775807' end
    if x <= -TOP then return '-9223372036854775808' end
    return string.format('%d', x)
  end

  local rate = d / limit
  local rate_ms = 0
  if limit ~= 0 then rate_ms = f2i(rate) end
  local function reset_time(rem)
    return sat(t + sat((limit - rem) * rate_ms))
  end
  local function remaining_at(r, u, t2)
    local leak = sat(t2 - u) / rate
    if f2i(leak) > 0 then r = r + leak end
    if f2i(r) > burst then r = burst end
    return f2i(r)
  end
  local function retry_after(r, u, exp)
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
      local i = 0
      while i < 4 and cand > t and remaining_at(r, u, cand - 1) >= want do cand = cand - 1; i = i + 1 end
      i = 0
      while i < 4 and cand < TOP and remaining_at(r, u, cand) < want do cand = cand + 1; i = i + 1 end
      if remaining_at(r, u, cand) >= want and cand < best then best = cand end
    end
    local x = sat(best - t)
    if x < 0 then return 0 end
    return x
  end

  local v = redis.call('HMGET', k, 'a', 'r', 'u', 'b', 'e')
  local a, e = tonumber(v[1]), tonumber(v[5])
  if a ~= nil and (e == nil or e < now) then a = nil end -- expired: as if absent

  local r, u, b
  local status, rem, rt, ra = 0, 0, 0, 0
  if a ~= 1 then
    local remaining = sat(burst - hits)
    r, u, b, e = remaining, t, burst, sat(t + pdur)
    status, rem, rt = 0, remaining, reset_time(remaining)
    if hits > burst then
      status, rem, rt, r = 1, 0, reset_time(0), 0
      ra = retry_after(r, u, e)
    end
  else
    r, u, b = tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
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
    rt = reset_time(rem)
    if rem == 0 and hits > 0 then
      status = 1
    elseif rem == hits then
      r, rem, rt = 0, 0, reset_time(0)
    elseif hits > rem then
      status = 1
      if drain then r, rem = 0, 0 end
    elseif hits ~= 0 then
      r = r - hits
      rem = f2i(r)
      rt = reset_time(rem)
    end
    if status == 1 then ra = retry_after(r, u, e) end
  end

  redis.call('HSET', k, 'a', '1', 'r', string.format('%.17g', r), 'u', fmt(u), 'b', fmt(b),
    'e', fmt(e))
  local ttl = e - now + margin
  if ttl < 1 then ttl = 1 end
  if ttl > 1e13 then ttl = 1e13 end
  redis.call('PEXPIRE', k, fmt(ttl))
  local ans = {fmt(status), fmt(limit), fmt(rem), fmt(rt), fmt(ra)}
  for j = 1, 5 do out[#out + 1] = ans[j] end
end
return out
