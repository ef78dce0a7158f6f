import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { startLoneEnclave } from '../helpers/processes.js';
import { flipByte, frameSpans } from '../helpers/sealed-files.js';
import { freePort, startService, type RunningService } from '../helpers/service.js';

const tag = randomBytes(4).toString('hex');
const marker = {
  content: `Zanzibar-content-${tag} my bank PIN is 4921`,
  tenant: `tenant-secret-${tag}`,
  metaKey: `metakey-secret-${tag}`,
  metaValue: `metavalue-secret-${tag}`,
  source: `source-secret-${tag}`,
};
const scratch: string[] = [];
let svc: RunningService;
let dataDir: string;
const acked: Array<{ id: string; content: string }> = [];

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

/** Every way a marker could sit in a file as text: UTF-8, UTF-16, hex, base64. */
function leaks(file: string, needles: string[]): string[] {
  const data = readFileSync(file);
  const text = data.toString('latin1').toLowerCase();
  return needles.filter((n) => {
    const bytes = Buffer.from(n);
    return data.includes(bytes) || data.includes(Buffer.from(n, 'utf16le'))
      || text.includes(bytes.toString('hex')) || data.includes(Buffer.from(bytes.toString('base64').slice(0, -4)));
  });
}

/** The longest run of printable ASCII: JSON or text would show up as a long one. */
function longestPrintableRun(data: Buffer): number {
  let longest = 0;
  let run = 0;
  for (const b of data) {
    run = b >= 0x20 && b < 0x7f ? run + 1 : 0;
    longest = Math.max(longest, run);
  }
  return longest;
}

function copyOf(dir: string): string {
  const copy = mkdtempSync(join(tmpdir(), 'agent-tamper-'));
  scratch.push(copy);
  cpSync(dir, copy, { recursive: true });
  return copy;
}

/** Runs the enclave alone, with a host store on a data directory, until it exits (or 60 s pass). */
async function enclaveExit(dir: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; output: string }> {
  const enclave = await startLoneEnclave({ ...env, DATA_DIR: dir, ENCLAVE_ADDR: `127.0.0.1:${await freePort()}` });
  try {
    const code = await Promise.race([
      enclave.exited,
      new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`enclave kept running on a tampered store:\n${enclave.output()}`)), 60_000)),
    ]);
    return { code, output: enclave.output() };
  } finally {
    await enclave.stop();
  }
}

