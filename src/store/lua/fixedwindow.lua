-- FIXED_WINDOW on one key, deciding exactly what sl_win_fixed_decide (src/core/window.c) decides:
-- count hits in the window holding t, admit n iff count + n <= limit; a request dated before the
-- key's window counts in that window; a key whose count is back to 0 is deleted.
--   KEYS[i]  a key: a string, struct.pack('Bdddddd', 3, gregorian, duration, window start,
--            window end, count, expire_at)
--   ARGV     hits limit duration t now margin reset drain | greg start end
--            (start, end: the window holding t, computed in C: the calendar's with Gregorian)
-- returns {status, limit, remaining, reset_time, retry_after, delay_ms = 0} as decimal strings.
-- Many items per call: KEYS[i] with the S = #ARGV / #KEYS arguments ARGV[(i-1)*S + 1 ..] each,
-- decided in order (a key repeated in one call sees its earlier items), answers appended.
local TOP = 9223372036854775808 -- 2^63: int64 saturates here
local function fmt(x)
  if x >= TOP then return '9223372036854775807' end
  if x <= -TOP then return '-9223372036854775808' end
  return string.format('%d', x)
end

-- Keys are read with one MGET and written once each at the end (SET PX, or DEL): a command
-- from Lua costs about what the whole decision does, so a call of many keys pays two per key at
-- most, not two per item. `seen` carries a key's state between its items in this call.
local vals = redis.call('MGET', unpack(KEYS))
local seen, px, order = {}, {}, {}
local function state(i)
  local v = seen[KEYS[i]]
  if v == nil then v = vals[i] end
  return v
end
local function put(k, v, ttl) -- v false: delete
  if seen[k] == nil then order[#order + 1] = k end
  seen[k], px[k] = v, ttl
end
local S = #ARGV / #KEYS
local out = {}
for i = 1, #KEYS do
  local k, o = KEYS[i], (i - 1) * S
  local hits, limit, dur = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])
  local t, now = tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5])
  local margin, reset, drain = tonumber(ARGV[o + 6]), ARGV[o + 7] == '1', ARGV[o + 8] == '1'
  local greg, start, wend = tonumber(ARGV[o + 9]), tonumber(ARGV[o + 10]), tonumber(ARGV[o + 11])

  local v = state(i)
  local a, g, d, ws, we, n, e = nil, 0, 0, 0, 0, 0, 0
  if v and string.byte(v, 1) == 3 then
    a, g, d, ws, we, n, e = struct.unpack('Bdddddd', v)
    if e < now then a = nil end -- expired: as if absent
  end

  local same = a == 3 and d == dur and g == greg and not reset
  local count = 0
  if same then
    if t < ws then
      t, start, wend = ws, ws, we -- the key's own window
    end
    if start == ws then count = n end
  end

  local over = false
  if hits > 0 then
    if hits <= limit - count then
      count = count + hits
    else
      over = true
      if drain and count < limit then count = limit end
    end
  elseif hits < 0 then
    count = count + hits
    if count < 0 then count = 0 end
  end

  local status, rem, ra = 0, 0, 0
  if over then
    status = 1
    ra = wend - t
    if ra < 0 then ra = 0 end
  end
  if count < limit then rem = limit - count end

  if count == 0 then
    put(k, false)
  else
    e = wend
    if e < TOP then e = e - 1 end
    local ttl = e - now + margin
    if ttl < 1 then ttl = 1 end
    if ttl > 1e13 then ttl = 1e13 end
    put(k, struct.pack('Bdddddd', 3, greg, dur, start, wend, count, e), string.format('%d', ttl))
  end
  local ans = {fmt(status), fmt(limit), fmt(rem), fmt(wend), fmt(ra)}
  for j = 1, 5 do out[#out + 1] = ans[j] end
  out[#out + 1] = '0'
end
for _, k in ipairs(order) do
  if seen[k] then redis.call('SET', k, seen[k], 'PX', px[k]) else redis.call('DEL', k) end
end
return out
