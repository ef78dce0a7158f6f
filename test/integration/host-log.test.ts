/**
 * Logs and boot stages out of the enclave, to the host's journal (issue 32, finding 5), with
 * real processes: the host log receiver (host-log/main.ts, what agent-host-log.service runs),
 * and an enclave started the way deploy/enclave-entrypoint.sh starts it: boot-log.sh opens
 * the pipe to socat (TCP here, where the enclave has vsock), the enclave writes its redacted
 * lines to fd 3. A canary tenant id, content, query, request id, key and file path are used
 * in every way a user can; none may reach the host.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '../../common/node-flags.js';
import { request } from '../helpers/http.js';
import { issueKey, startLone, type Lone } from '../helpers/processes.js';
import { freePort, waitFor } from '../helpers/service.js';
import { ensureCommand } from '../helpers/system-package.js';

const root = resolve(import.meta.dirname, '../..');
const CANARY = {
  tenant: 'canary-tenant-7f3a',
  content: 'canary-content-91b2 the sky is green',
  query: 'canary-query-55cd',
  requestId: 'canary-reqid-3e1f',
  dir: 'canary-path-0c4d',
};

let dir: string;
const started: Lone[] = [];
let journal: Lone;
let logAddr: string;

/** The enclave as the entrypoint runs it: stage lines from bash, then node with fd 3 on the same pipe. */
function startEnclaveLikeEntrypoint(env: NodeJS.ProcessEnv): Lone {
  const script = `set -euo pipefail
source '${join(root, 'deploy/boot-log.sh')}'
boot_log_open
boot_stage entrypoint
boot_stage node
LOG_SINK_FD=3 node ${NODE_FLAGS.join(' ')} '${join(root, 'dist/enclave/main.js')}' 3>&"$BOOT_LOG_FD"
status=$?
boot_log_close
exit "$status"`;
  const child = spawn('bash', ['-c', script], { env: { ...process.env, LOG_LEVEL: 'info', BOOT_LOG_CONNECT: `TCP:${logAddr}`, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  const lone: Lone = {
    child, output: () => out, exited,
    waitForOutput: (text, timeoutMs = 60_000) => waitFor(async () => out.includes(text), timeoutMs, () => out),
    async stop() {
      // Its process group: bash, node and the socat that relays the pipe.
      if (child.exitCode === null && child.signalCode === null) {
        process.kill(-child.pid!, 'SIGTERM');
        await exited;
      }
    },
  };
  started.push(lone);
  return lone;
}

const journalHas = (text: string) => waitFor(async () => journal.output().includes(text), 60_000, () => `waiting for ${text} in the journal\n${journal.output()}`);

beforeAll(async () => {
  ensureCommand('socat', 'socat');
  dir = mkdtempSync(join(tmpdir(), 'host-log-'));
  logAddr = `127.0.0.1:${await freePort()}`;
  journal = startLone('host-log/main.js', { LOG_LISTEN_ADDR: logAddr });
  started.push(journal);
  await journal.waitForOutput('host-log: listening');
});
afterAll(async () => {
  for (const lone of started.reverse()) await lone.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('the host log receiver, fed as on Nitro', () => {
  it('receives the boot stages and the request lines, and never a tenant id, content, query, request id, key or file path', async () => {
    mkdirSync(join(dir, CANARY.dir));
    const keysFile = join(dir, CANARY.dir, 'keys.json');
    const key = issueKey(keysFile, [CANARY.tenant]);
    const hostStoreAddr = `127.0.0.1:${await freePort()}`;
    const hostStore = startLone('host-store/main.js', { DATA_DIR: join(dir, 'store'), HOST_STORE_ADDR: hostStoreAddr });
    started.push(hostStore);
    await hostStore.waitForOutput('host store listening');
    const enclaveAddr = `127.0.0.1:${await freePort()}`;
    const enclave = startEnclaveLikeEntrypoint({ ENCLAVE_ADDR: enclaveAddr, HOST_STORE_ADDR: hostStoreAddr, API_KEYS_FILE: keysFile });
    await enclave.waitForOutput('enclave listening');
    const port = await freePort();
    const proxy = startLone('proxy/main.js', { ENCLAVE_ADDR: enclaveAddr, HOST: '127.0.0.1', PORT: String(port), RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0' });
    started.push(proxy);
    const base = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${base}/healthz`)).status === 200, 60_000, proxy.output);

    const headers = { authorization: `Bearer ${key}`, 'x-request-id': CANARY.requestId };
    expect((await request(base, 'POST', '/v1/memory', { content: CANARY.content, tenant_id: CANARY.tenant }, headers)).status).toBe(200);
    expect((await request(base, 'GET', `/v1/memory?tenant_id=${CANARY.tenant}&query=${CANARY.query}`, undefined, headers)).status).toBe(200);
    expect((await request(base, 'GET', `/v1/memory?tenant_id=${CANARY.tenant}-other&query=${CANARY.query}`, undefined, headers)).status).toBe(403);
    await request(base, 'POST', '/v1/chat/completions', { model: 'local-memory', messages: [{ role: 'user', content: CANARY.content }] }, { ...headers, 'openai-organization': CANARY.tenant });

    for (const stage of ['entrypoint', 'node', 'started', 'host-store', 'api-keys', 'store', 'serving']) await journalHas(`"stage":"${stage}"`);
    await journalHas('"msg":"handled"');
    // The enclave logged them with the tenant's data in reach: the same lines on its own console...
    expect(enclave.output()).toContain(CANARY.dir);
    // ...but what reached the host holds none of it.
    const host = journal.output();
    for (const secret of [...Object.values(CANARY), key, key.slice(4, 20)]) expect(host, secret).not.toContain(secret);
    expect(host).toMatch(/^<6>enclave: \{"level":30,.*"stage":"serving"/m);
    expect(host).toMatch(/"route":"[A-Za-z]+","status":200/);
    expect(host).toMatch(/"redacted":\d+/);
  });

  it('gets the reason an enclave refused to start, before it exits', async () => {
    const hostStoreAddr = `127.0.0.1:${await freePort()}`;
    const hostStore = startLone('host-store/main.js', { DATA_DIR: join(dir, 'store-2'), HOST_STORE_ADDR: hostStoreAddr });
    started.push(hostStore);
    await hostStore.waitForOutput('host store listening');
    const enclave = startEnclaveLikeEntrypoint({
      ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, HOST_STORE_ADDR: hostStoreAddr,
      OPERATOR_PUBKEY: Buffer.alloc(32, 7).toString('base64'), API_KEYS_BLOB: 'api-keys.signed.json',
    });
    expect(await enclave.exited).toBe(2);
    await journalHas('no api-keys.signed.json in the host store');
    expect(journal.output()).toMatch(/^<2>enclave: .*"msg":"cannot start"/m);
  });
});
