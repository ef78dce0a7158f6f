import type { Embedder } from './types.js';

interface Waiting {
  text: string;
  resolve: (vector: Float32Array) => void;
  reject: (err: unknown) => void;
}

/**
 * Embeds single texts that arrive together in one embedder call: every text asked for
 * before the event loop's next check phase joins the same run. An ONNX run of one short
 * text costs several times what one text of a run of sixteen does (the run's own overhead:
 * tensors, the session call, the native hop), and single-item adds at 16 clients arrive in
 * such groups (docs/performance.md, writes). A run that fails is retried text by text, so
 * one caller's failure is never another's.
 */
export class SingleTextBatcher {
  private waiting: Waiting[] = [];

  /** `embedder`: read at each run, so a model swapped in (MemoryService.reembed) is used from then on. */
  constructor(private readonly embedder: () => Embedder) {}

  embed(text: string): Promise<Float32Array> {
    return new Promise((resolve, reject) => {
      if (this.waiting.push({ text, resolve, reject }) === 1) setImmediate(() => void this.run());
    });
  }

  private async run(): Promise<void> {
    const batch = this.waiting;
    this.waiting = [];
    const embedder = this.embedder();
    try {
      const vectors = await embedder.embed(batch.map((w) => w.text));
      batch.forEach((w, i) => w.resolve(vectors[i]));
    } catch (err) {
      if (batch.length === 1) {
        batch[0].reject(err);
        return;
      }
      for (const w of batch) embedder.embed([w.text]).then(([vector]) => w.resolve(vector), w.reject);
    }
  }
}
