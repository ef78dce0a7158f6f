import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { createMetricsRegistry, LATENCY_BUCKETS, metricPrefix } from '../../common/metrics.js';

const name = (suffix: string) => `${metricPrefix('enclave')}${suffix}`;

/** What the metrics read when scraped, rather than being told on every change. */
export interface EnclaveGauges {
  /** Aggregate counts only: never which tenants. */
  usage(): { tenants: number; memories: number };
  /** Requests holding a place in the work gate now. */
  inFlight(): number;
  /** The search worker's copies of large tenants, and the searches it has answered (0 and 0 without one). */
  searchWorker(): { copies: number; searches: number };
  /** Each shard's state head: changes made durable in it, by shard index (storage/sharded-store.ts). */
  shardHeads?(): readonly number[];
  /** Whether this enclave serves each shard (false when not held, or once another owner wrote it: storage/sharded-store.ts), by shard index. */
  shardsOwned?(): readonly boolean[];
}

/**
 * The enclave's metrics. Labels are chosen from closed sets (route names of the route
 * table, HTTP statuses), never from request data: no tenant id, key, query or content can
 * become a label value, so none can reach the exposition the untrusted host reads.
 */
export class EnclaveMetrics {
  readonly registry: Registry = createMetricsRegistry('enclave');

  private readonly requests = new Counter({
    name: name('requests_total'), help: 'API requests handled, by route (route-table name) and HTTP status; a sealed request counts once, as Sealed',
    labelNames: ['route', 'status', 'streamed'] as const, registers: [this.registry],
  });

  private readonly requestSeconds = new Histogram({
    name: name('request_duration_seconds'), help: 'Time from a request reaching the enclave to its signed reply (a stream: to its end)',
    labelNames: ['route', 'streamed'] as const, buckets: LATENCY_BUCKETS, registers: [this.registry],
  });

  private readonly embedSeconds = new Histogram({
    name: name('embedding_duration_seconds'), help: 'One call of the embedding model (a batch of texts)',
    buckets: LATENCY_BUCKETS, registers: [this.registry],
  });

  private readonly embeddedTexts = new Counter({
    name: name('embedded_texts_total'), help: 'Texts embedded', registers: [this.registry],
  });

  private readonly searchSeconds = new Histogram({
    name: name('search_duration_seconds'), help: 'One memory search after its query is embedded (vector and lexical search, fusion)',
    buckets: LATENCY_BUCKETS, registers: [this.registry],
  });

  private readonly commitSeconds = new Histogram({
    name: name('storage_commit_duration_seconds'), help: 'One group commit: a batch of log entries written to the host store and synced',
    buckets: LATENCY_BUCKETS, registers: [this.registry],
  });

  private readonly committedEntries = new Counter({
    name: name('storage_committed_entries_total'), help: 'Log entries made durable', registers: [this.registry],
  });

  constructor(gauges: EnclaveGauges, capacity: { maxInFlight: number }) {
    new Gauge({
      name: name('memories'), help: 'Memories held, over all tenants', registers: [this.registry],
      collect() { this.set(gauges.usage().memories); },
    });
    new Gauge({
      name: name('tenants'), help: 'Tenants holding at least one memory (a count, never which)', registers: [this.registry],
      collect() { this.set(gauges.usage().tenants); },
    });
    new Gauge({
      name: name('work_in_flight'), help: 'Requests holding a place in the work gate (open streams included)', registers: [this.registry],
      collect() { this.set(gauges.inFlight()); },
    });
    new Gauge({
      name: name('search_worker_copies'), help: 'Large tenants with a copy in the search worker, built or building (SEARCH_WORKER; a count, never which)', registers: [this.registry],
      collect() { this.set(gauges.searchWorker().copies); },
    });
    let searches = 0;
    new Counter({
      name: name('search_worker_searches_total'), help: 'Queries the search worker searched for: both searches and the ranking under load, BM25 alone for a query alone (the others were searched on the event loop)', registers: [this.registry],
      collect() {
        const now = gauges.searchWorker().searches;
        this.inc(now - searches);
        searches = now;
      },
    });
    new Gauge({
      name: name('storage_shard_changes'), help: 'Changes made durable in each shard\'s store since it was made (its state head\'s seq), by shard index (SHARDS; never which tenants)',
      labelNames: ['shard'] as const, registers: [this.registry],
      collect() {
        (gauges.shardHeads?.() ?? []).forEach((seq, shard) => this.set({ shard: String(shard) }, seq));
      },
    });
    new Gauge({
      name: name('storage_shard_owned'), help: 'Whether this enclave serves each shard: 1, or 0 when it does not hold it (not opened, or closed) or another owner (a higher generation) has written it since, and it refuses its tenants (503 shard_not_owned), by shard index',
      labelNames: ['shard'] as const, registers: [this.registry],
      collect() {
        (gauges.shardsOwned?.() ?? []).forEach((owned, shard) => this.set({ shard: String(shard) }, owned ? 1 : 0));
      },
    });
    new Gauge({
      name: name('work_capacity'), help: 'Places in the work gate (ENCLAVE_MAX_IN_FLIGHT); one more request is refused with 503', registers: [this.registry],
    }).set(capacity.maxInFlight);
  }

  handled(route: string, status: number, seconds: number, streamed: boolean): void {
    const s = streamed ? 'true' : 'false';
    this.requests.inc({ route, status: String(status), streamed: s });
    this.requestSeconds.observe({ route, streamed: s }, seconds);
  }

  embedded(texts: number, seconds: number): void {
    this.embeddedTexts.inc(texts);
    this.embedSeconds.observe(seconds);
  }

  searched(seconds: number): void {
    this.searchSeconds.observe(seconds);
  }

  committed(entries: number, seconds: number): void {
    this.committedEntries.inc(entries);
    this.commitSeconds.observe(seconds);
  }

  exposition(): Promise<string> {
    return this.registry.metrics();
  }
}
