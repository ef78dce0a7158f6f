import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP relay on loopback that records every byte in both directions: what a host in
 * the middle (the proxy's machine, the network) gets to see.
 */
export interface RecordingRelay {
  address: string;
  port: number;
  /** Bytes from the connecting side towards the target. */
  upstream(): Buffer;
  /** Bytes from the target back to the connecting side. */
  downstream(): Buffer;
  close(): Promise<void>;
}

export async function startRecordingRelay(target: string): Promise<RecordingRelay> {
  const [host, port] = splitHostPort(target);
  const up: Buffer[] = [];
  const down: Buffer[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(port, host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => { client.destroy(); upstream.destroy(); });
    }
    client.on('data', (d: Buffer) => { up.push(Buffer.from(d)); upstream.write(d); });
    upstream.on('data', (d: Buffer) => { down.push(Buffer.from(d)); client.write(d); });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const bound = (server.address() as { port: number }).port;
  return {
    address: `127.0.0.1:${bound}`,
    port: bound,
    upstream: () => Buffer.concat(up),
    downstream: () => Buffer.concat(down),
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

/** A TCP line on loopback to `target` whose connections a test cuts: what the network or the host does to a gRPC channel. */
export interface CuttableLine {
  address: string;
  port: number;
  /** Destroys every connection through the line; it keeps accepting new ones. */
  cut(): void;
  /** Destroys every connection and stops listening: nothing answers at the address until a line listens there again. */
  close(): Promise<void>;
}

/** Starts a CuttableLine, on `port` when given (e.g. one a closed line had). */
export async function startCuttableLine(target: string, port = 0): Promise<CuttableLine> {
  const [host, targetPort] = splitHostPort(target);
  const sockets = new Set<Socket>();
  const server = createServer((near) => {
    const far = connect(targetPort, host);
    for (const s of [near, far]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => { near.destroy(); far.destroy(); });
    }
    near.pipe(far).pipe(near);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const bound = (server.address() as { port: number }).port;
  const cut = () => { for (const s of sockets) s.destroy(); };
  return {
    address: `127.0.0.1:${bound}`,
    port: bound,
    cut,
    close: () => new Promise<void>((resolve) => {
      cut();
      server.close(() => resolve());
    }),
  };
}

function splitHostPort(address: string): [string, number] {
  const at = address.lastIndexOf(':');
  return [address.slice(0, at), Number(address.slice(at + 1))];
}

export interface Exchange {
  method: string;
  url: string;
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * An HTTP relay on loopback in front of the proxy, playing a malicious host: `tamper`
 * may rewrite each answer (status, headers, body) before the client gets it.
 */
export interface TamperingRelay {
  baseUrl: string;
  /** May rewrite each request before it is forwarded. */
  tamperRequest: (request: { method: string; url: string; body: Buffer }) => { method: string; url: string; body: Buffer };
  /** May rewrite each request's headers (e.g. swap the Authorization header for another caller's). */
  tamperHeaders: (headers: Record<string, string>) => Record<string, string>;
  tamper: (exchange: Exchange) => Exchange;
  close(): Promise<void>;
}

/** The request headers a relay passes on: all but those of the hop itself. */
function forwardedHeaders(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === 'string' && !['host', 'connection', 'content-length', 'keep-alive'].includes(name)) headers[name] = value;
  }
  return headers;
}

/** The answer's headers a relay passes back: all but those it sets itself. */
const answerHeaders = (answer: Response) =>
  Object.fromEntries([...answer.headers].filter(([name]) => !['content-length', 'transfer-encoding', 'connection', 'keep-alive'].includes(name)));

export async function startTamperingRelay(targetBaseUrl: string): Promise<TamperingRelay> {
  const relay: TamperingRelay = { baseUrl: '', tamperRequest: (request) => request, tamperHeaders: (headers) => headers, tamper: (exchange) => exchange, close: async () => {} };
  const server: HttpServer = createHttpServer(async (req, res) => {
    try {
      const { method, url, body } = relay.tamperRequest({ method: req.method!, url: req.url!, body: await readAll(req) });
      const answer = await fetch(targetBaseUrl + url, { method, headers: relay.tamperHeaders(forwardedHeaders(req)), body: body.length > 0 ? body : undefined });
      const exchange = relay.tamper({
        method,
        url,
        status: answer.status,
        headers: answerHeaders(answer),
        body: Buffer.from(await answer.arrayBuffer()),
      });
      res.writeHead(exchange.status, { ...exchange.headers, 'content-length': String(exchange.body.length) });
      res.end(exchange.body);
    } catch (error) {
      res.writeHead(599).end(String(error));
    }
  });
  return listenRelay(server, relay);
}

function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * An HTTP relay on loopback in front of the proxy that edits event streams: it reads each
 * `text/event-stream` answer whole, hands its events to `edit` (which may cut, drop, swap or
 * repeat them), and sends what `edit` returns as a well-formed answer, so the client sees a
 * clean end, not a broken connection. Other answers pass unchanged.
 */
export interface EventEditingRelay {
  baseUrl: string;
  edit: (events: string[]) => string[];
  close(): Promise<void>;
}

export async function startEventEditingRelay(targetBaseUrl: string): Promise<EventEditingRelay> {
  const relay: EventEditingRelay = { baseUrl: '', edit: (events) => events, close: async () => {} };
  const server: HttpServer = createHttpServer(async (req, res) => {
    try {
      const body = await readAll(req);
      const answer = await fetch(targetBaseUrl + req.url!, { method: req.method, headers: forwardedHeaders(req), body: body.length > 0 ? body : undefined });
      let out = Buffer.from(await answer.arrayBuffer());
      if ((answer.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
        const events = out.toString('latin1').split('\n\n').filter((e) => e !== '').map((e) => `${e}\n\n`);
        out = Buffer.from(relay.edit(events).join(''), 'latin1');
      }
      res.writeHead(answer.status, { ...answerHeaders(answer), 'content-length': String(out.length) });
      res.end(out);
    } catch (error) {
      res.writeHead(599).end(String(error));
    }
  });
  return listenRelay(server, relay);
}

/** Listens on a free loopback port, and fills in the relay's baseUrl and close(). */
async function listenRelay<R extends { baseUrl: string; close(): Promise<void> }>(server: HttpServer, relay: R): Promise<R> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  relay.baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  relay.close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return relay;
}
