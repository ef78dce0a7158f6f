/**
 * How the sdk sends its requests: undici's request() unless the caller gives a fetch
 * function (ConnectOptions.fetch). The fetch API's web streams and objects cost the client
 * several times the CPU of request() a call (about 0.4 to 1.1 ms more here, both ends of a
 * loopback call counted: docs/performance-log.md, 2026-11-27 afternoon), and the client
 * checks every answer besides, so the default is the lighter one.
 */
import { request } from 'undici';

export interface TransportRequest {
  method: string;
  headers: Record<string, string>;
  body?: Uint8Array;
  signal?: AbortSignal;
}

export interface TransportAnswer {
  status: number;
  /** Lower-case names; repeated headers joined with ", " (as fetch's Headers does). */
  headers: Record<string, string>;
  /** The body as it arrives; read it to its end or abort the request's signal. */
  body: AsyncIterable<Uint8Array>;
  /** The whole body (read once, instead of `body`). */
  bytes(): Promise<Uint8Array>;
}

export type Transport = (url: URL, init: TransportRequest) => Promise<TransportAnswer>;

/** A transport over a fetch function (e.g. one a test or an application wraps). */
export function fetchTransport(fetchImpl: typeof fetch): Transport {
  return async (url, init) => {
    const response = await fetchImpl(url, { method: init.method, headers: init.headers, body: init.body, signal: init.signal });
    return {
      status: response.status,
      headers: joined(response.headers.entries()),
      body: (response.body ?? emptyBody()) as unknown as AsyncIterable<Uint8Array>,
      bytes: async () => new Uint8Array(await response.arrayBuffer()),
    };
  };
}

/**
 * undici's request(). A request that fails before an answer is thrown the way fetch throws
 * it (a TypeError "fetch failed" whose cause is the network error, or the signal's reason
 * when aborted), so callers and ConnectOptions.fetch users see one shape.
 */
export const undiciTransport: Transport = async (url, init) => {
  let answer;
  try {
    answer = await request(url, { method: init.method as 'GET', headers: init.headers, body: init.body, signal: init.signal });
  } catch (error) {
    if (init.signal?.aborted) throw init.signal.reason ?? error;
    throw new TypeError('fetch failed', { cause: error });
  }
  const { body } = answer;
  return { status: answer.statusCode, headers: joined(Object.entries(answer.headers)), body, bytes: async () => new Uint8Array(await body.arrayBuffer()) };
};

/** Header pairs as one record: names lower-case, a name's values joined with ", ". */
function joined(pairs: Iterable<[string, string | string[] | undefined]>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of pairs) {
    if (value === undefined) continue;
    const key = name.toLowerCase();
    const text = Array.isArray(value) ? value.join(', ') : value;
    headers[key] = key in headers ? `${headers[key]}, ${text}` : text;
  }
  return headers;
}

async function* emptyBody(): AsyncGenerator<Uint8Array> {
  // No body (e.g. a 204): nothing to yield.
}
