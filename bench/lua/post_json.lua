-- SPDX-License-Identifier: Apache-2.0
-- wrk: POST /v1/GetRateLimits (Gubernator JSON gateway), one item, a random key of 10,000.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local fmt = '{"requests":[{"name":"bench","unique_key":"k%d","hits":1,"limit":1000000000,"duration":60000}]}'
request = function()
  return wrk.format(nil, "/v1/GetRateLimits", nil, string.format(fmt, math.random(0, 9999)))
end