beforeAll(async () => {
  // Small snapshot threshold: the memories end up in snapshots and in the log after them.
  svc = await startService({ SNAPSHOT_LOG_BYTES: '8192' });
  dataDir = svc.dataDir;
  const add = async (i: number) => {
    const res = await request(svc.baseUrl, 'POST', '/v1/memory', {
      tenant_id: marker.tenant,
      content: `${marker.content} entry ${i}`,
      metadata: { source: marker.source, [marker.metaKey]: marker.metaValue },
    });
    expect(res.status).toBe(200);
    acked.push({ id: res.body.id, content: res.body.content });
  };
  for (let i = 0; i < 40; i++) await add(i);
  // Then, with compaction out of the way, a known end of the log: three adds and a delete.
  await svc.killEnclave('SIGTERM');
  svc.env.SNAPSHOT_LOG_BYTES = String(2 ** 40);
  await svc.startEnclave();
  for (let i = 40; i < 43; i++) await add(i);
  const gone = acked.pop()!;
  expect((await request(svc.baseUrl, 'DELETE', `/v1/memory/${gone.id}?tenant_id=${marker.tenant}`)).status).toBe(200);
  // A graceful stop waits for any snapshot in progress: the files are now at rest.
  await svc.killEnclave('SIGTERM');
});
afterAll(async () => {
  await svc?.stop();
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

describe('the data directory', () => {
  it('holds no plaintext: no content, tenant id, metadata key or value in any file', async () => {
    const needles = [marker.content, marker.tenant, marker.metaKey, marker.metaValue, marker.source, 'PIN is 4921', tag];
    // The scan can fail: it finds the markers in a plain copy of them.
    const control = join(copyOf(dataDir), 'control.json');
    writeFileSync(control, JSON.stringify({ note: marker.content, t: marker.tenant, m: { [marker.metaKey]: marker.metaValue, source: marker.source } }));
    expect(leaks(control, needles)).toEqual(needles);

    const files = filesUnder(dataDir);
    const sealed = files.filter((f) => f.endsWith('.sealed'));
    // Both kinds of memory file exist and hold the data: a snapshot and the log after it (and the shard map: the count and store ids).
    expect(sealed.map((f) => relative(dataDir, f)).sort()).toEqual([expect.stringMatching(/^memory\/log-\d{12}\.sealed$/), 'memory/shards.sealed', 'memory/snapshot.sealed']);
    expect(sealed.reduce((n, f) => n + statSync(f).size, 0)).toBeGreaterThan(39 * marker.content.length);
    for (const file of files) expect(leaks(file, needles), relative(dataDir, file)).toEqual([]);
    // Beyond the markers: nothing readable at all in the memory files (records are JSON inside).
    for (const file of sealed) expect(longestPrintableRun(readFileSync(file)), relative(dataDir, file)).toBeLessThan(24);
  });

  it('keeps the memory files private to the enclave\'s user (0600 in a 0700 folder)', () => {
    expect(statSync(join(dataDir, 'memory')).mode & 0o777).toBe(0o700);
    for (const file of [...filesUnder(join(dataDir, 'memory')), join(dataDir, 'sealing-key.simulated.json')]) {
      expect(statSync(file).mode & 0o777, relative(dataDir, file)).toBe(0o600);
    }
  });

  it('after a torn append, the enclave cuts the tail and keeps every earlier memory', async () => {
    const dir = copyOf(dataDir);
    const log = filesUnder(join(dir, 'memory')).find((f) => /log-\d+\.sealed$/.test(f))!;
    const spans = frameSpans(readFileSync(log));
    expect(spans.length).toBeGreaterThanOrEqual(5); // header, …, three adds, the delete
    truncateSync(log, spans[spans.length - 1][0] + 20);
    const copy = await startService({ DATA_DIR: dir });
    try {
      expect(copy.output()).toMatch(/cut a torn or corrupt tail/);
      // The cut entry was the delete: everything added is there.
      for (const m of acked) expect((await request(copy.baseUrl, 'GET', `/v1/memory/${m.id}?tenant_id=${marker.tenant}`)).status).toBe(200);
    } finally {
      await copy.stop();
    }
  });

  it.each([
    ['an entry changed in the middle of the log', (dir: string) => {
      const log = filesUnder(join(dir, 'memory')).find((f) => /log-\d+\.sealed$/.test(f))!;
      flipByte(log, frameSpans(readFileSync(log))[1][0] + 60);
    }, /log-\d+\.sealed: a frame that does not authenticate at byte \d+ is followed by valid frames/],
    ['a changed snapshot', (dir: string) => {
      const snapshot = join(dir, 'memory/snapshot.sealed');
      flipByte(snapshot, frameSpans(readFileSync(snapshot))[5][0] + 100);
    }, /snapshot.sealed: a frame that does not authenticate/],
    ['a deleted snapshot', (dir: string) => rmSync(join(dir, 'memory/snapshot.sealed')), /log-000000000001.sealed is missing/],
    ['another sealing key', (dir: string) => {
      writeFileSync(join(dir, 'sealing-key.simulated.json'), JSON.stringify({ key: randomBytes(32).toString('base64') }));
    }, /sealed with a different key/],
    ['a lost sealing key', (dir: string) => rmSync(join(dir, 'sealing-key.simulated.json')), /holds sealed blobs \(memory\/\) but not their key/],
  ])('refuses to start with %s: exit 1 and a clear message', async (_name, tamper, message) => {
    const dir = copyOf(dataDir);
    tamper(dir);
    const { code, output } = await enclaveExit(dir);
    expect(code).toBe(1);
    expect(output).toMatch(/enclave: refusing to start: /);
    expect(output).toMatch(message);
    expect(output).not.toMatch(/enclave listening/);
    expect(output).not.toMatch(/\n\s+at /); // a message, not a stack trace
  });

  it('refuses a lost sealing key before it loads the embedding model (seconds): with no model installed either, the key is what it names', async () => {
    const dir = copyOf(dataDir);
    rmSync(join(dir, 'sealing-key.simulated.json'));
    const { code, output } = await enclaveExit(dir, { EMBEDDING_MODEL: 'not-installed-model' });
    expect(code).toBe(1);
    expect(output).toMatch(/holds sealed blobs \(memory\/\) but not their key/);
    expect(output).not.toMatch(/cannot load embedding model/);
  });
});
