/**
 * What PCR1 measures, read from the running enclave: enclaves that differ in one setting are
 * started alone (each with its own host store), and the PCRs come from the documents they sign
 * (GET /v1/attestation over gRPC, verified against their simulated roots). Hashing files in a
 * unit test cannot show that the running enclave feeds a setting into its measurement; this can.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import nacl from 'tweetnacl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { measureCode } from '../../enclave/attestation/pcrs.js';
import type { ModelPin } from '../../enclave/embedding/transformer-pins.js';
import { importModel } from '../../scripts/fetch-model.js';
import { attestLoneEnclave } from '../helpers/lone-attestation.js';
import { issueKey, startLoneEnclave, type Lone } from '../helpers/processes.js';
import { freePort } from '../helpers/service.js';
import { TINY_HIDDEN, buildTinyBert, sha256, tinyTokenizerJson } from '../helpers/tiny-bert.js';

let dir: string;
const started: Lone[] = [];
type Pcrs = Record<number, string>;
const measured: Record<string, Pcrs> = {};

// Every enclave gets the same operator key unless the test varies it: without one, each would
// make its own key pair in its host store, and PCR1 would differ for that reason alone.
const OPERATOR = Buffer.from(nacl.sign.keyPair.fromSeed(new Uint8Array(32).fill(1)).publicKey).toString('base64');
const OTHER_OPERATOR = Buffer.from(nacl.sign.keyPair.fromSeed(new Uint8Array(32).fill(2)).publicKey).toString('base64');
const KMS_A = 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
const KMS_B = 'arn:aws:kms:eu-west-1:111122223333:key/ffffabcd-12ab-34cd-56ef-1234567890ab';

/** Starts an enclave alone with the baseline plus `env`, reads its PCRs from a document it signed, and stops it. */
async function pcrsOf(name: string, env: NodeJS.ProcessEnv): Promise<void> {
  const dataDir = join(dir, `data-${name}`);
  const enclaveAddr = `127.0.0.1:${await freePort()}`;
  const enclave = await startLoneEnclave({ DATA_DIR: dataDir, ENCLAVE_ADDR: enclaveAddr, OPERATOR_PUBKEY: OPERATOR, KMS_KEY_ID: KMS_A, ...env });
  started.push(enclave);
  try {
    await enclave.waitForOutput('enclave listening');
    const result = await attestLoneEnclave(enclaveAddr, dataDir);
    expect(result.checks.filter((c) => !c.ok), name).toEqual([]);
    measured[name] = result.document!.pcrs;
  } finally {
    await enclave.stop();
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-pcr-'));
  // A second embedding model, cheap: the generated tiny BERT that transformer-model.test.ts uses.
  const modelsDir = join(dir, 'models');
  const model = buildTinyBert();
  const tokenizer = tinyTokenizerJson();
  await writeFile(join(dir, 'model.onnx'), model.onnx);
  await writeFile(join(dir, 'tokenizer.json'), tokenizer);
  const pin: ModelPin = {
    name: 'tiny-bert', repo: 'example/tiny-bert', revision: 'f'.repeat(40), dimension: TINY_HIDDEN, max_length: 16,
    pooling: 'mean', output: 'last_hidden_state', lowercase: true,
    files: { model: { path: 'onnx/model.onnx', sha256: sha256(model.onnx) }, tokenizer: { path: 'tokenizer.json', sha256: sha256(tokenizer) } },
  };
  await importModel('tiny-bert', dir, { modelsDir, pins: [pin] });
  const keysA = join(dir, 'keys-a.json');
  const keysB = join(dir, 'keys-b.json');
  issueKey(keysA, ['alice']);
  issueKey(keysB, ['mallory']);

  // Two at a time: each is an enclave and a host store, on two shared cores.
  const runs: Array<[string, NodeJS.ProcessEnv]> = [
    ['baseline', { API_KEYS_FILE: keysA }],
    // Irrelevant to what the enclave is: its log level, its port and folder, its storage and capacity tuning.
    ['irrelevant', { API_KEYS_FILE: keysA, LOG_LEVEL: 'debug', SNAPSHOT_LOG_BYTES: '65536', MAX_MEMORIES_PER_TENANT: '7', RATE_LIMIT_MAX: '3' }],
    ['model_base_url', { API_KEYS_FILE: keysA, MODEL_BASE_URL: 'http://127.0.0.1:9/v1' }],
    ['embedding_model', { API_KEYS_FILE: keysA, EMBEDDING_MODEL: 'tiny-bert', MODELS_DIR: modelsDir }],
    ['operator_pubkey', { API_KEYS_FILE: keysA, OPERATOR_PUBKEY: OTHER_OPERATOR }],
    ['kms_key_id', { API_KEYS_FILE: keysA, KMS_KEY_ID: KMS_B }],
    ['api_keys_file', { API_KEYS_FILE: keysB }],
  ];
  for (let i = 0; i < runs.length; i += 2) await Promise.all(runs.slice(i, i + 2).map(([name, env]) => pcrsOf(name, env)));
}, 300_000);

afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
  rmSync(dir, { recursive: true, force: true });
});

describe('what the running enclave measures (simulated PCR1)', () => {
  it.each(['model_base_url', 'embedding_model', 'operator_pubkey', 'kms_key_id'])('another %s gives another PCR1, and the same PCR0', (name) => {
    expect(measured[name][1]).not.toBe(measured.baseline[1]);
    expect(measured[name][0]).toBe(measured.baseline[0]);
  });

  it('another embedding model also gives another PCR2 (the model\'s bytes)', () => {
    expect(measured.embedding_model[2]).not.toBe(measured.baseline[2]);
    expect(measured.model_base_url[2]).toBe(measured.baseline[2]);
  });

  it('PCR0 is the enclave\'s built code: every .js file of dist/enclave, dist/common and dist/protocol', async () => {
    const dist = resolve(import.meta.dirname, '../../dist');
    const code = await measureCode(['enclave', 'common', 'protocol'].map((d) => join(dist, d)));
    expect(measured.baseline[0]).toBe(Buffer.from(code).toString('hex'));
  });

  it('settings that do not change what the enclave is (log level, port, folder, tuning) leave every PCR as it was', () => {
    for (const i of [0, 1, 2]) expect(measured.irrelevant[i], `PCR${i}`).toBe(measured.baseline[i]);
  });

  it('the API keys file is not in simulated PCR1 (on Nitro it is a file of the image, so PCR0 measures it; docs/trust-model.md)', () => {
    // Reloaded on SIGHUP, so a measurement taken at start would go stale; the simulated TEE
    // does not pretend to measure it. Kept as a test so the docs cannot drift from it.
    for (const i of [0, 1, 2]) expect(measured.api_keys_file[i], `PCR${i}`).toBe(measured.baseline[i]);
  });
});
