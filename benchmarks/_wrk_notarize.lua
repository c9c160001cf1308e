-- wrk script for benchmarks.http_notarize: POST {server, tool, call_sha256} with a distinct
-- digest per request (a nonce of the run, then a counter) and print one JSON line at the end.
-- wrk -t1 -cC -dS -s benchmarks/_wrk_notarize.lua URL -- NONCE48HEX [API_KEY]
local counter = 0
local nonce = "000000000000000000000000000000000000000000000000"
local headers = {["Content-Type"] = "application/json"}

function init(args)
  if args[1] then nonce = args[1] end
  if args[2] then headers["Authorization"] = "Bearer " .. args[2] end
end

function request()
  counter = counter + 1
  local body = '{"server":"bench","tool":"t","call_sha256":"' .. nonce ..
    string.format("%016x", counter) .. '"}'
  return wrk.format("POST", nil, headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"errors_status":%d,"errors_connect":%d,' ..
    '"errors_read":%d,"errors_write":%d,"errors_timeout":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
