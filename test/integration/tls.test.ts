import 'reflect-metadata';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCert } from '../helpers/certs.js';
import { startService, type RunningService } from '../helpers/service.js';

let svc: RunningService;
let certPem: string;

/** The test's certificate, written where TLS_CERT and TLS_KEY name it. */
async function selfSigned(dir: string): Promise<{ cert: string; key: string }> {
  const made = await selfSignedCert();
  certPem = made.cert;
  writeFileSync(join(dir, 'cert.pem'), made.cert);
  writeFileSync(join(dir, 'key.pem'), made.key, { mode: 0o600 });
  return { cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem') };
}

let certDir: string;
beforeAll(async () => {
  certDir = mkdtempSync(join(tmpdir(), 'agent-tls-'));
  const files = await selfSigned(certDir);
  svc = await startService({ TLS_CERT: files.cert, TLS_KEY: files.key }, { https: true });
});
afterAll(async () => {
  await svc?.stop();
  rmSync(certDir, { recursive: true, force: true });
});

describe('TLS termination at the proxy', () => {
  it('serves the API over HTTPS with the configured certificate', async () => {
    const dispatcher = new Agent({ connect: { ca: certPem } });
    const res = await request(`${svc.baseUrl}/v1/memory`, {
      method: 'POST', dispatcher,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ content: 'over TLS', tenant_id: 'tls' }),
    });
    expect(svc.baseUrl.startsWith('https://')).toBe(true);
    expect(res.statusCode).toBe(200);
    expect(((await res.body.json()) as { content: string }).content).toBe('over TLS');
    await dispatcher.close();
  });

  it('does not answer plain HTTP on the TLS port', async () => {
    await expect(fetch(svc.baseUrl.replace('https://', 'http://') + '/healthz')).rejects.toThrow();
  });
});
