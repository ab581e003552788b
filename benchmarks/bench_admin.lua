-- wrk script for scripts/bench-admin: holds a request rate (Debian's wrk has
-- no rate flag) and prints one parseable line.
--   BENCH_RATE     requests/s over all of wrk's threads (default 200)
--   BENCH_THREADS  the -t given to wrk (default 2)
-- Each wrk thread hands out request slots on a fixed schedule
-- (threads * 1000 / rate ms apart, from a monotonic clock through LuaJIT's
-- FFI); delay() makes each request wait for its slot, so slow responses do
-- not lower the rate as long as the thread has a free connection.
local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clock_id, bench_timespec* ts);
]]
local ts = ffi.new("bench_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local rate = tonumber(os.getenv("BENCH_RATE") or "200")
local threads = tonumber(os.getenv("BENCH_THREADS") or "2")
local interval = 1000 * threads / rate
local next_slot = nil

function delay()
  local t = now_ms()
  -- After a stall of more than a second, start a fresh schedule rather than
  -- sending a burst to catch up.
  if next_slot == nil or next_slot < t - 1000 then next_slot = t end
  next_slot = next_slot + interval
  local d = next_slot - t
  if d < 0 then d = 0 end
  return math.floor(d)
end

function done(summary, latency, requests)
  local e = summary.errors
  local seconds = summary.duration / 1e6
  io.write(string.format(
    "BENCH requests=%d seconds=%.3f rps=%.1f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f errors=%d\n",
    summary.requests, seconds, summary.requests / seconds, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000,
    e.connect + e.read + e.write + e.status + e.timeout))
end
