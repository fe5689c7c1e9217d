-- wrk script: prints one parseable line from the done() hook.
--
--   WRKPCT requests=N duration_s=S rps=R p50_ms=.. p99_ms=.. p999_ms=.. p9999_ms=.. max_ms=..
--          err_connect=N err_read=N err_write=N err_status=N err_timeout=N errors=N
--
-- latency:percentile() and latency.max are in microseconds; summary.duration
-- too. err_status counts responses with a status >= 400 (wrk's definition);
-- errors is the sum of all five counters.
-- Run: wrk -t2 -c64 -d10s -s bench/wrk/pct.lua http://127.0.0.1:8080/

done = function(summary, latency, requests)
  local e = summary.errors
  local secs = summary.duration / 1e6
  local rps = 0
  if secs > 0 then
    rps = summary.requests / secs
  end
  local total_err = e.connect + e.read + e.write + e.status + e.timeout
  io.write(string.format(
    "WRKPCT requests=%d duration_s=%.3f rps=%.1f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f p9999_ms=%.3f max_ms=%.3f" ..
    " err_connect=%d err_read=%d err_write=%d err_status=%d err_timeout=%d errors=%d\n",
    summary.requests, secs, rps,
    latency:percentile(50) / 1000.0, latency:percentile(99) / 1000.0,
    latency:percentile(99.9) / 1000.0, latency:percentile(99.99) / 1000.0,
    latency.max / 1000.0,
    e.connect, e.read, e.write, e.status, e.timeout, total_err))
end
