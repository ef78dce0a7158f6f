import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type RunningService } from '../helpers/service.js';

let svc: RunningService;
let certPem: string;

/** A self-signed certificate for 127.0.0.1, made for this test run. */
async function selfSigned(dir: string): Promise<{ cert: string; key: string }> {
  const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01', name: 'CN=127.0.0.1', keys, signingAlgorithm: alg,
    notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 3_600_000),
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'ip', value: '127.0.0.1' }])],
  }, webcrypto);
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  certPem = cert.toString('pem');
  writeFileSync(join(dir, 'cert.pem'), certPem);
  writeFileSync(join(dir, 'key.pem'), x509.PemConverter.encode(pkcs8, 'PRIVATE KEY'), { mode: 0o600 });
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
