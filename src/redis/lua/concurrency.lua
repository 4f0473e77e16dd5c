-- SPDX-License-Identifier: Apache-2.0
-- CONCURRENCY on one key, deciding what sl_conc_decide (src/core/concurrency.c) decides: at most
-- `limit` leases held at once, each living `duration` ms from its acquire (hits 1) or renewal
-- (hits 0 with its id), given back by a release (hits -1 with its id); expired leases pruned when
-- the earliest one is due. Lease ids are made by the caller (random, 64 bits, in hex: the id a
-- node answers must be unguessable and unique across nodes) and the script only keeps them.
--   KEYS[i]  a key: a string, struct.pack('Bdd', 6, earliest expiry, latest expiry), and the
--            leases, a hash id -> expiry (decimal ms), under KEYS[i] .. '|leases'
--   ARGV[i]  hits limit duration t now margin reset drain | lease_in new_id
--            (lease_in: the request's lease id in hex, or '0'; new_id: the id an acquire takes)
-- answers a record per item (below): status limit remaining reset_time retry_after lease_taken;
-- status -2 is "lease not found" (a per-item error, the state pruned as the engine leaves it).
-- Many items per call, and the helpers used below: common/prelude.lua.
-- An item's record: the prelude's answer with the lease taken in place of delay_ms, that is five
-- little-endian doubles (status limit remaining reset_time retry_after) then the id as 16 hex
-- digits, zeros for none (ids are 64 bits: a double cannot hold one). 56 bytes.
local function lease(status, limit, rem, reset_time, retry_after, id)
  nout = nout + 1
  out[nout] = spack('<ddddd', status, limit, rem, reset_time, retry_after) ..
    string.rep('0', 16 - #id) .. id
end
local function bounds(lk)
  local all = rcall('HGETALL', lk)
  local lo, hi = TOP, -TOP
  for j = 2, #all, 2 do
    local x = tonumber(all[j])
    if x < lo then lo = x end
    if x > hi then hi = x end
  end
  return lo, hi
end

local ITEM = items(10, true)
prepare(ITEM, true)
for i = 1, #KEYS do
  local k = KEYS[i]
  local lk = k .. '|leases'
  local n, L, D, t, now, margin, reset, _, lease_in, new_id = item(i, ITEM, true)

  local v = vals[i]
  if nk > 0 then v = state(i) end
  local was, lo, hi, len, e0 = false, TOP, -TOP, 0, nil
  if v and sbyte(v, 1) == 6 and #v == 17 then
    local _
    _, lo, hi = sunpack('Bdd', v)
    e0 = hi
    if e0 < TOP then e0 = e0 - 1 end
    was = hi - 1 >= t -- expired at t (the last lease gone): as if absent
  end
  if was and not reset then
    len = rcall('HLEN', lk)
    if len > 0 and t >= lo then -- prune
      local all = rcall('HGETALL', lk)
      for j = 1, #all, 2 do
        if tonumber(all[j + 1]) <= t then rcall('HDEL', lk, all[j]) end
      end
      len = rcall('HLEN', lk)
      lo, hi = bounds(lk)
    end
  else
    rcall('DEL', lk)
    len, lo, hi = 0, TOP, -TOP
  end

  local status, lease_out = 0, '0'
  if n > 0 then
    if len < L then
      local exp = sat(t + D)
      rcall('HSET', lk, new_id, fmt(exp))
      if len == 0 or exp < lo then lo = exp end
      if len == 0 or exp > hi then hi = exp end
      len = len + 1
      lease_out = new_id
    else
      status = 1
    end
  elseif n == 0 and lease_in ~= '0' then -- renew
    if rcall('HEXISTS', lk, lease_in) == 1 then
      rcall('HSET', lk, lease_in, fmt(sat(t + D)))
      lo, hi = bounds(lk)
    else
      status = -2
    end
  elseif n < 0 then -- release
    if rcall('HDEL', lk, lease_in) == 1 then
      len = len - 1
      lo, hi = bounds(lk)
    else
      status = -2
    end
  end

  -- commit: the key lives while its last lease does
  if len == 0 then
    put(i, false, nil, nil, nil, nil, v)
    rcall('DEL', lk)
  else
    local e = hi
    if e < TOP then e = e - 1 end
    put(i, spack('Bdd', 6, lo, hi), e, e0, now, margin, v)
    rcall('PEXPIRE', lk, expiry(e, now, margin))
  end
  if status == -2 then
    lease(-2, 0, 0, 0, 0, '0')
  else
    local rem, rt, ra = 0, t, 0
    if L - len > 0 then rem = L - len end
    if len > 0 then rt = lo end
    if status == 1 then
      if len > 0 then ra = sat(lo - t) else ra = D end
      if ra < 1 then ra = 1 end
    end
    lease(status, L, rem, rt, ra, lease_out)
  end
end
flush()
return table.concat(out)
