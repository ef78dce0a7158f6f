/**
 * An old owner waking up (#38 item 3), as real processes: one host store, enclave A serving
 * through its proxy, then enclave B (with its own proxy) opens the same store on the same
 * host store. A's next write must answer 503, never 200, and every later one too; B's
 * writes are stored; a third enclave opened afterwards finds exactly what was acknowledged.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { startLone, type Lone } from '../helpers/processes.js';
import { freePort, startService, waitFor, type RunningService } from '../helpers/service.js';

let a: RunningService;
const others: Lone[] = [];
const tenant = 'takeover';

/** An enclave and its proxy on the running host store; resolves with the proxy's URL once it answers. */
async function secondEnclave(): Promise<string> {
  const enclaveAddr = `127.0.0.1:${await freePort()}`;
  const port = await freePort();
  const enclave = startLone('enclave/main.js', { ...a.env, ENCLAVE_ADDR: enclaveAddr });
  others.push(enclave);
  await enclave.waitForOutput('enclave listening', 60_000);
  const proxy = startLone('proxy/main.js', { ...a.env, ENCLAVE_ADDR: enclaveAddr, PORT: String(port) });
  others.push(proxy);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/healthz`).catch(() => undefined))?.status === 200, 60_000, proxy.output);
  return url;
}
const add = (url: string, content: string) => request(url, 'POST', '/v1/memory', { tenant_id: tenant, content });
const contents = async (url: string) => {
  const res = await request(url, 'GET', `/v1/memory?tenant_id=${tenant}`);
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Array<{ content: string }>).map((m) => m.content).sort();
};

beforeAll(async () => {
  a = await startService();
});
afterAll(async () => {
  for (const p of others.reverse()) await p.stop();
  await a?.stop();
});

describe('a second enclave opens the store the first is serving', () => {
  it('the first answers 503 to its next write and every later one, never 200; what was acknowledged is what is stored', async () => {
    expect((await add(a.baseUrl, 'before the takeover')).status).toBe(200);
    const b = await secondEnclave();
    expect(await contents(b)).toEqual(['before the takeover']);

    for (const content of ['the old owner, just after', 'the old owner, again']) {
      const res = await add(a.baseUrl, content);
      expect(res.status, res.text).toBe(503);
      expect(res.body.error).toMatchObject({ code: 'storage_unavailable' });
    }
    expect(a.output()).toContain('another writer has written the memory store');
    expect((await add(b, 'the new owner')).status).toBe(200);

    const c = await secondEnclave();
    expect(await contents(c)).toEqual(['before the takeover', 'the new owner']);
  });
});
