-- SPDX-License-Identifier: Apache-2.0
-- TOKEN_BUCKET on one key, deciding exactly what src/core/tokenbucket.c decides (Gubernator v2's
-- semantics; the comments there say why each rule is what it is). The C side (redis/rscript.c)
-- validates the request, computes the decision time and the Gregorian expirations, and passes:
--   KEYS[i]  a key: a string, struct.pack('Bdddddd', 0, status, limit, duration, remaining,
--            created_at, expire_at) (the algorithm's number, then doubles)
--   ARGV[i]  hits limit duration t now margin reset drain | greg gexp_now gexp_t max_count
--            (gexp_now, gexp_t: the end of the Gregorian interval holding now and t)
-- and gets back a record per item: status limit remaining reset_time retry_after delay_ms (0).
-- Numbers are Lua doubles: exact up to 2^53, which the engine's max-count bound (2^53 by
-- default) keeps counts under.
-- The key expires `margin` ms after expire_at (Redis's clock), so nothing outlives its use; the
-- expiry rule itself (expire_at < t, the decision time: a fresh key) is judged here on the
-- caller's clock, at the time the algorithm decides (created_at), as the memory store does.
-- Many items per call, and the helpers used below: common/prelude.lua.
local ITEM = items(12)
prepare(ITEM)
for i = 1, #KEYS do
  local k = KEYS[i]
  local hits, limit, dur, t, now, margin, reset, drain, greg, gnow, gt, maxc = item(i, ITEM)
  greg = greg == 1

  local v = vals[i]
  if nk > 0 then v = state(i) end
  local s, l, d, r, c, e, e0
  local a = nil
  if v and sbyte(v, 1) == 0 and #v == 49 then -- ours (else another algorithm's, or not a state)
    a, s, l, d, r, c, e = sunpack('Bdddddd', v)
    e0 = e
    if e < t then a = nil end -- expired at the decision time t: as if absent
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

  put(i, spack('Bdddddd', 0, s, l, d, r, c, e), e, e0, now, margin, v)
  if ra < 0 then ra = 0 end
  nout = nout + 1
  out[nout] = spack(REC, status, l, rem, rt, ra, 0)
end
flush()
return table.concat(out)
