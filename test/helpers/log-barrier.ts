import { randomBytes } from 'node:crypto';
import { request } from './http.js';
import { waitFor } from './service.js';

/**
 * Waits until the proxy and the enclave have logged everything that happened so far, so a
 * test may then assert that a line is absent: sends one more request with an id of its own
 * and waits for both processes' lines about it. Each process writes its lines in order, so
 * every line an earlier request made is in the output by then. An event, not a fixed sleep
 * (which passes trivially when the line comes later).
 */
export async function logsCaughtUp(baseUrl: string, output: () => string): Promise<void> {
  const id = `log-barrier-${randomBytes(6).toString('hex')}`;
  const answer = await request(baseUrl, 'GET', '/v1/attestation', undefined, { 'x-request-id': id });
  if (answer.status !== 200) throw new Error(`the log barrier's request answered ${answer.status}: ${answer.text}`);
  await waitFor(async () => {
    const lines = output().split('\n').filter((line) => line.includes(id));
    return lines.some((line) => line.includes('proxy')) && lines.some((line) => line.includes('enclave'));
  }, 30_000, () => `waiting for the proxy's and the enclave's log lines of request ${id}\n${output()}`);
}
