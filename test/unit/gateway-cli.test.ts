import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { defaultStateFile, parseArgs } from '../../gateway/cli.js';
import { asksToStream } from '../../gateway/forward.js';
import { StateFile } from '../../gateway/state-file.js';
import { StateTracker } from '../../protocol/response-signature.js';
import { shardOf } from '../../protocol/shards.js';

const PCR = `0=${'ab'.repeat(48)}`;
const KEY = 'ab'.repeat(32);

describe('agent-gateway arguments', () => {
  it('needs pinned PCRs, a manifest with an operator key, or --insecure-dev', () => {
    expect(parseArgs(['--service', 'http://h:1'])).toMatchObject({ kind: 'usage-error', message: expect.stringMatching(/--insecure-dev/) });
    expect(parseArgs(['--service', 'http://h:1', '--pcr', PCR])).toMatchObject({ kind: 'run', port: 8081 });
    expect(parseArgs(['--service', 'http://h:1', '--manifest', 'm.json'])).toMatchObject({ kind: 'usage-error', message: expect.stringMatching(/--operator-key/) });
    expect(parseArgs(['--service', 'http://h:1', '--manifest', 'm.json', '--operator-key', KEY])).toMatchObject({ kind: 'run', manifest: 'm.json' });
    expect(parseArgs(['--service', 'http://h:1', '--insecure-dev', '--port', '0'])).toMatchObject({ kind: 'run', port: 0, insecureDev: true });
  });

  it('refuses a service URL with a path (it would change every signed target), bad ports and bad PCRs', () => {
    for (const args of [['--service', 'http://h:1/api'], ['--service', 'ftp://h'], ['--service', 'http://h:1', '--port', '70000'], ['--service', 'http://h:1', '--pcr', '0=zz']]) {
      expect(parseArgs([...args, '--insecure-dev']).kind, args.join(' ')).toBe('usage-error');
    }
  });

  it('--mcp needs --tenant; --tenant and --api-key-file only go with --mcp (over HTTP, /mcp reads them from headers)', () => {
    const base = ['--service', 'http://h:1', '--insecure-dev'];
    expect(parseArgs([...base, '--mcp', '--tenant', 't1', '--api-key-file', 'k'])).toMatchObject({ kind: 'run', mcp: { tenant: 't1', apiKeyFile: 'k' } });
    expect(parseArgs([...base, '--mcp'])).toMatchObject({ kind: 'usage-error', message: expect.stringMatching(/--mcp needs --tenant/) });
    expect(parseArgs([...base, '--tenant', 't1'])).toMatchObject({ kind: 'usage-error', message: expect.stringMatching(/X-Tenant-Id/) });
    expect(parseArgs([...base, '--api-key-file', 'k'])).toMatchObject({ kind: 'usage-error' });
    expect(parseArgs(base)).not.toHaveProperty('mcp');
  });

  it('takes --tenant-key-file over HTTP and with --mcp', () => {
    const base = ['--service', 'http://h:1', '--insecure-dev'];
    expect(parseArgs([...base, '--tenant-key-file', 'k'])).toMatchObject({ kind: 'run', tenantKeyFile: 'k' });
    expect(parseArgs([...base, '--mcp', '--tenant', 't1', '--tenant-key-file', 'k'])).toMatchObject({ kind: 'run', tenantKeyFile: 'k', mcp: { tenant: 't1' } });
    expect(parseArgs(base)).not.toHaveProperty('tenantKeyFile');
  });

  it('keeps one state file per service under the home folder by default', () => {
    const a = defaultStateFile(new URL('https://a.example'), '/home/u');
    expect(a).toMatch(/^\/home\/u\/\.agent-gateway\/state-[0-9a-f]{16}\.json$/);
    expect(defaultStateFile(new URL('https://b.example'), '/home/u')).not.toBe(a);
  });
});

describe('the state file', () => {
  it('remembers the newest head across restarts, and refuses a file of another service', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-state-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'sub', 'state.json');
    const file = new StateFile(path, 'https://a.example');
    expect(file.load()).toBeUndefined();
    const tracker = new StateTracker();
    const store = 'f'.repeat(32);
    expect(tracker.observe({ state: { seq: 8, hash: 'd'.repeat(64) }, store, shard: { index: 0, count: 4 } }, undefined)).toBeUndefined();
    expect(tracker.observe({ state: { seq: 3, hash: 'e'.repeat(64) }, store: 'a'.repeat(32), shard: { index: shardOf('t', 4), count: 4 }, tenant: 't' }, undefined)).toBeUndefined();
    file.save(tracker);
    // Every shard's head, with the store it belongs to and the shard count, so a wiped, replaced or re-sharded store is refused after a restart too.
    expect(new StateFile(path, 'https://a.example').load()?.toJSON()).toEqual(tracker.toJSON());
    expect(new StateFile(path, 'https://a.example').load()?.shardCount).toBe(4);
    // A file from before shards: its head is shard 0's.
    writeFileSync(path, JSON.stringify({ v: 1, service: 'https://a.example', state: `7:${'c'.repeat(64)}`, store }));
    expect(new StateFile(path, 'https://a.example').load()?.current).toEqual({ store, seq: 7, hash: 'c'.repeat(64) });
    expect(() => new StateFile(path, 'https://b.example').load()).toThrow(/not https:\/\/b.example/);
    writeFileSync(path, '{"v":1}');
    expect(() => new StateFile(path, 'https://a.example').load()).toThrow(/not an agent-gateway state file/);
    expect(readFileSync(path, 'utf8')).toBe('{"v":1}');
  });
});

describe('which requests stream', () => {
  it('a JSON body with "stream": true, nothing else', () => {
    const body = (value: unknown) => new Uint8Array(Buffer.from(JSON.stringify(value)));
    expect(asksToStream(body({ model: 'm', stream: true }))).toBe(true);
    expect(asksToStream(body({ model: 'm', stream: false }))).toBe(false);
    expect(asksToStream(body({ content: '"stream": true' }))).toBe(false);
    expect(asksToStream(new Uint8Array())).toBe(false);
  });
});
