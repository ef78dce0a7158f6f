import { createServer, type Server } from 'node:http';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadEmbedder } from '../../enclave/embedding/embedder.js';
import { PINNED_MODELS, pinnedFileUrl, type ModelPin } from '../../enclave/embedding/transformer-pins.js';
import { fetchModel, importModel } from '../../scripts/fetch-model.js';
import { TINY_HIDDEN, buildTinyBert, sha256, tinyTokenizerJson } from '../helpers/tiny-bert.js';

const model = buildTinyBert();
const tokenizer = tinyTokenizerJson();

/** A pin for the generated model, laid out like a Hugging Face repository. */
const tinyPin: ModelPin = {
  name: 'tiny-bert',
  repo: 'example/tiny-bert',
  revision: '0123456789abcdef0123456789abcdef01234567',
  dimension: TINY_HIDDEN,
  max_length: 16,
  pooling: 'mean',
  output: 'last_hidden_state',
  lowercase: true,
  files: {
    model: { path: 'onnx/model.onnx', sha256: sha256(model.onnx) },
    tokenizer: { path: 'tokenizer.json', sha256: sha256(tokenizer) },
  },
};
const unverifiedPin: ModelPin = {
  ...tinyPin,
  name: 'tiny-unverified',
  files: { ...tinyPin.files, model: { path: 'onnx/model.onnx', sha256: null, reportedSha256: sha256(model.onnx) } },
};
const pins = [tinyPin, unverifiedPin];

let work: string;
let modelsDir: string;
beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'model-fetch-'));
  modelsDir = join(work, 'models');
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

/** Writes the generated model's files under `layout` paths. */
async function source(layout: 'repository' | 'flat', onnx: Uint8Array = model.onnx): Promise<string> {
  const dir = join(work, `source-${layout}`);
  await mkdir(join(dir, 'onnx'), { recursive: true });
  await writeFile(join(dir, layout === 'repository' ? 'onnx/model.onnx' : 'model.onnx'), onnx);
  await writeFile(join(dir, 'tokenizer.json'), tokenizer);
  return dir;
}

const tampered = () => {
  const copy = Uint8Array.from(model.onnx);
  copy[copy.length - 1] ^= 1;
  return copy;
};

describe('importModel (--from)', () => {
  it('installs a local copy whose files match the pin, and the enclave loads it', async () => {
    const { dir, manifest } = await importModel('tiny-bert', await source('repository'), { modelsDir, pins });
    expect((await readdir(dir)).sort()).toEqual(['model.json', 'model.onnx', 'tokenizer.json']);
    expect(manifest).toMatchObject({ name: 'tiny-bert', dimension: 8, source: { repo: 'example/tiny-bert', revision: tinyPin.revision } });
    expect(await readFile(join(dir, 'model.onnx'))).toEqual(Buffer.from(model.onnx));

    const embedder = await loadEmbedder({ name: 'tiny-bert', modelsDir });
    try {
      expect(embedder.sha256).toBe(sha256(await readFile(join(dir, 'model.json'))));
      const [vector] = await embedder.embed(['the cat sat']);
      expect(Math.hypot(...vector)).toBeCloseTo(1, 5);
    } finally {
      await embedder.close();
    }
    expect((await readdir(modelsDir)).filter((f) => f.startsWith('.'))).toEqual([]); // no staging left
  });

  it('accepts files under their plain names, and measures the same model the same wherever it came from', async () => {
    await importModel('tiny-bert', await source('repository'), { modelsDir, pins });
    const first = await readFile(join(modelsDir, 'tiny-bert', 'model.json'));
    await importModel('tiny-bert', await source('flat'), { modelsDir, pins });
    expect(await readFile(join(modelsDir, 'tiny-bert', 'model.json'))).toEqual(first);
  });

  it('refuses a file whose checksum does not match, installing nothing and keeping what was there', async () => {
    await expect(importModel('tiny-bert', await source('flat', tampered()), { modelsDir, pins })).rejects.toThrow(
      new RegExp(`refusing onnx/model.onnx of tiny-bert: its SHA-256 is ${sha256(tampered())}, the pin requires ${tinyPin.files.model.sha256}; nothing was installed`),
    );
    expect(await readdir(modelsDir)).toEqual([]);

    await importModel('tiny-bert', await source('repository'), { modelsDir, pins });
    const before = await readFile(join(modelsDir, 'tiny-bert', 'model.onnx'));
    await rm(join(work, 'source-flat'), { recursive: true });
    await expect(importModel('tiny-bert', await source('flat', tampered()), { modelsDir, pins })).rejects.toThrow(/refusing/);
    expect(await readFile(join(modelsDir, 'tiny-bert', 'model.onnx'))).toEqual(before);
    expect(await readdir(modelsDir)).toEqual(['tiny-bert']);
  });

  it('says which file is missing from the folder', async () => {
    const dir = await source('flat');
    await rm(join(dir, 'tokenizer.json'));
    await expect(importModel('tiny-bert', dir, { modelsDir, pins })).rejects.toThrow(/no tokenizer\.json in .*source-flat; nothing was installed/);
  });

  it('refuses a model without verified hashes before reading anything, saying how to pin it', async () => {
    const error = await importModel('tiny-unverified', join(work, 'does-not-exist'), { modelsDir, pins }).catch((e: Error) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/tiny-unverified has no verified SHA-256 pinned for onnx\/model\.onnx, so it is not installed/);
    expect((error as Error).message).toContain(`https://huggingface.co/example/tiny-bert/blob/${tinyPin.revision}/onnx/model.onnx`);
    expect((error as Error).message).toContain(`reported elsewhere, unverified: ${sha256(model.onnx)}`);
    expect((error as Error).message).toContain('enclave/embedding/transformer-pins.ts');
    await expect(readdir(modelsDir)).rejects.toThrow(/ENOENT/);
  });

  it('refuses a name that is not pinned', async () => {
    await expect(importModel('gpt-embed', work, { modelsDir, pins })).rejects.toThrow(/no pinned model "gpt-embed"; pinned: tiny-bert, tiny-unverified/);
  });
});

