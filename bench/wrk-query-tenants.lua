-- wrk script: GET /v1/memory (top 10) with held-out questions, each request to the next of
-- TENANTS tenants named PREFIX0, PREFIX1, ... (default agent-), in the order bench/cluster.ts's
-- load client uses (tenant i*37 mod TENANTS), so that every shard gets queries; env QFILE (one
-- question a line), TENANTS (default 200). Prints the same JSON line as /work/shared/tools/wrk/query.lua.
local tenants = tonumber(os.getenv("TENANTS") or "200")
local prefix = os.getenv("PREFIX") or "agent-"
local questions = {}
local function urlencode(s) return (s:gsub("[^%w%-_%.~]", function(c) return string.format("%%%02X", string.byte(c)) end)) end
for line in io.lines(os.getenv("QFILE")) do questions[#questions + 1] = urlencode(line) end
local i = 0
function setup(thread) thread:set("offset", math.random(1, #questions)) end
function request()
  i = i + 1
  local n = i + (offset or 0)
  return wrk.format("GET", "/v1/memory?tenant_id=" .. prefix .. ((n * 37) % tenants) .. "&top_k=10&query=" .. questions[(n % #questions) + 1])
end
function done(summary, latency, requests)
  io.write(string.format("JSON {\"requests\":%d,\"seconds\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"non2xx\":%d,\"errors\":%d}\n",
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
