/**
 * What of a log line may leave the enclave for the host's journal (deploy/README.md, "Logs
 * and boot stages"). The host is untrusted, so the rule is the metrics' (metrics.ts): only
 * values from closed sets and numbers, never request data. A field passes only if it is
 * named below; everything else (a tenant id, a query, content, a key, a file name) is
 * dropped and counted. Log messages are constants in the code, so `msg` passes.
 *
 * Until the enclave serves its first request, it has handled no tenant's data, and a boot
 * failure (KMS refusing, a missing keys file) is exactly what an operator needs to read:
 * then `problem` and an error's message pass too, with quoted text cut out and capped.
 */
/** Short words from closed sets: route names, error codes, boot stages, blob names. */
const WORD_FIELDS = new Set(['process', 'route', 'code', 'stage', 'blob', 'signal', 'model', 'sealing', 'reason']);
/** Counts, sizes, durations, flags. */
const NUMBER_FIELDS = new Set([
  'status', 'errorStatus', 'ms', 'seconds', 'keys', 'version', 'cancelled', 'streamed', 'unsentBytes', 'total', 'done',
  'percent', 'memories', 'tenants', 'plaintext', 'neededMiB', 'limitMiB', 'port', 'removed',
]);
const WORD = /^[A-Za-z0-9_.:/-]{1,64}$/;
const MAX_PROBLEM_CHARS = 500;

export function redactForHost(line: string, booting: boolean): string | undefined {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined; // not a pino line: nothing of it leaves
  }
  const out: Record<string, unknown> = { level: record.level, time: record.time, msg: typeof record.msg === 'string' ? record.msg : undefined };
  let dropped = 0;
  for (const [name, value] of Object.entries(record)) {
    if (name === 'level' || name === 'time' || name === 'msg' || name === 'pid' || name === 'hostname' || name === 'name') continue;
    if (WORD_FIELDS.has(name) && typeof value === 'string' && WORD.test(value)) out[name] = value;
    else if (NUMBER_FIELDS.has(name) && (typeof value === 'number' || typeof value === 'boolean')) out[name] = value;
    else if (booting && name === 'problem' && typeof value === 'string') out.problem = scrub(value);
    else if (name === 'err' && value !== null && typeof value === 'object') {
      const err = value as { type?: unknown; message?: unknown };
      if (typeof err.type === 'string' && WORD.test(err.type)) out.errType = err.type;
      if (booting && typeof err.message === 'string') out.problem = scrub(err.message);
      else dropped++;
    } else dropped++;
  }
  if (dropped > 0) out.redacted = dropped;
  return JSON.stringify(out);
}

/** Quoted text (a tenant id in a keys-file problem, a path) is replaced, and the rest capped. */
function scrub(text: string): string {
  return text.replace(/"[^"]*"|'[^']*'|`[^`]*`/g, '"…"').slice(0, MAX_PROBLEM_CHARS);
}
