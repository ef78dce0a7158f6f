import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { ApiError } from '../../common/errors.js';
import { attestationRoute } from '../../enclave/api/attestation-route.js';
import { resolveCall, type RouteCall } from '../../enclave/api/resolve-call.js';
import { openAuthorizer } from '../../enclave/auth/authorizer.js';
import { generateIdentity } from '../../enclave/keys.js';

// Through the enclave's router, as a request relayed by the proxy would go.
const request = (target: string) =>
  resolveCall({ request_id: 'r', method: 'GET', target, body: Buffer.alloc(0), authorization: '', organization: '', known_state: '' }, openAuthorizer.identify('')).call as RouteCall<'GetAttestation'>;

describe('GET /v1/attestation in the enclave', () => {
  it('answers 503 when the security module fails, and tries again on the next request', async () => {
    let calls = 0;
    const route = attestationRoute({
      provider: {
        teeName: 'aws-nitro-enclaves',
        attest: async () => {
          calls++;
          if (calls === 1) throw new Error('/usr/local/bin/nsm-attest failed: ENOENT');
          return new Uint8Array([1, 2, 3]);
        },
      },
      identity: generateIdentity(),
      operatorKey: new Uint8Array(32),
      boxPublicKey: new Uint8Array(32),
      userData: new Uint8Array(),
      log: pino({ level: 'silent' }),
    });
    const failure = await route(request('/v1/attestation')).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(ApiError);
    expect((failure as ApiError).toBody().error).toMatchObject({ code: 'attestation_unavailable', type: 'service_unavailable_error' });
    expect((failure as ApiError).status).toBe(503);
    // The failed document is not cached.
    const reply = await route(request('/v1/attestation'));
    expect(reply.status).toBe(200);
    expect(JSON.parse(Buffer.from(reply.body as Uint8Array).toString()).code_attestation).toBe('AQID');
  });

  it('bounds the fresh documents made at once (anyone may ask for one with a nonce): 503 attestation_busy beyond, the cached one still served', async () => {
    const releases: Array<() => void> = [];
    const route = attestationRoute({
      provider: { teeName: 'simulated', attest: ({ nonce }) => (nonce ? new Promise((resolve) => releases.push(() => resolve(new Uint8Array([9])))) : Promise.resolve(new Uint8Array([1]))) },
      identity: generateIdentity(),
      operatorKey: new Uint8Array(32),
      boxPublicKey: new Uint8Array(32),
      userData: new Uint8Array(),
      log: pino({ level: 'silent' }),
      maxFreshAtOnce: 2,
    });
    const inFlight = [route(request('/v1/attestation?nonce=aa')), route(request('/v1/attestation?nonce=bb'))];
    const busy = await route(request('/v1/attestation?nonce=cc')).catch((err: unknown) => err);
    expect((busy as ApiError).status).toBe(503);
    expect((busy as ApiError).toBody().error.code).toBe('attestation_busy');
    expect((await route(request('/v1/attestation'))).status).toBe(200);
    for (const release of releases.splice(0)) release();
    await Promise.all(inFlight);
    // Their places are free again.
    const again = route(request('/v1/attestation?nonce=dd'));
    await new Promise((r) => setTimeout(r, 0));
    for (const release of releases.splice(0)) release();
    expect((await again).status).toBe(200);
  });
});

describe('the cached document (no nonce)', () => {
  it('is reused within its five minutes and made anew after them', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(new Date('2026-11-21T08:00:00Z'));
      let made = 0;
      const route = attestationRoute({
        provider: { teeName: 'simulated', attest: async () => new Uint8Array([++made]) },
        identity: generateIdentity(),
        operatorKey: new Uint8Array(32),
        boxPublicKey: new Uint8Array(32),
        userData: new Uint8Array(),
        log: pino({ level: 'silent' }),
      });
      const served = async () => JSON.parse(Buffer.from((await route(request('/v1/attestation'))).body as Uint8Array).toString()).code_attestation as string;
      const first = await served();
      vi.setSystemTime(new Date('2026-11-21T08:04:59Z'));
      expect(await served()).toBe(first);
      // A nonce'd document is made fresh and does not replace the cached one.
      await route(request('/v1/attestation?nonce=ab'));
      expect(await served()).toBe(first);
      expect(made).toBe(2);
      vi.setSystemTime(new Date('2026-11-21T08:05:01Z'));
      const renewed = await served();
      expect(renewed).not.toBe(first);
      expect(made).toBe(3);
      // The new one is kept for its own five minutes, from when it was made.
      vi.setSystemTime(new Date('2026-11-21T08:10:00Z'));
      expect(await served()).toBe(renewed);
      vi.setSystemTime(new Date('2026-11-21T08:10:02Z'));
      expect(await served()).not.toBe(renewed);
    } finally {
      vi.useRealTimers();
    }
  });
});
