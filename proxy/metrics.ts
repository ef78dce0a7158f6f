import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createMetricsRegistry, LATENCY_BUCKETS, metricPrefix } from '../common/metrics.js';
import { apiRoutes, routeNames } from '../common/routes.js';

const name = (suffix: string) => `${metricPrefix('proxy')}${suffix}`;

/** `GET /v1/memory` → 'ListMemories': the route table's names, by method and path template. */
const tableNames = new Map<string, string>(routeNames.map((n) => [`${apiRoutes[n].method} ${apiRoutes[n].path}`, n]));
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * The proxy's own metrics. The route label is the route table's name for an API route and
 * the path template for the proxy's own routes ('unmatched' for a 404), never the URL a
 * client sent: a URL holds ids and queries, and would make a label per request.
 */
export class ProxyMetrics {
  readonly registry: Registry = createMetricsRegistry('proxy');

  private readonly requests = new Counter({
    name: name('http_requests_total'), help: 'HTTP requests answered, by route, method and status',
    labelNames: ['route', 'method', 'status'] as const, registers: [this.registry],
  });

  private readonly seconds = new Histogram({
    name: name('http_request_duration_seconds'), help: 'Time from a request\'s arrival to the end of its answer (a stream: to its last byte)',
    labelNames: ['route', 'method'] as const, buckets: LATENCY_BUCKETS, registers: [this.registry],
  });

  /** Set on each scrape: whether the enclave's own metrics could be fetched. */
  readonly enclaveUp = new Gauge({
    name: name('enclave_metrics_up'), help: '1 when the enclave answered the last metrics scrape, 0 when its metrics are missing from it',
    registers: [this.registry],
  });

  observe(req: FastifyRequest, reply: FastifyReply): void {
    const route = routeLabel(req);
    const method = METHODS.has(req.method) ? req.method : 'OTHER';
    this.requests.inc({ route, method, status: String(reply.statusCode) });
    this.seconds.observe({ route, method }, reply.elapsedTime / 1000);
  }
}

function routeLabel(req: FastifyRequest): string {
  // Undefined when no route matched: the not-found handler answered.
  const template = req.routeOptions.url;
  if (template === undefined) return 'unmatched';
  return tableNames.get(`${req.method} ${template}`) ?? template;
}
