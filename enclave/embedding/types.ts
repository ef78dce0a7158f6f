/**
 * The embedder interface the memory store, attestation and storage depend on. It imports
 * nothing, so an implementation (static model, transformer) can name it without importing
 * the registry that loads them, and the registry can import every implementation.
 */
export interface Embedder {
  /** Model name, e.g. "static-sif-100d". */
  readonly id: string;
  readonly dimension: number;
  /**
   * SHA-256 (hex) of what decides the vectors, as loaded; attestation measures it. The static
   * model: its model.onnx. A transformer: its model.json, which pins model.onnx and the tokenizer.
   */
  readonly sha256: string;
  /**
   * One L2-normalised vector per text, in order. A text with no known word gets the zero
   * vector, which callers must handle (it has no direction to compare).
   */
  embed(texts: string[]): Promise<Float32Array[]>;
  close(): Promise<void>;
}
