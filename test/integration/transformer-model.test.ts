import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { measureModel } from '../../enclave/attestation/pcrs.js';
import type { ModelPin } from '../../enclave/embedding/transformer-pins.js';
import { importModel } from '../../scripts/fetch-model.js';
import { verifyAttestation } from '../../protocol/attestation/verify.js';
import { request } from '../helpers/http.js';
import { freePort, startService, type RunningService } from '../helpers/service.js';
import { TINY_HIDDEN, buildTinyBert, sha256, tinyTokenizerJson } from '../helpers/tiny-bert.js';
import { startLoneEnclave } from '../helpers/processes.js';

let work: string;
let modelsDir: string;
let svc: RunningService;

beforeAll(async () => {
  // A generated model imported the way a user imports a local copy (with a pin for it).
  work = await mkdtemp(join(tmpdir(), 'transformer-it-'));
  modelsDir = join(work, 'models');
  const model = buildTinyBert();
  const tokenizer = tinyTokenizerJson();
  await writeFile(join(work, 'model.onnx'), model.onnx);
  await writeFile(join(work, 'tokenizer.json'), tokenizer);
  const pin: ModelPin = {
    name: 'tiny-bert', repo: 'example/tiny-bert', revision: 'f'.repeat(40), dimension: TINY_HIDDEN, max_length: 16,
    pooling: 'mean', output: 'last_hidden_state', lowercase: true,
    files: { model: { path: 'onnx/model.onnx', sha256: sha256(model.onnx) }, tokenizer: { path: 'tokenizer.json', sha256: sha256(tokenizer) } },
  };
  await importModel('tiny-bert', work, { modelsDir, pins: [pin] });
  svc = await startService({ EMBEDDING_MODEL: 'tiny-bert', MODELS_DIR: modelsDir });
});
afterAll(async () => {
  await svc?.stop();
  await rm(work, { recursive: true, force: true });
});

/** Runs the enclave alone until it exits; its exit code and output. */
async function enclaveExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const enclave = await startLoneEnclave({ DATA_DIR: join(work, 'data-fail'), ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, MODELS_DIR: modelsDir, ...env });
  const code = await enclave.exited;
  await enclave.stop();
  return { code, output: enclave.output() };
}

describe('a transformer model in the running service', () => {
  it('embeds memories and queries with it', async () => {
    expect(svc.output()).toMatch(/"embedding":"tiny-bert","dim":8/);
    for (const content of ['the cat sat on the mat', 'invoice due friday', 'my dog is called rex']) {
      expect((await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'alice', content })).status).toBe(200);
    }
    const res = await request(svc.baseUrl, 'GET', `/v1/memory?tenant_id=alice&query=${encodeURIComponent('Invoice due Friday!')}`);
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(3);
    expect(res.body.data[0].content).toBe('invoice due friday');
  });

  it('is what PCR2 measures: the model name and the SHA-256 of its model.json', async () => {
    const res = await request(svc.baseUrl, 'GET', '/v1/attestation');
    const rootPem = readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8');
    const result = await verifyAttestation(Buffer.from(res.body.code_attestation, 'base64'), { rootPem });
    expect(result.ok).toBe(true);
    const manifestHash = sha256(await readFile(join(modelsDir, 'tiny-bert', 'model.json')));
    expect(result.document!.pcrs[2]).toBe(Buffer.from(measureModel({ id: 'tiny-bert', sha256: manifestHash })).toString('hex'));
  });

  it('keeps the enclave from starting with an unknown model, or a model file that does not match its manifest', async () => {
    const unknown = await enclaveExit({ EMBEDDING_MODEL: 'no-such-model' });
    expect(unknown.code).not.toBe(0);
    expect(unknown.output).toMatch(/unknown embedder "no-such-model"/);

    const onnxFile = join(modelsDir, 'tiny-bert', 'model.onnx');
    const original = await readFile(onnxFile);
    const tampered = Buffer.from(original);
    tampered[tampered.length - 1] ^= 1;
    await writeFile(onnxFile, tampered);
    try {
      const refused = await enclaveExit({ EMBEDDING_MODEL: 'tiny-bert' });
      expect(refused.code).not.toBe(0);
      expect(refused.output).toMatch(/model\.onnx does not match the SHA-256 in its model\.json/);
    } finally {
      await writeFile(onnxFile, original);
    }
  });
});
