import type { SearchReplicas } from '../search-worker/search-replicas.js';
import type { TieredOptions } from '../vectors/tiered-index.js';
import { DEFAULT_CAPACITY, type Capacity } from './admission.js';
import type { ChangeLimits } from './change-admission.js';
import type { MemoryMeter } from './meter.js';
import { DEFAULT_TERM_LIMITS, type TermLimits } from './term-admission.js';
import { DEFAULT_HISTORY_LIMITS, type HistoryLimits } from './history.js';

export interface MemoryServiceOptions {
  /** Most memories one tenant may hold; adding beyond it is refused with 409. */
  maxMemoriesPerTenant?: number;
  /** Most memories all the tenants of one API key may hold together; beyond, 409. */
  maxMemoriesPerKey?: number;
  /** When a tenant moves from exact search to HNSW, and the graph's parameters. */
  vectorIndex?: TieredOptions;
  /** What the whole enclave agrees to hold (memory/admission.ts); unnamed limits keep their defaults. */
  capacity?: Partial<Capacity>;
  /** Distinct words per memory and per tenant (memory/term-admission.ts). */
  termLimits?: Partial<TermLimits>;
  /** Where large tenants' searches run off the event loop (search-worker/search-replicas.ts); without it, on it. */
  searchReplicas?: SearchReplicas;
  /** How many versions of each memory, and deleted memories' histories per tenant, are kept (memory/history.ts). */
  history?: Partial<HistoryLimits>;
  /** Told of every embed and search of a call that passes no meter of its own (GET /metrics). */
  meter?: MemoryMeter;
}

export const DEFAULT_MAX_MEMORIES_PER_TENANT = 100_000;

/** The limits `options` set, defaults for the rest. */
export const changeLimits = (options: MemoryServiceOptions): ChangeLimits => ({
  maxima: { perTenant: options.maxMemoriesPerTenant ?? DEFAULT_MAX_MEMORIES_PER_TENANT, perKey: options.maxMemoriesPerKey ?? Infinity },
  capacity: { ...DEFAULT_CAPACITY, ...options.capacity },
  termLimits: { ...DEFAULT_TERM_LIMITS, ...options.termLimits },
});

/** The history limits `options` set, defaults for the rest. */
export const historyLimits = (options: MemoryServiceOptions): HistoryLimits => ({ ...DEFAULT_HISTORY_LIMITS, ...options.history });
