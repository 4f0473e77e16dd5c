-- Put before every script of src/store/lua/ at build time (CMakeLists.txt), so that what they
-- share is written once: number helpers, the reading and writing of the keys, the arguments every
-- request has, the answers. Redis sees (and names by SHA1) the joined text.
--
-- Numbers: Lua's are doubles; integers are exact below 2^53 (EXACT), and int64 saturates at 2^63
-- (TOP), as the engine's satmath.h does.
-- The library functions every item calls, as locals (a global is two table lookups a call).
local spack, sunpack, sbyte = struct.pack, struct.unpack, string.byte
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
local function fmt(x) -- a decimal string (int64 past 2^53 is no Lua integer): a lease expiry
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

-- Many items per call: KEYS[i] and its item ARGV[i], decided in order (a key repeated in one call
-- sees its earlier items). The keys are read with one MGET and written once each at the end by
-- flush(): a command from Lua costs about what a whole decision does, so a call pays two per key at
-- most, not two per item.
if #ARGV ~= #KEYS then return redis.error_reply('sluice: one ARGV per key') end
local vals = redis.call('MGET', unpack(KEYS))
-- A key's slot j (first[k]), in the order of first writes: its key ks[j], its new state sv[j]
-- (false: delete) expiring at se[j], the state and expiry Redis held (so[j], sh[j]), and the base
-- its PX is counted from (sb[j]). Arrays, not tables keyed by the key: a key costs one hash store.
local first, ks, sv, se, sh, so, sb, nk = {}, {}, {}, {}, {}, {}, {}, 0
local function state(i) -- KEYS[i]'s state as this call left it (false or nil: none)
  local j = first[KEYS[i]]
  if j then return sv[j] end
  return vals[i]
end
-- k's new state v (false: delete) expiring at e on the caller's clock `now`; v0 and e0: the state
-- this item read with state(i) and its expiry (nil: none, or another algorithm's). The first put of
-- a key in a call is made after reading what Redis holds, so its v0 is the key's value and its e0
-- the expiry of the key's TTL.
local function put(k, v, e, e0, now, margin, v0)
  local j = first[k]
  if not j then
    nk = nk + 1
    j = nk
    first[k], ks[j], sh[j], so[j] = j, k, e0, v0
  end
  sv[j], se[j] = v, e
  if v then sb[j] = now - margin end
end
local function expiry(e, now, margin) -- PX of a state expiring at e: `margin` ms past it
  local ttl = e - now + margin
  if ttl < 1 then ttl = 1 end
  if ttl > 1e13 then ttl = 1e13 end
  return string.format('%d', ttl)
end
-- Each key written once: DEL when Redis held a state; nothing when Redis holds this very state
-- (a peek, a request over the limit: the state, its expiry included, did not change) or no state
-- at all; SET KEEPTTL when Redis held our state with the same expiry (its TTL is already `margin`
-- past it: half the cost of SET PX); else SET PX.
local function flush()
  for j = 1, nk do
    local k, v = ks[j], sv[j]
    if not v then
      if so[j] then redis.call('DEL', k) end -- nothing to delete when Redis held no state
    elseif v == so[j] then
      -- unchanged
    elseif sh[j] == se[j] then
      redis.call('SET', k, v, 'KEEPTTL')
    else
      redis.call('SET', k, v, 'PX', expiry(se[j], sb[j], 0))
    end
  end
end

-- The arguments: ARGV[i] is one string, KEYS[i]'s item (store/rscript.c), its numbers in decimal
-- separated by single spaces: hits limit duration t now margin reset drain, then the algorithm's
-- own (its header lists them), so that an operator can call a script by hand. items(n, hex): the
-- pattern of an item of n fields, the algorithm's own decimal, or hex with `hex` (CONCURRENCY's
-- lease ids); item(i, pat, hex): the eight common fields as numbers and booleans, then the
-- algorithm's own as numbers, or as strings with `hex`. An item the same as the one before it is
-- not parsed again: consecutive items of a call often are the same string (one limit, decided at
-- one time, on many keys), and comparing two Lua strings costs nothing (they are interned).
local function items(n, hex)
  local x = ' (%-?%d+)'
  if hex then x = ' (%x+)' end
  return '^(%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+)' ..
    string.rep(x, n - 8) .. '$'
end
local function bad(i) error('sluice: ARGV[' .. i .. '] is not an item of this script') end
local last, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12 -- the item parsed last
local function item(i, pat, hex)
  local s = ARGV[i]
  if s ~= last then
    local h, l, d, t, now, m, rs, dr, x1, x2, x3, x4 = string.match(s, pat)
    if not h then bad(i) end
    if not hex then
      x1, x2, x3, x4 = x1 and tonumber(x1), x2 and tonumber(x2), x3 and tonumber(x3),
        x4 and tonumber(x4)
    end
    last, f1, f2, f3, f4, f5, f6, f7, f8 = s, tonumber(h), tonumber(l), tonumber(d), tonumber(t),
      tonumber(now), tonumber(m), rs == '1', dr == '1'
    f9, f10, f11, f12 = x1, x2, x3, x4
  end
  return f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12
end
-- Every item checked before anything is written, for the scripts that write a key's neighbour as
-- they go (a malformed item, from a call by hand, must not leave earlier items half written).
local function check(pat)
  for i = 1, #ARGV do
    if not string.find(ARGV[i], pat) then bad(i) end
  end
end

-- The answer: one string, the items' records one after the other, each six little-endian doubles
-- status limit remaining reset_time retry_after delay_ms (store/rscript.c reads them, saturating
-- to int64; CONCURRENCY's record differs: its header). Status -1: out of the exact range.
local out = {}
local function answer(status, limit, rem, reset_time, retry_after, delay_ms)
  out[#out + 1] = spack('<dddddd', status, limit, rem, reset_time, retry_after, delay_ms)
end
