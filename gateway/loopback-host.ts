/**
 * Whether a request's Host names this machine's loopback (any port), as a client of
 * 127.0.0.1:<port> sends it. The gateway serves nothing else: a web page on another name
 * that resolves here (DNS rebinding) would otherwise use the API through it.
 */
export const isLoopbackHost = (host: string | undefined): boolean => /^(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$/.test(host ?? '');
