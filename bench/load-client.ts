/**
 * The benchmark's HTTP client: keep-alive HTTP/1.1 connections, one request at a time on
 * each, and nothing else. The load generator runs on the same two cores as the service, so
 * what it spends a request is taken from the service: less than half of undici's
 * (docs/performance-log.md#the-load-generator-and-a-longer-warm-up-2026-11-26-morning).
 *
 * It speaks only what the proxy answers with: a status line, headers and a Content-Length
 * body (a response without one, e.g. chunked, fails the request). A connection the server
 * closes is opened again for the next request.
 */
import { connect, type Socket } from 'node:net';

export interface LoadRequest {
  method: 'GET' | 'POST';
  /** Path and query string. */
  path: string;
  /** A JSON body (sent with its content type and length). */
  body?: string;
}

export interface LoadResponse {
  status: number;
  body: Buffer;
}

const HEAD_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)[ \t]*(?=\r\n|$)/i;

/** The server closed the connection before any byte of the response. */
class IdleClose extends Error {
  constructor(cause?: Error) {
    super(`the connection ended before an answer${cause ? `: ${cause.message}` : ''}`, { cause });
  }
}

/** One keep-alive connection: a request is written whole, and its response read whole, before the next. */
class Connection {
  private socket?: Socket;
  private received: Buffer[] = [];
  private receivedBytes = 0;
  /** Responses read on the current socket. */
  private answered = 0;
  /** The request in flight. */
  private waiting?: { resolve: (response: LoadResponse) => void; reject: (error: Error) => void };

  constructor(private readonly port: number, private readonly host: string) {}

  /**
   * Sends a request and reads its response. A server may close a keep-alive connection it
   * finds idle just as a request goes out on it; a request that met such a close (on a
   * socket that had answered before, with nothing of its response read) is sent once more
   * on a new connection, as browsers do.
   */
  async request(bytes: string): Promise<LoadResponse> {
    const reused = this.socket !== undefined && !this.socket.destroyed && this.answered > 0;
    try {
      return await this.send(bytes);
    } catch (error) {
      if (!reused || !(error instanceof IdleClose)) throw error;
      return this.send(bytes);
    }
  }

  private send(bytes: string): Promise<LoadResponse> {
    if (this.waiting) return Promise.reject(new Error('a request is already in flight on this connection'));
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.open().write(bytes);
    });
  }

  close(): void {
    this.socket?.destroy();
  }

  private open(): Socket {
    if (this.socket && !this.socket.destroyed) return this.socket;
    const socket = connect(this.port, this.host);
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    // The server may close an idle keep-alive connection: the next request opens a new one.
    // 'close' follows 'error': the request fails there, with the error as its cause.
    let cause: Error | undefined;
    socket.on('error', (error) => { cause = error; });
    socket.on('close', () => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      this.fail(this.receivedBytes === 0 ? new IdleClose(cause) : new Error('the connection ended in the middle of a response', { cause }));
    });
    this.socket = socket;
    this.received = [];
    this.receivedBytes = 0;
    this.answered = 0;
    return socket;
  }

  private read(chunk: Buffer): void {
    this.received.push(chunk);
    this.receivedBytes += chunk.length;
    const data = this.received.length === 1 ? chunk : Buffer.concat(this.received, this.receivedBytes);
    this.received = [data];
    const headEnd = data.indexOf(HEAD_END);
    if (headEnd < 0) return;
    const head = data.toString('latin1', 0, headEnd);
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(head);
    const length = CONTENT_LENGTH.exec(head);
    if (!status || !length) {
      this.fail(new Error(`not a response this client reads (it needs a status line and Content-Length): ${JSON.stringify(head.slice(0, 200))}`));
      this.close();
      return;
    }
    const end = headEnd + HEAD_END.length + Number(length[1]);
    if (data.length < end) return;
    if (data.length > end) {
      this.fail(new Error('the server sent more than one response to one request'));
      this.close();
      return;
    }
    this.received = [];
    this.receivedBytes = 0;
    this.answered++;
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.resolve({ status: Number(status[1]), body: data.subarray(headEnd + HEAD_END.length) });
  }

  private fail(error: Error): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    this.received = [];
    this.receivedBytes = 0;
    waiting?.reject(error);
  }
}

/** `connections` keep-alive connections to `baseUrl` (http only); a request takes the first idle one, or waits for one. */
export class LoadClient {
  private readonly idle: Connection[];
  private readonly queue: Array<(connection: Connection) => void> = [];
  private readonly all: Connection[];
  private readonly host: string;

  constructor(baseUrl: string, connections: number) {
    const url = new URL(baseUrl);
    if (url.protocol !== 'http:') throw new Error(`LoadClient speaks http only, not ${url.protocol}`);
    this.host = url.host;
    this.all = Array.from({ length: connections }, () => new Connection(Number(url.port || 80), url.hostname));
    this.idle = [...this.all];
  }

  async request({ method, path, body }: LoadRequest): Promise<LoadResponse> {
    const bytes = body === undefined
      ? `${method} ${path} HTTP/1.1\r\nhost: ${this.host}\r\n\r\n`
      : `${method} ${path} HTTP/1.1\r\nhost: ${this.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const connection = this.idle.pop() ?? (await new Promise<Connection>((resolve) => this.queue.push(resolve)));
    try {
      return await connection.request(bytes);
    } finally {
      const next = this.queue.shift();
      if (next) next(connection);
      else this.idle.push(connection);
    }
  }

  close(): void {
    for (const connection of this.all) connection.close();
  }
}
