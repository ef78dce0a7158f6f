/**
 * An old owner waking up (#38 item 3), as real processes: one host store, enclave A serving
 * through its proxy as owner generation 1, then enclave B (with its own proxy) opens the same
 * store on the same host store as generation 2. A's next write must answer 503
 * shard_not_owned naming the shard, never 200, and every later one too, reads included; B's writes are
 * stored; an enclave of generation 1 started afterwards is refused; a later owner finds
 * exactly what was acknowledged, on one chain. Then the same with A frozen (SIGSTOP) while B
 * takes over, and a write waiting for A when it wakes up (SIGCONT).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { startLone, type Lone } from '../helpers/processes.js';
import { freePort, startService, waitFor, type RunningService } from '../helpers/service.js';

let a: RunningService | undefined;
const others: Lone[] = [];
const tenant = 'takeover';

afterEach(async () => {
  for (const p of others.splice(0).reverse()) await p.stop();
  a?.enclave.kill('SIGCONT');
  await a?.stop();
  a = undefined;
});

/** An enclave of owner `generation` and its proxy on A's host store; resolves with the proxy's URL once it answers. */
async function secondEnclave(generation: number): Promise<string> {
  const enclaveAddr = `127.0.0.1:${await freePort()}`;
  const port = await freePort();
  const enclave = startLone('enclave/main.js', { ...a!.env, ENCLAVE_ADDR: enclaveAddr, OWNER_GENERATION: String(generation) });
  others.push(enclave);
  await enclave.waitForOutput('enclave listening', 60_000);
  const proxy = startLone('proxy/main.js', { ...a!.env, ENCLAVE_ADDR: enclaveAddr, PORT: String(port) });
  others.push(proxy);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/healthz`).catch(() => undefined))?.status === 200, 60_000, proxy.output);
  return url;
}
const add = (url: string, content: string) => request(url, 'POST', '/v1/memory', { tenant_id: tenant, content });
const list = (url: string) => request(url, 'GET', `/v1/memory?tenant_id=${tenant}`);
const contents = async (url: string) => {
  const res = await list(url);
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Array<{ content: string }>).map((m) => m.content).sort();
};
/** What the enclave behind `url` says of its ownership of shard 0 (its metrics, through the proxy). */
const owned = async (url: string) => /^agent_enclave_storage_shard_owned\{shard="0"[^}]*\} (\d+)$/m.exec(await (await fetch(`${url}/metrics`)).text())?.[1];
/** The refusal of a write by an owner that was taken over. */
const expectNotOwner = (res: Awaited<ReturnType<typeof add>>) => {
  expect(res.status, res.text).toBe(503);
  expect(res.body.error).toMatchObject({
    code: 'shard_not_owned', type: 'service_unavailable_error', message: expect.stringMatching(/^shard 0 \(memory\/\) is no longer owned by this enclave \(owner generation 1\)/),
  });
};

describe('a second enclave, of a higher generation, opens the store the first is serving', () => {
  it('the first answers 503 shard_not_owned to its next write and every later one, never 200; a lower generation cannot start; what was acknowledged is what is stored', async () => {
    a = await startService({ OWNER_GENERATION: '1' });
    expect((await add(a.baseUrl, 'before the takeover')).status).toBe(200);
    const b = await secondEnclave(2);
    expect(await contents(b)).toEqual(['before the takeover']);

    expect(await owned(a.baseUrl)).toBe('1');
    for (const content of ['the old owner, just after', 'the old owner, again']) expectNotOwner(await add(a.baseUrl, content));
    // The enclave's log line may reach us after its answer does.
    await waitFor(async () => a!.output().includes('another writer has written the memory store'), 30_000, () => a!.output());
    expect(await owned(a.baseUrl)).toBe('0');
    // Nor does it answer reads of the shard any more: they would miss the new owner's changes.
    expectNotOwner(await list(a.baseUrl));
    expect(await owned(b)).toBe('1');
    const written = await add(b, 'the new owner');
    expect(written.status).toBe(200);

    // An owner older than the store's last one is refused at start, and writes nothing.
    const stale = startLone('enclave/main.js', { ...a.env, ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, OWNER_GENERATION: '1' });
    others.push(stale);
    expect(await stale.exited).toBe(1);
    expect(stale.output()).toMatch(/refusing to start: shard 0 \(memory\/\) belongs to a newer owner: .* names owner generation 2, and this enclave opens it as generation 1/);
    expect((await add(b, 'the new owner, after the refused start')).status).toBe(200);

    const c = await secondEnclave(3);
    expect(await contents(c)).toEqual(['before the takeover', 'the new owner', 'the new owner, after the refused start']);
  });
});

describe('an owner frozen (SIGSTOP) while another takes over, then woken up (SIGCONT)', () => {
  it('the write that waited for it and every later one are refused, nothing it refused is stored, and the chain does not fork', async () => {
    // Deadlines long enough that the waiting write reaches the enclave, not the proxy's 504.
    a = await startService({ OWNER_GENERATION: '1', REQUEST_TIMEOUT_MS: '300000', ENCLAVE_TIMEOUT_MS: '300000' });
    expect((await add(a.baseUrl, 'before the freeze')).status).toBe(200);
    a.enclave.kill('SIGSTOP');
    const waiting = add(a.baseUrl, 'sent to the frozen owner');
    const b = await secondEnclave(2);
    const written = await add(b, 'the new owner, while the old one sleeps');
    expect(written.status, written.text).toBe(200);
    const newest = written.headers.get('x-tee-state');
    expect(newest).toMatch(/^\d+:/);

    a.enclave.kill('SIGCONT');
    expectNotOwner(await waiting);
    expectNotOwner(await add(a.baseUrl, 'the old owner, awake'));
    expectNotOwner(await list(a.baseUrl));

    // One chain: a later owner opens the store and answers from the head of B's last write.
    const c = await secondEnclave(3);
    const read = await list(c);
    expect(read.headers.get('x-tee-state')).toBe(newest);
    expect(await contents(c)).toEqual(['before the freeze', 'the new owner, while the old one sleeps']);
  });
});
