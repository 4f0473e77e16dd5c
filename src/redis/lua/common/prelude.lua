-- SPDX-License-Identifier: Apache-2.0
-- Put before every script of src/redis/lua/ at build time (CMakeLists.txt), so that what they
-- share is written once: number helpers, the reading and writing of the keys, the arguments every
-- request has, the answers. Redis sees (and names by SHA1) the joined text.
--
-- Numbers: Lua's are doubles; integers are exact below 2^53 (EXACT), and int64 saturates at 2^63
-- (TOP), as the engine's satmath.h does.
-- The library functions every item calls, as locals (a global is two table lookups a call).
local spack, sunpack, sbyte = struct.pack, struct.unpack, string.byte
local rcall = redis.call
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
-- sees its earlier items). The keys are read with one MGET. A key that one item of the call has is
-- written by its item's put(), at once; a key that several items have (prepare() finds them) is
-- written once, at the end, by flush(): a command from Lua costs about what a whole decision does,
-- so a call pays two per key at most, not two per item, and keeping a key's state in Lua costs
-- more than writing it at once when no other item needs it.
-- ARGV: one item per key, then optionally 'd', the caller's word that no key is there twice (the
-- store sends it when so: looking for repeated keys costs Redis a table insert per key).
local distinct = #ARGV == #KEYS + 1 and ARGV[#ARGV] == 'd'
if #ARGV ~= #KEYS and not distinct then
  return redis.error_reply("sluice: one ARGV per key, then optionally 'd'")
end
local KEYS, ARGV = KEYS, ARGV -- locals: a global is a table lookup
local vals = rcall('MGET', unpack(KEYS))
-- rep[k]: k is the key of more than one item. A repeated key's slot j (first[k]), in the order of
-- first writes: the index ks[j] of its first item, its new state sv[j] (false: delete) expiring at
-- se[j] and put at sn[j] with margin sm[j], and the state and expiry Redis held (so[j], sh[j]).
local rep, first, ks, sv, se, sn, sm, sh, so, nk = {}, {}, {}, {}, {}, {}, {}, {}, {}, 0
-- KEYS[i]'s state as this call left it (false or nil: none): vals[i], the value MGET read, while
-- no repeated key was put (nk == 0); the scripts read vals[i] and call state(i) only when nk > 0.
local function state(i)
  local j = first[KEYS[i]]
  if j then return sv[j] end
  return vals[i]
end
local function expiry(e, now, margin) -- PX of a state expiring at e: `margin` ms past it
  local ttl = e - now + margin
  if ttl < 1 then ttl = 1 end
  if ttl > 1e13 then ttl = 1e13 end
  return string.format('%d', ttl)
end
-- KEYS[i]'s new state v (false: delete) expiring at e on the caller's clock `now` (`margin` ms
-- before Redis drops the key); v0 and e0: the state this item read (vals[i] or state(i)) and its
-- expiry (nil: none, or another algorithm's). A key of one item is written at once; a repeated
-- key's is kept here and written by flush(), where v0 and e0 are what Redis held (the first
-- put's). The write: DEL when Redis held a state; nothing when Redis holds this very state (a
-- peek, a request over the limit: the state, its expiry included, did not change) or no state at
-- all; when Redis held our state with the same expiry (its TTL is already `margin` past it), the
-- bytes overwritten in place, which keeps the TTL: SETRANGE when the length is the same (the
-- cheapest write from Lua: an integer answer, and Redis keeps its string), else SET KEEPTTL;
-- else SET PX. (Arguments to rcall are strings: Redis formats a Lua number with %.17g.)
local flushing = false
local function put(i, v, e, e0, now, margin, v0)
  local k = KEYS[i]
  if rep[k] and not flushing then
    local j = first[k]
    if not j then
      nk = nk + 1
      j = nk
      first[k], ks[j], sh[j], so[j] = j, i, e0, v0
    end
    sv[j], se[j] = v, e
    if v then sn[j], sm[j] = now, margin end
    return
  end
  if not v then
    if v0 then rcall('DEL', k) end -- nothing to delete when Redis held no state
  elseif v == v0 then
    -- unchanged
  elseif e0 == e then
    if #v == #v0 then rcall('SETRANGE', k, '0', v) else rcall('SET', k, v, 'KEEPTTL') end
  else
    rcall('SET', k, v, 'PX', expiry(e, now, margin))
  end
end
local function flush()
  flushing = true
  for j = 1, nk do put(ks[j], sv[j], se[j], sh[j], sn[j], sm[j], so[j]) end
end

-- The arguments: ARGV[i] is one string, KEYS[i]'s item (redis/rscript.c), its numbers in decimal
-- separated by single spaces: hits limit duration t now margin reset drain, then the algorithm's
-- own (its header lists them), so that an operator can call a script by hand; or the empty string
-- for the same item as ARGV[i - 1] (consecutive items of a call often are the same: one limit,
-- decided at one time, on many keys; an empty string costs Redis and Lua nothing to receive).
-- items(n, hex): the pattern of an item of n fields, the algorithm's own decimal, or hex with
-- `hex` (CONCURRENCY's lease ids); item(i, pat, hex): the eight common fields as numbers and
-- booleans, then the algorithm's own as numbers, or as strings with `hex`, called for i = 1, 2, ...
-- in order. An item the same as the one before it is not parsed again (comparing two Lua strings
-- costs nothing: they are interned).
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
  if s == '' then
    if i == 1 then bad(i) end
  elseif s ~= last then
    local h, l, d, t, now, m, rs, dr, x1, x2, x3, x4 = string.match(s, pat)
    if not h then bad(i) end
    if not hex then
      x1, x2, x3, x4 = x1 and tonumber(x1), x2 and tonumber(x2), x3 and tonumber(x3),
        x4 and tonumber(x4)
    end
    last, f1, f2, f3, f4, f5, f6, f7, f8 = s, tonumber(h), tonumber(l), tonumber(d), tonumber(t),
      tonumber(now), tonumber(m), rs == '1', dr == '1' or (dr == '2' and 2)
    f9, f10, f11, f12 = x1, x2, x3, x4
  end
  return f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12
end
-- Before anything is written: every item checked (a malformed item, from a call by hand, must not
-- leave earlier items half written; parsed here, a call's items that are all one item are parsed
-- once), and the keys repeated in the call found (rep, for put()), unless the caller said there
-- are none. Every script calls it first.
local function prepare(pat, hex)
  local seen = {}
  for i = 1, #KEYS do
    local s = ARGV[i]
    if s == '' and i > 1 or s == last then
      -- the item before it: checked
    else
      item(i, pat, hex)
    end
    if not distinct then
      local k = KEYS[i]
      if seen[k] then rep[k] = true else seen[k] = true end
    end
  end
end

-- The answer: one string, the items' records one after the other, each six little-endian doubles
-- status limit remaining reset_time retry_after delay_ms (redis/rscript.c reads them, saturating
-- to int64; CONCURRENCY's record differs: its header). Status -1: out of the exact range. Each
-- script appends its item's record itself, nout = nout + 1; out[nout] = spack(REC, ...), not
-- through a helper: a Lua function call costs Redis about what the packing does.
local out, nout, REC = {}, 0, '<dddddd'
