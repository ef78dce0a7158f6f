import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { frameSpans } from '../helpers/sealed-files.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Hold, round two, finding 8: a host store that streamed 1.5 GiB of junk as one log
 * segment drove the enclave to 3.3 GiB before it took the junk for a torn tail, and more
 * killed it at every start. Segments are now streamed, and read no further than their
 * writer could have written (the limit is sealed into the segment's header).
 */
const SEGMENT_LIMIT_BYTES = 4 * 1024 * 1024 + 128 * 1024 * 1024; // segmentLimit(SNAPSHOT_LOG_BYTES = 1 MiB, no snapshot)
const JUNK_BYTES = SEGMENT_LIMIT_BYTES + 256 * 1024 * 1024;

let svc: RunningService | undefined;
const dataDir = mkdtempSync(join(tmpdir(), 'agent-segment-'));
afterAll(async () => {
  await svc?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** The enclave's peak resident memory (VmHWM), in bytes. */
function peakRss(pid: number): number {
  const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1];
  return Number(kb) * 1024;
}

/** Its own budget: some 15 s alone, several times that with both cores busy (it waits on events, not time). */
const UNDER_LOAD = 180_000;

describe('a log segment the host pads with junk', () => {
  it('is read no further than its limit, in bounded memory: the enclave starts, keeps every memory and cuts the junk', async () => {
    svc = await startService({ DATA_DIR: dataDir, SNAPSHOT_LOG_BYTES: String(1024 * 1024) });
    const stored = await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'pad', content: 'The spare key is under the blue flowerpot.' });
    expect(stored.status).toBe(200);

    // A restart on the untouched store: the enclave's peak memory for this store.
    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    const baseline = peakRss(svc.enclave.pid!);

    await svc.killEnclave('SIGKILL');
    // The host, with its store stopped, pads the last segment with junk.
    await svc.killHostStore('SIGKILL');
    const segment = readdirSync(join(dataDir, 'memory')).filter((n) => n.startsWith('log-')).sort().at(-1)!;
    const path = join(dataDir, 'memory', segment);
    const validEnd = statSync(path).size;
    const fd = openSync(path, 'a');
    const junk = randomBytes(4 * 1024 * 1024);
    for (let written = 0; written < JUNK_BYTES; written += junk.length) writeSync(fd, junk);
    closeSync(fd);
    await svc.startHostStore();

    await svc.startEnclave();
    const peak = peakRss(svc.enclave.pid!);
    const found = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=pad&query=where%20is%20the%20spare%20key&top_k=1');
    expect(found.body.data[0]).toMatchObject({ id: stored.body.id });
    expect(svc.output()).toMatch(/cut a torn or corrupt tail from the memory log/);
    // Cut back to the last good entry; then the enclave appended one frame, its fence (it took the log over).
    const spans = frameSpans(readFileSync(path));
    expect([spans.at(-2)![1], spans.at(-1)![1]]).toEqual([validEnd, statSync(path).size]);
    // Read whole, the junk alone would be more than this; streamed, memory stays near the baseline.
    expect(peak - baseline).toBeLessThan(128 * 1024 * 1024);
  }, UNDER_LOAD);
});
