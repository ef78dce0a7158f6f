-- wrk script: POST /v1/memory, one distinct text a request, each to the next of TENANTS tenants
-- (round robin, so every shard gets writes); env TFILE (one text a line), TENANTS (default 200).
-- Prints the same JSON line as /work/shared/tools/wrk/ingest.lua.
local tenants = tonumber(os.getenv("TENANTS") or "200")
local texts = {}
for line in io.lines(os.getenv("TFILE")) do texts[#texts + 1] = line end
local i = 0
local function esc(s) return (s:gsub('[%c"\\]', function(c) if c == '"' then return '\\"' elseif c == '\\' then return '\\\\' else return ' ' end end)) end
function setup(thread) thread:set("offset", math.random(1, #texts)) end
function request()
  i = i + 1
  local t = texts[((i + (offset or 0)) % #texts) + 1] .. " #" .. i
  return wrk.format("POST", "/v1/memory", { ["content-type"] = "application/json" },
    '{"content":"' .. esc(t) .. '","tenant_id":"ingest-' .. (i % tenants) .. '"}')
end
function done(summary, latency, requests)
  io.write(string.format("JSON {\"requests\":%d,\"seconds\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"non2xx\":%d,\"errors\":%d}\n",
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
