-- SPDX-License-Identifier: Apache-2.0
-- FIXED_WINDOW on one key, deciding exactly what sl_win_fixed_decide (src/core/window.c) decides:
-- count hits in the window holding t, admit n iff count + n <= limit; a request dated before the
-- key's window counts in that window; a key whose count is back to 0 is deleted.
--   KEYS[i]  a key: a string, struct.pack('Bdddddd', 3, gregorian, duration, window start,
--            window end, count, expire_at)
--   ARGV[i]  hits limit duration t now margin reset drain | greg start end
--            (drain 2: every hit counts, rejected or not: SL_COUNT_OVER_LIMIT)
--            (start, end: the window holding t, computed in C: the calendar's with Gregorian)
-- answers a record per item: status limit remaining reset_time retry_after delay_ms (0).
-- Many items per call, and the helpers used below: common/prelude.lua.

local ITEM = items(11)
prepare(ITEM)
for i = 1, #KEYS do
  local k = KEYS[i]
  local hits, limit, dur, t, now, margin, reset, drain, greg, start, wend = item(i, ITEM)

  local v = vals[i]
  if nk > 0 then v = state(i) end
  local a, g, d, ws, we, n, e, e0 = nil, 0, 0, 0, 0, 0, 0, nil
  if v and sbyte(v, 1) == 3 and #v == 49 then
    a, g, d, ws, we, n, e = sunpack('Bdddddd', v)
    e0 = e
    if e < t then a = nil end -- expired at the decision time t: as if absent
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
  if drain == 2 then -- count every hit, over the limit while above it (envoyproxy's counting)
    count = count + hits
    if count < 0 then count = 0 end
    over = count > limit
  elseif hits > 0 then
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
    put(i, false, nil, nil, nil, nil, v)
  else
    e = wend
    if e < TOP then e = e - 1 end
    put(i, spack('Bdddddd', 3, greg, dur, start, wend, count, e), e, e0, now, margin, v)
  end
  nout = nout + 1
  out[nout] = spack(REC, status, limit, rem, wend, ra, 0)
end
flush()
return table.concat(out)
