import { createHash } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bearerToken } from '../common/bearer.js';
import { ApiError } from '../common/errors.js';

export interface GuardOptions {
  /** Requests per window per API key (per client IP for requests without a key); 0 = off. */
  rateLimitMax: number;
  /** Requests per window per client IP whatever keys it sends; 0 = off. */
  rateLimitIpMax: number;
  rateLimitWindowMs: number;
  /** Requests the proxy relays at once, counted once their body is in; beyond, 503 at once. */
  maxInFlight: number;
  /** Requests one client IP may have open at once, those still sending included; beyond, 429. */
  maxRequestsPerIp?: number;
}

/** Paths no guard applies to: a load balancer's health probes and a metrics scraper must not be throttled. */
const unguarded = new Set(['/healthz', '/readyz', '/metrics']);

const rateLimited = (ttlSeconds: number) => {
  const seconds = Math.max(1, ttlSeconds);
  return new ApiError('rate_limit_exceeded', `rate limit exceeded: retry in ${seconds} s`, { headers: { 'retry-after': String(seconds) } });
};

const tooManyOpen = (max: number) => new ApiError('too_many_concurrent_requests',
  `this client already has ${max} requests open; finish or close some first`, { headers: { 'retry-after': '1' } });

const busy = () => new ApiError('proxy_overloaded', 'the service is at capacity; retry shortly', { headers: { 'retry-after': '1' } });

/**
 * What a caller is rate-limited as: its API key when it sends one (as a SHA-256, so the
 * limiter's memory never holds a key; the token, so "bearer  k" and "Bearer k" are one
 * client), else its IP address. The proxy cannot tell a real key from an invented one
 * (only the enclave can), so a second, per-IP limit stops a client from escaping the
 * first by inventing a new key per request.
 */
export function rateLimitKey(req: FastifyRequest): string {
  const auth = req.headers.authorization;
  if (typeof auth !== 'string' || auth === '') return `ip:${req.ip}`;
  return `key:${createHash('sha256').update(bearerToken(auth) ?? auth).digest('hex')}`;
}

/**
 * The proxy's flow control, in the order a request meets it: the per-IP and per-key rate
 * limits (429 with Retry-After) and the cap on requests one IP may have open (429), before
 * the body is read, so refusing costs next to nothing; then, once the body is in, the
 * in-flight cap (503 with Retry-After). Counting in-flight work only after the body arrived
 * keeps slow senders (slowloris: headers, then a byte at a time) from filling the places of
 * requests that are ready; the per-IP cap bounds how many such sockets one client holds, and
 * HTTP_RECEIVE_TIMEOUT_MS how long.
 */
export async function registerGuards(app: FastifyInstance, options: GuardOptions): Promise<void> {
  // global: false — the limiters below are applied by our own hook, not per route.
  await app.register(rateLimit, { global: false, cache: 10_000 });
  const limiter = (max: number, keyGenerator: (req: FastifyRequest) => string) =>
    max > 0 ? app.createRateLimit({ max, timeWindow: options.rateLimitWindowMs, keyGenerator }) : undefined;
  const perIp = limiter(options.rateLimitIpMax, (req) => `ip:${req.ip}`);
  const perKey = limiter(options.rateLimitMax, rateLimitKey);

  let inFlight = 0;
  const openPerIp = new Map<string, number>();

  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    if (unguarded.has(req.url.split('?')[0])) return;

    if (perIp) {
      const ip = await perIp(req);
      if (!ip.isAllowed && ip.isExceeded) throw rateLimited(ip.ttlInSeconds);
    }
    if (perKey) {
      const key = await perKey(req);
      if (!key.isAllowed) {
        void reply.header('x-ratelimit-limit', key.max).header('x-ratelimit-remaining', key.remaining).header('x-ratelimit-reset', key.ttlInSeconds);
        if (key.isExceeded) throw rateLimited(key.ttlInSeconds);
      }
    }

    const maxPerIp = options.maxRequestsPerIp;
    if (maxPerIp !== undefined) {
      const open = openPerIp.get(req.ip) ?? 0;
      if (open >= maxPerIp) throw tooManyOpen(maxPerIp);
      openPerIp.set(req.ip, open + 1);
      // 'close' fires once however the exchange ends (answered, failed, client gone).
      reply.raw.once('close', () => {
        const left = openPerIp.get(req.ip)! - 1;
        if (left === 0) openPerIp.delete(req.ip);
        else openPerIp.set(req.ip, left);
      });
    }
  });

  app.addHook('preHandler', async (req: FastifyRequest, reply: FastifyReply) => {
    if (unguarded.has(req.url.split('?')[0])) return;
    if (inFlight >= options.maxInFlight) throw busy();
    inFlight++;
    reply.raw.once('close', () => { inFlight--; });
  });
}
