import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LoadClient } from '../../bench/load-client.js';

/** The benchmark's HTTP client (bench/load-client.ts) against real servers on loopback. */
describe('LoadClient', () => {
  const servers: Array<Server | TcpServer> = [];
  const clients: LoadClient[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) client.close();
    for (const server of servers.splice(0)) {
      if ('closeAllConnections' in server) server.closeAllConnections();
      await new Promise((done) => server.close(() => done(undefined)));
    }
  });

  const listen = async <S extends Server | TcpServer>(server: S): Promise<{ server: S; url: string }> => {
    servers.push(server);
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}` };
  };
  const client = (url: string, connections: number) => {
    const c = new LoadClient(url, connections);
    clients.push(c);
    return c;
  };
  /** An http server that answers with what it received, as JSON. */
  const echo = (onRequest?: (req: IncomingMessage, res: ServerResponse) => boolean) => createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (onRequest?.(req, res)) return;
      const body = Buffer.concat(chunks).toString('utf8');
      const answer = JSON.stringify({ method: req.method, url: req.url, type: req.headers['content-type'] ?? null, body });
      res.writeHead(req.url === '/missing' ? 404 : 200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
      res.end(answer);
    });
  });

  it('sends GETs and JSON POSTs on keep-alive connections and reads each answer whole', async () => {
    const { server, url } = await listen(echo());
    let connections = 0;
    server.on('connection', () => connections++);
    const c = client(url, 2);
    const body = JSON.stringify({ content: 'Grüße aus Zürich – 東京' });
    for (let i = 0; i < 20; i++) {
      const got = await c.request(i % 2 ? { method: 'POST', path: `/v1/memory?i=${i}`, body } : { method: 'GET', path: `/v1/memory?q=a%20b&i=${i}` });
      expect(got.status).toBe(200);
      expect(JSON.parse(got.body.toString('utf8'))).toEqual(i % 2
        ? { method: 'POST', url: `/v1/memory?i=${i}`, type: 'application/json', body }
        : { method: 'GET', url: `/v1/memory?q=a%20b&i=${i}`, type: null, body: '' });
    }
    expect((await c.request({ method: 'GET', path: '/missing' })).status).toBe(404);
    // One at a time, so the same connection serves every request.
    expect(connections).toBe(1);
  });

  it('never has more requests in flight than connections, and answers every one queued behind them', async () => {
    let open = 0;
    let most = 0;
    const { url } = await listen(echo((_req, res) => {
      most = Math.max(most, ++open);
      setTimeout(() => {
        open--;
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': 2 }).end('{}');
      }, 5);
      return true;
    }));
    const c = client(url, 3);
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => c.request({ method: 'GET', path: `/${i}` })));
    expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200));
    expect(most).toBe(3);
  });

  it('reads a response that arrives in pieces', async () => {
    const body = Buffer.from(JSON.stringify({ data: 'x'.repeat(100_000) }));
    const { url } = await listen(createTcpServer((socket: Socket) => {
      socket.once('data', async () => {
        const response = Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`), body]);
        // Split inside the header terminator, inside the body and before its last byte.
        const head = response.length - body.length;
        for (const [from, to] of [[0, 40], [40, head - 2], [head - 2, 70_000], [70_000, response.length - 1], [response.length - 1, response.length]]) {
          socket.write(response.subarray(from, to));
          await new Promise((r) => setTimeout(r, 10));
        }
      });
    }));
    const got = await client(url, 1).request({ method: 'GET', path: '/' });
    expect(got.status).toBe(200);
    expect(got.body.equals(body)).toBe(true);
  });

  it('opens a new connection when the server closed an idle one', async () => {
    const { server, url } = await listen(echo());
    let connections = 0;
    server.on('connection', () => connections++);
    const c = client(url, 1);
    expect((await c.request({ method: 'GET', path: '/a' })).status).toBe(200);
    server.closeIdleConnections();
    await new Promise((r) => setTimeout(r, 100));
    expect((await c.request({ method: 'GET', path: '/b' })).status).toBe(200);
    expect(connections).toBe(2);
  });

  it('sends a request again, once, when a connection that had answered closes as it goes out', async () => {
    // Each connection answers its first request and drops the next unanswered: what a
    // request meets when the server's idle timeout closes the connection as it is sent.
    let connections = 0;
    const { url } = await listen(createTcpServer((socket: Socket) => {
      connections++;
      let requests = 0;
      socket.on('data', () => {
        if (++requests === 1) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}');
        else socket.destroy();
      });
    }));
    const c = client(url, 1);
    for (let i = 0; i < 3; i++) expect((await c.request({ method: 'GET', path: `/${i}` })).status).toBe(200);
    expect(connections).toBe(3);

    // A connection that never answered is not retried: that server is not answering at all.
    const { url: never } = await listen(createTcpServer((socket: Socket) => socket.on('data', () => socket.destroy())));
    await expect(client(never, 1).request({ method: 'GET', path: '/' })).rejects.toThrow(/before an answer/);
  });

  it('fails a request whose response it cannot read, or that the server cuts off', async () => {
    const { url: chunked } = await listen(echo((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }); // no length: Node sends it chunked
      res.write('{"a":');
      res.end('1}');
      return true;
    }));
    await expect(client(chunked, 1).request({ method: 'GET', path: '/' })).rejects.toThrow(/Content-Length/);

    const { url: cut } = await listen(createTcpServer((socket: Socket) => {
      socket.once('data', () => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"partial"'));
    }));
    await expect(client(cut, 1).request({ method: 'GET', path: '/' })).rejects.toThrow(/middle of a response/);
  });

  it('refuses a URL it cannot speak to', () => {
    expect(() => new LoadClient('https://127.0.0.1:1', 1)).toThrow(/http only/);
  });
});
