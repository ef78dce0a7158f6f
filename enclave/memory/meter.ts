/**
 * How the memory service reports its work for GET /metrics: one way of timing, told per
 * call. A sealed call's work is done with NO_METER, since counters that move by one embed or
 * one search would tell the host, which reads /metrics, what the sealed call did.
 */
export interface MemoryMeter {
  /** One embedder call of `texts` texts took `seconds`. */
  embedded(texts: number, seconds: number): void;
  /** One search, from the query to its ranking (its embedding included), took `seconds`. */
  searched(seconds: number): void;
}

export const NO_METER: MemoryMeter = { embedded() {}, searched() {} };
