import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueKey, startLone, startLoneEnclave, type Lone } from '../helpers/processes.js';
import { freePort, waitFor } from '../helpers/service.js';

let dir: string;
const started: Lone[] = [];
const lone = async (script: 'enclave/main.js' | 'proxy/main.js', env: NodeJS.ProcessEnv) => {
  // A data directory each: two enclaves never share state.
  const full = { DATA_DIR: join(dir, `data-${started.length}`), ...env };
  const p = script === 'enclave/main.js' ? await startLoneEnclave(full) : startLone(script, full);
  started.push(p);
  return p;
};
const enclaveOn = async (env: NodeJS.ProcessEnv = {}) => {
  const addr = `127.0.0.1:${await freePort()}`;
  const enclave = await lone('enclave/main.js', { ENCLAVE_ADDR: addr, ...env });
  await enclave.waitForOutput('enclave listening');
  return { addr, enclave };
};
/**
 * One enclave open on loopback, with its defaults, serves every test that needs one: they
 * only read its start-up warning or put a proxy in front of it, and none changes it.
 */
let openOnLoopback: ReturnType<typeof enclaveOn> | undefined;
const openEnclave = () => (openOnLoopback ??= enclaveOn());

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'agent-open-'));
});
afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
  rmSync(dir, { recursive: true, force: true });
});

describe('the enclave runs without keys only where that is safe', () => {
  it('refuses to start open on a non-loopback address', async () => {
    const enclave = await lone('enclave/main.js', { ENCLAVE_ADDR: `0.0.0.0:${await freePort()}` });
    expect(await enclave.exited).toBe(2);
    expect(enclave.output()).toMatch(/not loopback and API_KEYS_FILE is not set/);
  });

  it('refuses to start open as a Nitro enclave', async () => {
    const enclave = await lone('enclave/main.js', { ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, TEE_MODE: 'nitro' });
    expect(await enclave.exited).toBe(2);
    expect(enclave.output()).toMatch(/TEE_MODE=nitro without API_KEYS_FILE/);
  });

  it('starts open on loopback, warning that keys are off; ALLOW_OPEN=1 lifts the address rule', async () => {
    const { enclave } = await openEnclave();
    expect(enclave.output()).toMatch(/"level":40.*API keys are OFF/);
    const exposed = await lone('enclave/main.js', { ENCLAVE_ADDR: `0.0.0.0:${await freePort()}`, ALLOW_OPEN: '1' });
    await exposed.waitForOutput('enclave listening');
    expect(exposed.output()).toContain('API keys are OFF');
  });

  it('refuses a bad keys file without quoting any key', async () => {
    const file = join(dir, 'bad.json');
    const secret = 'short-secret';
    writeFileSync(file, JSON.stringify({ [secret]: ['t1'] }));
    const enclave = await lone('enclave/main.js', { ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, API_KEYS_FILE: file });
    expect(await enclave.exited).toBe(2);
    expect(enclave.output()).toMatch(/invalid API keys file/);
    expect(enclave.output()).not.toContain(secret);
  });
});

describe('the proxy does not expose an open enclave', () => {
  it('refuses to listen beyond loopback while the enclave has no keys', async () => {
    const { addr } = await openEnclave();
    const proxy = await lone('proxy/main.js', { ENCLAVE_ADDR: addr, HOST: '0.0.0.0', PORT: String(await freePort()) });
    expect(await proxy.exited).toBe(2);
    expect(proxy.output()).toMatch(/HOST=0\.0\.0\.0 exposes the API .* without API keys/);
  });

  it('listens beyond loopback when the enclave requires keys, or with ALLOW_OPEN=1', async () => {
    const file = join(dir, 'keys.json');
    issueKey(file, ['t1']);
    const { addr: keyed } = await enclaveOn({ API_KEYS_FILE: file });
    const { addr: open } = await openEnclave();
    for (const [addr, extra] of [[keyed, {}], [open, { ALLOW_OPEN: '1' }]] as const) {
      const port = await freePort();
      const proxy = await lone('proxy/main.js', { ENCLAVE_ADDR: addr, HOST: '0.0.0.0', PORT: String(port), ...extra });
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200, 30_000, proxy.output);
      expect(proxy.child.exitCode).toBeNull();
    }
  });
});
