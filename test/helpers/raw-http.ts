import { connect } from 'node:net';
import type { JsonResponse } from './http.js';

/**
 * Sends bytes as they are over a fresh TCP connection and parses the first HTTP response:
 * for requests no well-behaved client would send (malformed request lines, invalid header
 * bytes, lying Content-Length). `end` closes our side after writing (default: keep it
 * open, as a slow client would). Resolves with status 0 if the server closed without
 * answering.
 */
export function rawRequest(port: number, data: string | Buffer, options: { end?: boolean; timeoutMs?: number } = {}): Promise<JsonResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = () => {
      if (settled) return;
      const parsed = parseResponse(Buffer.concat(chunks));
      if (!parsed.complete && !socket.destroyed && !socket.readableEnded) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parsed.response);
    };
    const timer = setTimeout(() => {
      settled = true;
      socket.destroy();
      reject(new Error(`no complete response within ${options.timeoutMs ?? 30_000} ms`));
    }, options.timeoutMs ?? 30_000);
    socket.on('data', (d: Buffer) => { chunks.push(d); finish(); });
    socket.on('end', finish);
    socket.on('close', finish);
    socket.on('error', () => { /* a reset after the answer is fine; close follows */ });
    socket.write(data, () => { if (options.end) socket.end(); });
  });
}

function parseResponse(buf: Buffer): { complete: boolean; response: JsonResponse } {
  const empty = { status: 0, headers: new Headers(), body: undefined, text: '' };
  const headEnd = buf.indexOf('\r\n\r\n');
  if (headEnd < 0) return { complete: false, response: empty };
  const [statusLine, ...lines] = buf.subarray(0, headEnd).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
  const headers = new Headers();
  for (const line of lines) {
    const i = line.indexOf(':');
    if (i > 0) headers.append(line.slice(0, i).trim(), line.slice(i + 1).trim());
  }
  let rest = buf.subarray(headEnd + 4);
  let complete = true;
  if (headers.get('transfer-encoding')?.includes('chunked')) {
    const out: Buffer[] = [];
    complete = false;
    for (;;) {
      const lineEnd = rest.indexOf('\r\n');
      if (lineEnd < 0) break;
      const size = parseInt(rest.subarray(0, lineEnd).toString(), 16);
      if (size === 0) { complete = true; break; }
      if (rest.length < lineEnd + 2 + size + 2) break;
      out.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      rest = rest.subarray(lineEnd + 2 + size + 2);
    }
    rest = Buffer.concat(out);
  } else if (headers.has('content-length')) {
    const length = Number(headers.get('content-length'));
    complete = rest.length >= length;
    rest = rest.subarray(0, length);
  }
  const text = rest.toString('utf8');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { complete, response: { status, headers, body, text } };
}
