/**
 * "The enclave's signing and box keys are born in enclave memory and never written"
 * (docs/trust-model.md), searched for in everything the host gets: every file of the host
 * store's DATA_DIR and every byte a recording relay saw on both sides of the proxy, after real
 * work (plain adds and searches, a sealed add and search, attestation). The test does not know
 * the private keys (the enclave gives them to no one); it searches for any 32 bytes that give
 * the published public keys (test/helpers/key-scan.ts). The sealing key is written by design
 * in simulated mode (sealing-key.simulated.json): it must be in that file and nowhere else.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIMULATED_KEY_FILE } from '../../enclave/storage/sealing-key.js';
import { connect } from '../../sdk/client.js';
import { request } from '../helpers/http.js';
import { filesUnder, occurrences, scanForPrivateKeys } from '../helpers/key-scan.js';
import { startRecordingRelay, type RecordingRelay } from '../helpers/relay.js';
import { startService, type RunningService } from '../helpers/service.js';

let svc: RunningService;
let front: RecordingRelay;
let back: RecordingRelay | undefined;
let signingPublicKey: Buffer;
let boxPublicKey: Buffer;

beforeAll(async () => {
  svc = await startService({ SNAPSHOT_LOG_BYTES: '4096' }, {
    proxyEnclaveAddr: async (enclaveAddr) => {
      back = await startRecordingRelay(enclaveAddr);
      return back.address;
    },
  });
  front = await startRecordingRelay(svc.baseUrl.replace('http://', ''));
  const frontUrl = `http://${front.address}`;

  // Work that makes the enclave write (log entries, a snapshot past 4 KiB) and answer (signed, sealed).
  for (let i = 0; i < 12; i++) {
    expect((await request(frontUrl, 'POST', '/v1/memory', { tenant_id: 'keys', content: `note ${i} about the ferry timetable and the harbour` })).status).toBe(200);
  }
  expect((await request(frontUrl, 'GET', '/v1/memory?tenant_id=keys&query=ferry&top_k=3')).status).toBe(200);
  const tee = await connect({ insecureSkipPcrPinning: true, baseUrl: frontUrl, rootPem: readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8') });
  expect((await tee.sealedCall('POST', '/v1/memory', { tenant_id: 'keys', content: 'a sealed note about the lighthouse' })).status).toBe(200);
  expect((await tee.sealedCall('GET', '/v1/memory?tenant_id=keys&query=lighthouse&top_k=1')).status).toBe(200);
  const attestation = await request(frontUrl, 'GET', '/v1/attestation?nonce=00ff');
  signingPublicKey = Buffer.from(attestation.body.tee_public_key, 'base64');
  boxPublicKey = Buffer.from(attestation.body.tee_box_public_key, 'base64');
}, 180_000);
afterAll(async () => {
  await front?.close();
  await svc?.stop();
  await back?.close();
});

/** Everything the host holds or carried: DATA_DIR's files and the four directions of the relays. */
function hostBytes(): Record<string, Buffer> {
  const files = Object.fromEntries(Object.entries(filesUnder(svc.dataDir)).map(([name, bytes]) => [`DATA_DIR/${name}`, bytes]));
  return {
    ...files,
    'client → proxy': front.upstream(),
    'proxy → client': front.downstream(),
    'proxy → enclave': back!.upstream(),
    'enclave → proxy': back!.downstream(),
  };
}

describe('the enclave\'s private keys never reach the host', () => {
  it('no 32 bytes anywhere in DATA_DIR or on the wire are the signing key\'s seed or the box secret key, raw, base64 or hex', () => {
    const sources = hostBytes();
    expect(Object.keys(sources).some((name) => /^DATA_DIR\/memory\/(log-\d+|snapshot)\.sealed$/.test(name))).toBe(true);
    const { hits, bytesSearched } = scanForPrivateKeys(sources, { signingPublicKey, boxPublicKey });
    expect(hits).toEqual([]);
    // It searched what the host saw: every blob and the traffic of the work above.
    expect(bytesSearched).toBeGreaterThanOrEqual(Object.values(sources).reduce((n, b) => n + b.length, 0));
  }, 120_000);

  it('the search finds a key that is there (a positive control: a seed and a box key planted in a copy of the bytes)', async () => {
    const { randomBytes } = await import('node:crypto');
    const sodium = (await import('sodium-native')).default;
    const seed = randomBytes(32);
    const boxSecret = randomBytes(32);
    const pk = Buffer.alloc(32);
    const sk = Buffer.alloc(64);
    sodium.crypto_sign_seed_keypair(pk, sk, seed);
    const boxPk = Buffer.alloc(32);
    sodium.crypto_scalarmult_base(boxPk, boxSecret);
    const planted = {
      wire: Buffer.concat([back!.downstream().subarray(0, 777), sk, Buffer.from('padding')]),
      file: Buffer.from(`{"k":"${boxSecret.toString('base64')}"}`),
    };
    const { hits } = scanForPrivateKeys(planted, { signingPublicKey: pk, boxPublicKey: boxPk });
    expect(hits).toEqual([
      { where: 'wire', key: 'signing seed', offset: 777, encoding: 'raw' },
      { where: 'file', key: 'box secret key', offset: 0, encoding: 'base64' },
    ]);
  });

  it('the simulated sealing key is in sealing-key.simulated.json by design, and in no other blob and never on the wire', () => {
    const sources = hostBytes();
    const key = Buffer.from((JSON.parse(sources[`DATA_DIR/${SIMULATED_KEY_FILE}`].toString('utf8')) as { key: string }).key, 'base64');
    expect(key).toHaveLength(32);
    expect(occurrences(sources, key)).toEqual([`DATA_DIR/${SIMULATED_KEY_FILE}`]);
  });
});
