-- Put before every script of src/store/lua/ at build time (CMakeLists.txt), so that what they
-- share is written once: number helpers, the reading and writing of the keys, the arguments every
-- request has, the answers. Redis sees (and names by SHA1) the joined text.
--
-- Numbers: Lua's are doubles; integers are exact below 2^53 (EXACT), and int64 saturates at 2^63
-- (TOP), as the engine's satmath.h does.
local TOP = 9223372036854775808
local EXACT = 9007199254740992
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
local function fmt(x) -- an answer: a decimal string (int64 past 2^53 is no Lua integer)
  if x >= TOP then return '9223372036854775807' end
  if x <= -TOP then return '-9223372036854775808' end
  return string.format('%d', x)
end
-- floor(a / b) and a - that * b, exactly, for |a| < 2^53 and 0 < b < 2^53
local function divmod(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  while r < 0 do q, r = q - 1, r + b end
  while r >= b do q, r = q + 1, r - b end
  return q, r
end
local function ceil_div(a, b)
  local q, r = divmod(a, b)
  if r > 0 then q = q + 1 end
  return q
end

-- Many items per call: KEYS[i] with the NA = #ARGV / #KEYS arguments ARGV[(i-1)*NA + 1 ..]
-- each, decided in order (a key repeated in one call sees its earlier items). The keys are read
-- with one MGET and written once each at the end (SET PX, or DEL) by flush(): a command from Lua
-- costs about what a whole decision does, so a call pays two per key at most, not two per item.
local NA = #ARGV / #KEYS
local vals = redis.call('MGET', unpack(KEYS))
local seen, px, order = {}, {}, {}
local function state(i) -- KEYS[i]'s state as this call left it (false or nil: none)
  local v = seen[KEYS[i]]
  if v == nil then v = vals[i] end
  return v
end
local function put(k, v, ttl) -- v false: delete
  if seen[k] == nil then order[#order + 1] = k end
  seen[k], px[k] = v, ttl
end
local function expiry(e, now, margin) -- PX of a state expiring at e: `margin` ms past it
  local ttl = e - now + margin
  if ttl < 1 then ttl = 1 end
  if ttl > 1e13 then ttl = 1e13 end
  return string.format('%d', ttl)
end
local function flush()
  for _, k in ipairs(order) do
    if seen[k] then redis.call('SET', k, seen[k], 'PX', px[k]) else redis.call('DEL', k) end
  end
end

-- The arguments every request has (store/rscript.c): hits limit duration t now margin reset drain
local function common(o)
  return tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]),
    tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5]), tonumber(ARGV[o + 6]), ARGV[o + 7] == '1',
    ARGV[o + 8] == '1'
end

-- The answers, six per item: status limit remaining reset_time retry_after delay_ms
local out = {}
local function answer(status, limit, rem, reset_time, retry_after, delay_ms)
  out[#out + 1] = fmt(status)
  out[#out + 1] = fmt(limit)
  out[#out + 1] = fmt(rem)
  out[#out + 1] = fmt(reset_time)
  out[#out + 1] = fmt(retry_after)
  out[#out + 1] = fmt(delay_ms)
end
