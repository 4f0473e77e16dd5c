-- CONCURRENCY on one key, deciding what sl_conc_decide (src/core/concurrency.c) decides: at most
-- `limit` leases held at once, each living `duration` ms from its acquire (hits 1) or renewal
-- (hits 0 with its id), given back by a release (hits -1 with its id); expired leases pruned when
-- the earliest one is due. Lease ids are made by the caller (random, 64 bits, in hex: the id a
-- node answers must be unguessable and unique across nodes) and the script only keeps them.
--   KEYS[i]  a key: a string, struct.pack('Bdd', 6, earliest expiry, latest expiry), and the
--            leases, a hash id -> expiry (decimal ms), under KEYS[i] .. '|leases'
--   ARGV     hits limit duration t now margin reset drain | lease_in new_id
--            (lease_in: the request's lease id in hex, or '0'; new_id: the id an acquire takes)
-- returns {status, limit, remaining, reset_time, retry_after, lease id (hex) or '0'}; status -2
-- is "lease not found" (a per-item error, the state pruned as the engine leaves it).
-- Many items per call, and the helpers used below: common/prelude.lua.
local function bounds(lk)
  local all = redis.call('HGETALL', lk)
  local lo, hi = TOP, -TOP
  for j = 2, #all, 2 do
    local x = tonumber(all[j])
    if x < lo then lo = x end
    if x > hi then hi = x end
  end
  return lo, hi
end

for i = 1, #KEYS do
  local k, o = KEYS[i], (i - 1) * NA
  local lk = k .. '|leases'
  local n, L, D, t, now, margin, reset = common(o)
  local lease_in, new_id = ARGV[o + 9], ARGV[o + 10]

  local v = state(i)
  local was, lo, hi, len = false, TOP, -TOP, 0
  if v and string.byte(v, 1) == 6 then
    local _
    _, lo, hi = struct.unpack('Bdd', v)
    was = hi - 1 >= now -- expired (the last lease gone): as if absent
  end
  if was and not reset then
    len = redis.call('HLEN', lk)
    if len > 0 and t >= lo then -- prune
      local all = redis.call('HGETALL', lk)
      for j = 1, #all, 2 do
        if tonumber(all[j + 1]) <= t then redis.call('HDEL', lk, all[j]) end
      end
      len = redis.call('HLEN', lk)
      lo, hi = bounds(lk)
    end
  else
    redis.call('DEL', lk)
    len, lo, hi = 0, TOP, -TOP
  end

  local status, lease_out = 0, '0'
  if n > 0 then
    if len < L then
      local exp = sat(t + D)
      redis.call('HSET', lk, new_id, fmt(exp))
      if len == 0 or exp < lo then lo = exp end
      if len == 0 or exp > hi then hi = exp end
      len = len + 1
      lease_out = new_id
    else
      status = 1
    end
  elseif n == 0 and lease_in ~= '0' then -- renew
    if redis.call('HEXISTS', lk, lease_in) == 1 then
      redis.call('HSET', lk, lease_in, fmt(sat(t + D)))
      lo, hi = bounds(lk)
    else
      status = -2
    end
  elseif n < 0 then -- release
    if redis.call('HDEL', lk, lease_in) == 1 then
      len = len - 1
      lo, hi = bounds(lk)
    else
      status = -2
    end
  end

  -- commit: the key lives while its last lease does
  if len == 0 then
    put(k, false)
    redis.call('DEL', lk)
  else
    local e = hi
    if e < TOP then e = e - 1 end
    local ms = expiry(e, now, margin)
    put(k, struct.pack('Bdd', 6, lo, hi), ms)
    redis.call('PEXPIRE', lk, ms)
  end
  if status == -2 then
    answer(-2, 0, 0, 0, 0, 0)
  else
    local rem, rt, ra = 0, t, 0
    if L - len > 0 then rem = L - len end
    if len > 0 then rt = lo end
    if status == 1 then
      if len > 0 then ra = sat(lo - t) else ra = D end
      if ra < 1 then ra = 1 end
    end
    answer(status, L, rem, rt, ra, 0)
    out[#out] = lease_out -- the sixth answer: the lease taken, in hex
  end
end
flush()
return out
