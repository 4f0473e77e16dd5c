-- SPDX-License-Identifier: Apache-2.0
-- wrk: Levee POST /attempt with a random X-Resource of 10,000 (the nginx reference gets the same).
wrk.method = "POST"
request = function()
  wrk.headers["X-Resource"] = "res" .. math.random(0, 9999)
  return wrk.format(nil, "/attempt")
end
