import type { Embedder } from '../embedding/embedder.js';

/**
 * The same embedder, reporting how long each call took and how many texts it embedded.
 * A wrapper rather than a change to the embedders: every implementation is timed alike,
 * and what attestation measures (id, sha256) passes through untouched.
 */
export function timedEmbedder(embedder: Embedder, observe: (texts: number, seconds: number) => void): Embedder {
  return {
    get id() { return embedder.id; },
    get dimension() { return embedder.dimension; },
    get sha256() { return embedder.sha256; },
    async embed(texts) {
      const started = performance.now();
      const vectors = await embedder.embed(texts);
      observe(texts.length, (performance.now() - started) / 1000);
      return vectors;
    },
    close: () => embedder.close(),
  };
}