describe('fetchModel (from a loopback server standing in for Hugging Face)', () => {
  let server: Server;
  let baseUrl: string;
  let served: Record<string, Uint8Array | string>;
  const requests: string[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests.push(req.url!);
      // Hugging Face answers resolve/ URLs of LFS files with a redirect to its CDN.
      if (req.url!.includes('/resolve/')) {
        res.writeHead(302, { location: req.url!.replace('/resolve/', '/cdn/') }).end();
        return;
      }
      const body = served[req.url!.replace('/cdn/', '/resolve/')];
      if (body === undefined) res.writeHead(404).end('Entry not found');
      else res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body);
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((done) => server.close(done));
  });
  beforeEach(() => {
    requests.length = 0;
    served = {
      [new URL(pinnedFileUrl(tinyPin, tinyPin.files.model, baseUrl)).pathname]: model.onnx,
      [new URL(pinnedFileUrl(tinyPin, tinyPin.files.tokenizer, baseUrl)).pathname]: tokenizer,
    };
  });

  it('downloads the pinned revision and installs it', async () => {
    const lines: string[] = [];
    await fetchModel('tiny-bert', { modelsDir, pins, baseUrl, log: (line) => lines.push(line) });
    expect(requests).toContain(`/example/tiny-bert/resolve/${tinyPin.revision}/onnx/model.onnx`);
    expect(lines.at(-1)).toMatch(/installed tiny-bert \(example\/tiny-bert@0123456789ab\)/);
    const embedder = await loadEmbedder({ name: 'tiny-bert', modelsDir });
    await embedder.close();
  });

  it('refuses a download whose checksum does not match', async () => {
    served[`/example/tiny-bert/resolve/${tinyPin.revision}/tokenizer.json`] = tokenizer.replace('"cat":6', '"cat":7');
    await expect(fetchModel('tiny-bert', { modelsDir, pins, baseUrl })).rejects.toThrow(/refusing tokenizer\.json of tiny-bert: its SHA-256 is [0-9a-f]{64}, the pin requires/);
    expect(await readdir(modelsDir)).toEqual([]);
  });

  it('reports an HTTP error', async () => {
    served = {};
    await expect(fetchModel('tiny-bert', { modelsDir, pins, baseUrl })).rejects.toThrow(/answered HTTP 404; nothing was installed/);
  });

  it('refuses the real pins, whose hashes are not verified, without a single request', async () => {
    for (const pin of PINNED_MODELS) {
      await expect(fetchModel(pin.name, { modelsDir, baseUrl })).rejects.toThrow(/has no verified SHA-256 pinned/);
    }
    expect(requests).toEqual([]);
  });
});

describe('the pin table', () => {
  it('pins every model to a full commit, and records hashes only as 64 hex digits or not at all', () => {
    for (const pin of PINNED_MODELS) {
      expect(pin.revision, pin.name).toMatch(/^[0-9a-f]{40}$/);
      for (const file of Object.values(pin.files)) {
        if (file.sha256 !== null) expect(file.sha256).toMatch(/^[0-9a-f]{64}$/);
        if (file.reportedSha256 !== undefined) expect(file.reportedSha256).toMatch(/^[0-9a-f]{64}$/);
      }
      expect(pinnedFileUrl(pin, pin.files.model)).toBe(`https://huggingface.co/${pin.repo}/resolve/${pin.revision}/onnx/model.onnx`);
    }
  });
});
