import { collectDefaultMetrics, Registry } from 'prom-client';

export type MetricsProcess = 'proxy' | 'enclave';

/** What GET /metrics answers with: Prometheus' text exposition format. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * A registry for one process. Every metric name starts with `agent_<process>_`, so the
 * proxy can serve its exposition and the enclave's one after the other without two
 * families of the same name (which Prometheus refuses); the `process` label says the same
 * for dashboards that aggregate. Node's default metrics (CPU, heap, event-loop lag) come
 * with the same prefix.
 */
export function createMetricsRegistry(process: MetricsProcess): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ process });
  collectDefaultMetrics({ register: registry, prefix: metricPrefix(process) });
  return registry;
}

export const metricPrefix = (process: MetricsProcess) => `agent_${process}_`;

/** Latency buckets in seconds, from a cached lookup to a slow model answer. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
