-- TOKEN_BUCKET on one key, deciding exactly what src/core/tokenbucket.c decides (Gubernator v2's
-- semantics; the comments there say why each rule is what it is). The C side (store/rscript.c)
-- validates the request, computes the decision time and the Gregorian expirations, and passes:
--   KEYS[i]  a key: a string, struct.pack('Bdddddd', 0, status, limit, duration, remaining,
--            created_at, expire_at) (the algorithm's number, then doubles)
--   ARGV     hits limit duration t now margin reset drain | greg gexp_now gexp_t max_count
--            (gexp_now, gexp_t: the end of the Gregorian interval holding now and t)
-- and gets back {status, limit, remaining, reset_time, retry_after, delay_ms = 0} as decimal
-- strings. Numbers are Lua doubles: exact up to 2^53, which the engine's max-count bound (2^53 by
-- default) keeps counts under.
-- The key expires `margin` ms after expire_at (Redis's clock), so nothing outlives its use; the
-- expiry rule itself (expire_at < now: a fresh key) is judged here on the caller's clock.
-- Many items per call: KEYS[i] with the S = #ARGV / #KEYS arguments ARGV[(i-1)*S + 1 ..] each,
-- decided in order (a key repeated in one call sees its earlier items), answers appended.
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
  local greg = ARGV[o + 9] == '1'
  local gnow, gt = tonumber(ARGV[o + 10]), tonumber(ARGV[o + 11])
  local maxc = tonumber(ARGV[o + 12])

  local v = state(i)
  local s, l, d, r, c, e
  local a = nil
  if v and string.byte(v, 1) == 0 then
    a, s, l, d, r, c, e = struct.unpack('Bdddddd', v)
    if e < now then a = nil end -- expired: as if absent
  end

  local status, rem, rt, ra = 0, 0, 0, 0
  if a ~= 0 then
    -- a new item (or another algorithm's state: start fresh)
    e = t + dur
    if greg then e = gnow end
    s, l, d, r, c = 0, limit, dur, limit - hits, t
    status, rem, rt = 0, r, e
    if hits > limit then
      status, rem, r = 1, limit, limit
      ra = e + 1 - t
    end
  else
    if reset then
      r, l, s = limit, limit, 0
      status, rem, rt = 0, limit, 0
    else
      if l ~= limit then
        r = r + (limit - l)
        if r < 0 then r = 0 end
        l = limit
      end
      if d ~= dur then
        local exp = c + dur
        if greg then exp = gnow end
        if exp <= t then
          if greg then exp = gt else exp = t + dur end
          c, r, s = t, l, 0
        end
        e, d = exp, dur
      end
      status, rem, rt = s, r, e
      if hits == 0 then
        -- a peek reports the sticky status
      elseif r == 0 and hits > 0 then
        status, s = 1, 1
      elseif r == hits then
        r, rem = 0, 0
      elseif hits > r then
        status = 1
        if drain then r, rem = 0, 0 end
      else
        r = r - hits
        rem = r
      end
      if status == 1 then ra = e + 1 - t end
    end
  end
  if maxc > 0 and r > maxc then
    r = maxc
    if rem > maxc then rem = maxc end
  end

  local ttl = e - now + margin
  if ttl < 1 then ttl = 1 end
  if ttl > 1e13 then ttl = 1e13 end
  put(k, struct.pack('Bdddddd', 0, s, l, d, r, c, e), string.format('%d', ttl))
  if ra < 0 then ra = 0 end
  local f = '%d'
  local ans = {string.format(f, status), string.format(f, l), string.format(f, rem),
    string.format(f, rt), string.format(f, ra)}
  for j = 1, 5 do out[#out + 1] = ans[j] end
  out[#out + 1] = '0'
end
for _, k in ipairs(order) do
  if seen[k] then redis.call('SET', k, seen[k], 'PX', px[k]) else redis.call('DEL', k) end
end
return out
