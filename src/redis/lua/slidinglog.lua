-- SPDX-License-Identifier: Apache-2.0
-- SLIDING_LOG on one key, deciding exactly what sl_slog_decide (src/core/slidelog.c) decides: one
-- timestamp per admitted hit, entries at or before t - duration dropped first, n hits admitted
-- iff live + n <= limit; a request dated before the newest entry counts at the newest entry's time
-- (the log stays sorted); negative hits give back the newest entries; an empty log is no key.
--   KEYS[i]  a key: a string, struct.pack('Bd', 5, expire_at) (the algorithm's number, so that
--            another algorithm's script sees a state not its own), and the log itself, a list of
--            decimal timestamps oldest first, under KEYS[i] .. '|log'
--   ARGV[i]  hits limit duration t now margin reset drain
-- answers a record per item: status limit remaining reset_time retry_after delay_ms (0).
-- Many items per call, and the helpers used below: common/prelude.lua.
-- Work per item: O(hits + expired entries) list operations; limit <= --max-log-limit bounds both.

local ITEM = items(8)
prepare(ITEM)
for i = 1, #KEYS do
  local k = KEYS[i]
  local lk = k .. '|log'
  local n, L, D, t, now, margin, reset, drain = item(i, ITEM)

  local v = vals[i]
  if nk > 0 then v = state(i) end
  local same, e0 = false, nil
  if v and sbyte(v, 1) == 5 and #v == 9 then
    local _, e = sunpack('Bd', v)
    e0 = e
    same = e >= t and not reset -- expired at the decision time t: as if absent
  end
  local len = 0
  if same then
    len = rcall('LLEN', lk)
    if len > 0 then
      local newest = tonumber(rcall('LINDEX', lk, '-1'))
      if t < newest then t = newest end
    end
  else
    rcall('DEL', lk)
  end
  local horizon = sat(t - D)
  while len > 0 and tonumber(rcall('LINDEX', lk, '0')) <= horizon do
    rcall('LPOP', lk)
    len = len - 1
  end

  local over, add, drop = false, 0, 0
  if n > 0 then
    if n <= L - len then
      add = n
    else
      over = true
      if drain and L - len > 0 then add = L - len end
    end
  elseif n < 0 then
    drop = -n
    if drop > len then drop = len end
  end
  for _ = 1, drop do rcall('RPOP', lk) end
  len = len - drop
  if add > 0 then
    local ts, batch = fmt(t), {}
    for j = 1, add do
      batch[#batch + 1] = ts
      if #batch == 1000 or j == add then
        rcall('RPUSH', lk, unpack(batch))
        batch = {}
      end
    end
    len = len + add
  end

  local status, rem, ra = 0, 0, 0
  if L - len > 0 then rem = L - len end
  local newest_end = t
  if len > 0 then newest_end = sat(tonumber(rcall('LINDEX', lk, '-1')) + D) end
  if over then
    status = 1
    local when
    if n > L then
      when = newest_end -- never fits: time until empty
    else
      local j = len - (L - n) - 1 -- n fit once the entries up to j have aged out
      if j < 0 then when = t else when = sat(tonumber(rcall('LINDEX', lk, j)) + D) end
    end
    ra = sat(when - t)
    if ra < 0 then ra = 0 end
  end

  if len == 0 then
    put(i, false, nil, nil, nil, nil, v)
    rcall('DEL', lk)
  else
    local e = newest_end
    if e < TOP then e = e - 1 end
    put(i, spack('Bd', 5, e), e, e0, now, margin, v)
    rcall('PEXPIRE', lk, expiry(e, now, margin))
  end
  nout = nout + 1
  out[nout] = spack(REC, status, L, rem, newest_end, ra, 0)
end
flush()
return table.concat(out)
