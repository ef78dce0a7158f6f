import type { FastifyReply } from 'fastify';

/**
 * Headers for the pages the proxy serves to browsers (the console and /docs). The CSP
 * allows scripts, styles and requests from this origin only: no inline script, no eval,
 * no CDN, so a value the page displays (a memory, a model's answer) cannot run as code,
 * and nothing the page holds (an API key) can be sent elsewhere.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function pageHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CONTENT_SECURITY_POLICY)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY')
    .header('cache-control', 'no-cache');
}
