/** Longest Authorization header considered; a longer one is treated as no valid token. */
export const MAX_AUTHORIZATION_CHARS = 1024;

/**
 * The token from `Authorization: Bearer <token>` (scheme case-insensitive, RFC 6750 token
 * characters), or undefined when the header is absent, malformed or too long. The enclave
 * uses it to find the key; the proxy to rate-limit one key as one client however it is
 * spelled.
 */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (!authorization || authorization.length > MAX_AUTHORIZATION_CHARS) return undefined;
  return /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(authorization)?.[1];
}
