-- SLIDING_LOG on one key, deciding exactly what sl_slog_decide (src/core/slidelog.c) decides: one
-- timestamp per admitted hit, entries at or before t - duration dropped first, n hits admitted
-- iff live + n <= limit; a request dated before the newest entry counts at the newest entry's time
-- (the log stays sorted); negative hits give back the newest entries; an empty log is no key.
--   KEYS[i]  a key: a string, struct.pack('Bd', 5, expire_at) (the algorithm's number, so that
--            another algorithm's script sees a state not its own), and the log itself, a list of
--            decimal timestamps oldest first, under KEYS[i] .. '|log'
--   ARGV     hits limit duration t now margin reset drain
-- returns {status, limit, remaining, reset_time, retry_after, delay_ms = 0} as decimal strings.
-- Many items per call: KEYS[i] with the S = #ARGV / #KEYS arguments ARGV[(i-1)*S + 1 ..] each,
-- decided in order (a key repeated in one call sees its earlier items), answers appended.
-- Work per item: O(hits + expired entries) list operations; limit <= --max-log-limit bounds both.
local TOP = 9223372036854775808 -- 2^63: int64 saturates here
local function sat(x)
  if x >= TOP then return TOP end
  if x <= -TOP then return -TOP end
  return x
end
local function fmt(x)
  if x >= TOP then return '9223372036854775807' end
  if x <= -TOP then return '-9223372036854775808' end
  return string.format('%d', x)
end

local S = #ARGV / #KEYS
local out = {}
for i = 1, #KEYS do
  local k, o = KEYS[i], (i - 1) * S
  local lk = k .. '|log'
  local n, L, D = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
  local t, now = tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5])
  local margin, reset, drain = tonumber(ARGV[o + 6]), ARGV[o + 7] == '1', ARGV[o + 8] == '1'

  local v = redis.call('GET', k)
  local same = false
  if v and string.byte(v, 1) == 5 then
    local _, e = struct.unpack('Bd', v)
    same = e >= now and not reset -- expired: as if absent
  end
  local len = 0
  if same then
    len = redis.call('LLEN', lk)
    if len > 0 then
      local newest = tonumber(redis.call('LINDEX', lk, -1))
      if t < newest then t = newest end
    end
  else
    redis.call('DEL', lk)
  end
  local horizon = sat(t - D)
  while len > 0 and tonumber(redis.call('LINDEX', lk, 0)) <= horizon do
    redis.call('LPOP', lk)
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
  for _ = 1, drop do redis.call('RPOP', lk) end
  len = len - drop
  if add > 0 then
    local ts, batch = fmt(t), {}
    for j = 1, add do
      batch[#batch + 1] = ts
      if #batch == 1000 or j == add then
        redis.call('RPUSH', lk, unpack(batch))
        batch = {}
      end
    end
    len = len + add
  end

  local status, rem, ra = 0, 0, 0
  if L - len > 0 then rem = L - len end
  local newest_end = t
  if len > 0 then newest_end = sat(tonumber(redis.call('LINDEX', lk, -1)) + D) end
  if over then
    status = 1
    local when
    if n > L then
      when = newest_end -- never fits: time until empty
    else
      local j = len - (L - n) - 1 -- n fit once the entries up to j have aged out
      if j < 0 then when = t else when = sat(tonumber(redis.call('LINDEX', lk, j)) + D) end
    end
    ra = sat(when - t)
    if ra < 0 then ra = 0 end
  end

  if len == 0 then
    redis.call('DEL', k, lk)
  else
    local e = newest_end
    if e < TOP then e = e - 1 end
    local ttl = e - now + margin
    if ttl < 1 then ttl = 1 end
    if ttl > 1e13 then ttl = 1e13 end
    local px = string.format('%d', ttl)
    redis.call('SET', k, struct.pack('Bd', 5, e), 'PX', px)
    redis.call('PEXPIRE', lk, px)
  end
  out[#out + 1] = fmt(status)
  out[#out + 1] = fmt(L)
  out[#out + 1] = fmt(rem)
  out[#out + 1] = fmt(newest_end)
  out[#out + 1] = fmt(ra)
  out[#out + 1] = '0'
end
return out
