-- TOKEN_BUCKET on one key, deciding exactly what src/core/tokenbucket.c decides (Gubernator v2's
-- semantics; the comments there say why each rule is what it is). The C side (store/rscript.c)
-- validates the request, computes the decision time and the Gregorian expirations, and passes:
--   KEYS[i]  a key (a hash: a algorithm, s status, l limit, d duration, r remaining,
--            c created_at, e expire_at; all integers in epoch ms or counts)
--   ARGV     hits limit duration t now margin reset drain | greg gexp_now gexp_t max_count
--            (gexp_now, gexp_t: the end of the Gregorian interval holding now and t)
-- and gets back {status, limit, remaining, reset_time, retry_after} as decimal strings. Numbers
-- are Lua doubles: exact up to 2^53, which the engine's max-count bound (2^53 by default) keeps
-- counts under.
-- The key expires `margin` ms after expire_at (Redis's clock), so nothing outlives its use; the
-- expiry rule itself (expire_at < now: a fresh key) is judged here on the caller's clock.
-- Many items per call: KEYS[i] with the S = #ARGV / #KEYS arguments ARGV[(i-1)*S + 1 ..] each,
-- decided in order (a key repeated in one call sees its earlier items), answers appended.
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

  local v = redis.call('HMGET', k, 'a', 's', 'l', 'd', 'r', 'c', 'e')
  local a, e = tonumber(v[1]), tonumber(v[7])
  if a ~= nil and (e == nil or e < now) then a = nil end -- expired: as if absent

  local function retry(exp)
    local x = exp + 1 - t
    if x < 0 then return 0 end
    return x
  end

  local s, l, d, r, c
  local status, rem, rt, ra = 0, 0, 0, 0
  if a ~= 0 then
    -- a new item (or another algorithm's state: start fresh)
    e = t + dur
    if greg then e = gnow end
    s, l, d, r, c = 0, limit, dur, limit - hits, t
    status, rem, rt = 0, r, e
    if hits > limit then
      status, rem, r = 1, limit, limit
      ra = retry(e)
    end
  else
    s, l, d, r, c = tonumber(v[2]), tonumber(v[3]), tonumber(v[4]), tonumber(v[5]), tonumber(v[6])
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
      if status == 1 then ra = retry(e) end
    end
  end
  if maxc > 0 and r > maxc then
    r = maxc
    if rem > maxc then rem = maxc end
  end

  local f = '%d'
  redis.call('HSET', k, 'a', '0', 's', string.format(f, s), 'l', string.format(f, l),
    'd', string.format(f, d), 'r', string.format(f, r), 'c', string.format(f, c),
    'e', string.format(f, e))
  local ttl = e - now + margin
  if ttl < 1 then ttl = 1 end
  if ttl > 1e13 then ttl = 1e13 end
  redis.call('PEXPIRE', k, string.format(f, ttl))
  local ans = {string.format(f, status), string.format(f, l), string.format(f, rem),
    string.format(f, rt), string.format(f, ra)}
  for j = 1, 5 do out[#out + 1] = ans[j] end
end
return out
