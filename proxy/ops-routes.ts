import type { FastifyInstance } from 'fastify';
import { METRICS_CONTENT_TYPE } from '../common/metrics.js';
import type { EnclaveLink } from './enclave-client.js';
import type { ProxyMetrics } from './metrics.js';

type Check = 'ok' | 'failed' | 'unknown';

/**
 * The proxy's own operational routes (not API routes, so not in the route table):
 *
 * - GET /metrics: the proxy's metrics, then the enclave's, fetched over the gRPC channel.
 *   Without the enclave, the proxy's own still answer (agent_proxy_enclave_metrics_up 0).
 * - GET /readyz: 200 only when the enclave answers, has its embedding model loaded and
 *   its memories recovered; 503 otherwise, naming the check that failed. (/healthz, which
 *   predates it, stays as it is.)
 */
export function registerOpsRoutes(app: FastifyInstance, deps: { enclave: EnclaveLink; metrics: ProxyMetrics }): void {
  app.get('/metrics', async (_req, reply) => {
    let enclaveText = '';
    try {
      enclaveText = await deps.enclave.metrics();
      deps.metrics.enclaveUp.set(1);
    } catch {
      deps.metrics.enclaveUp.set(0);
    }
    const own = await deps.metrics.registry.metrics();
    void reply.type(METRICS_CONTENT_TYPE).header('cache-control', 'no-store').send(own + enclaveText);
  });

  app.get('/readyz', async (_req, reply) => {
    const checks: Record<'enclave' | 'embedding_model' | 'store', Check> = { enclave: 'unknown', embedding_model: 'unknown', store: 'unknown' };
    try {
      const health = await deps.enclave.health(1000);
      checks.enclave = 'ok';
      // An enclave that predates these fields reports false: not ready, which fails safe.
      checks.embedding_model = health.embedding_model_loaded ? 'ok' : 'failed';
      checks.store = health.store_recovered ? 'ok' : 'failed';
    } catch {
      checks.enclave = 'failed';
    }
    const failed = Object.entries(checks).filter(([, state]) => state !== 'ok').map(([check]) => check);
    void reply.code(failed.length === 0 ? 200 : 503).header('cache-control', 'no-store')
      .send(failed.length === 0 ? { status: 'ready', checks } : { status: 'not_ready', failed, checks });
  });
}
