#!/usr/bin/env node
/**
 * agent-embed: embeds lines of text with the enclave's own embedder, locally. Reads lines on
 * stdin and writes, for each, one JSON array (the L2-normalised embedding) on stdout, in
 * order. Lines that arrive together are embedded together (one ONNX run per batch).
 * Exit status: 0 done, 1 the model could not be loaded or run, 2 usage error.
 */
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { modelsDir } from '../common/paths.js';
import { loadEmbedder, type Embedder } from '../enclave/embedding/embedder.js';

export const USAGE = `Usage: agent-embed [--model <name>] < lines.txt > vectors.jsonl

Reads lines of text on stdin and writes one JSON array per line on stdout: the embedding
of that line (an empty line gives the zero vector) under the model named by --model, else
EMBEDDING_MODEL, else "static" (the built-in static model in models/).

Options:
  --model <name>   embedding model (default: $EMBEDDING_MODEL or "static")
  --info           print the model's id, dimension and SHA-256 as JSON on stderr first
  -h, --help       show this help`;

/** Lines embedded per run at most; more waiting lines are taken in the next run. */
const MAX_BATCH = 100;
/** Lines read ahead of the embedder before stdin is paused. */
const MAX_PENDING = 10 * MAX_BATCH;

async function main(): Promise<number> {
  let options;
  try {
    options = parseArgs({
      args: process.argv.slice(2),
      strict: true,
      options: { model: { type: 'string' }, info: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } },
    }).values;
  } catch (error) {
    process.stderr.write(`agent-embed: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (options.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }

  let embedder: Embedder;
  try {
    embedder = await loadEmbedder({ name: options.model ?? process.env.EMBEDDING_MODEL ?? 'static', modelsDir });
  } catch (error) {
    process.stderr.write(`agent-embed: ${(error as Error).message}\n`);
    return 1;
  }
  if (options.info) {
    process.stderr.write(`${JSON.stringify({ id: embedder.id, dimension: embedder.dimension, sha256: embedder.sha256 })}\n`);
  }
  try {
    await embedLines(embedder);
    return 0;
  } finally {
    await embedder.close();
  }
}

/** Embeds stdin's lines in order, batching what has arrived while the previous batch ran. */
async function embedLines(embedder: Embedder): Promise<void> {
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  const pending: string[] = [];
  let closed = false;
  let wake: (() => void) | undefined;
  lines.on('line', (line) => {
    pending.push(line);
    if (pending.length >= MAX_PENDING) lines.pause();
    wake?.();
  });
  lines.on('close', () => {
    closed = true;
    wake?.();
  });

  for (;;) {
    if (pending.length === 0) {
      if (closed) return;
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
      continue;
    }
    const batch = pending.splice(0, MAX_BATCH);
    if (pending.length < MAX_PENDING) lines.resume();
    const vectors = await embedder.embed(batch);
    await write(vectors.map((vector) => JSON.stringify(Array.from(vector))).join('\n') + '\n');
  }
}

function write(text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(text, (error) => (error ? reject(error) : resolve()));
  });
}

// A reader that stops early (`agent-embed | head -1`) is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`agent-embed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
