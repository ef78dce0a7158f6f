/**
 * One client request through the gateway: sealed to the enclave, its answer opened and
 * verified, then written back as the plain API would have answered. A request whose JSON
 * body asks to stream goes as a sealed stream; its events are written as they open, except
 * a chat stream's `data: [DONE]`, held until the inner signature has verified.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { once } from 'node:events';
import type { TeeClient, TeeResponse } from '../sdk/client.js';
import type { SealedStream } from '../sdk/sealed-stream.js';
import { failureOf, failureReply } from './failures.js';
import type { Trust } from './trust.js';
import { dropRestOfBody } from '../common/linger.js';
import { apiRoutes, matchRoute, type RouteSpec } from '../common/routes.js';

export interface ClientRequest {
  method: string;
  /** Path and query as the client sent them. */
  target: string;
  body: Uint8Array;
  authorization?: string;
  organization?: string;
  signal: AbortSignal;
}

const DONE = Buffer.from('data: [DONE]\n\n');
/** Never passed on: they describe the hop, not the answer. */
const HOP_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive']);

/** The enclave's headers, as the proxy would send them (it types every unary answer as JSON). */
const answerHeaders = (headers: Record<string, string>) => ({
  'content-type': 'application/json',
  ...Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_HEADERS.has(name.toLowerCase()))),
});

/** Whether the body asks for a streamed answer (`"stream": true`, as OpenAI's API spells it). */
export function asksToStream(body: Uint8Array): boolean {
  if (body.length === 0 || !Buffer.from(body).includes('"stream"')) return false;
  try {
    return (JSON.parse(Buffer.from(body).toString('utf8')) as { stream?: unknown })?.stream === true;
  } catch {
    return false;
  }
}

/** Whether the route always answers with a stream (an export): the request then needs the streaming call whatever its body. */
function alwaysStreams(request: ClientRequest): boolean {
  const match = matchRoute(request.method, request.target.split('?', 1)[0]);
  return match.kind === 'route' && (apiRoutes[match.name] as RouteSpec).streams === 'always';
}

const callOptions = (request: ClientRequest) => ({ authorization: request.authorization, organization: request.organization, signal: request.signal });
const bodyOf = (request: ClientRequest) => (request.body.length > 0 ? request.body : undefined);

/**
 * One unary request sealed to the enclave, its answer opened and verified (signature,
 * tenant, key, state head): the one way the gateway sends a call, for HTTP clients and for
 * MCP tools (gateway/mcp.ts) alike. Throws what failures.ts turns into a named check.
 */
export function sealedCall(trust: Trust, request: ClientRequest): Promise<TeeResponse> {
  return trust.run((tee: TeeClient) => tee.sealedCall(request.method, request.target, bodyOf(request), callOptions(request)));
}

export async function forward(trust: Trust, request: ClientRequest, res: ServerResponse): Promise<void> {
  try {
    if (!asksToStream(request.body) && !alwaysStreams(request)) {
      const answer = await sealedCall(trust, request);
      // Whole and verified: its length is known, so no chunked encoding.
      res.writeHead(answer.status, { ...answerHeaders(answer.headers), 'content-length': String(answer.raw.length) }).end(answer.raw);
      return;
    }
    const stream = await trust.run((tee: TeeClient) => tee.sealedStream(request.method, request.target, bodyOf(request), callOptions(request)));
    await relay(stream, res);
  } catch (error) {
    if (request.signal.aborted) return void res.destroy();
    const reply = failureReply(error);
    res.writeHead(reply.status, reply.headers).end(reply.body);
  }
}

/** Writes a sealed stream's answer; a failure after the head becomes a last SSE error event (OpenAI clients raise it). */
async function relay(stream: SealedStream, res: ServerResponse): Promise<void> {
  const events = (stream.headers['content-type'] ?? '').startsWith('text/event-stream');
  if (!events) {
    // A JSON answer (e.g. a refusal) is yielded whole, once verified: only then is anything sent.
    const parts: Uint8Array[] = [];
    for await (const chunk of stream) parts.push(chunk);
    const whole = Buffer.concat(parts);
    res.writeHead(stream.status, { ...answerHeaders(stream.headers), 'content-length': String(whole.length) }).end(whole);
    return;
  }
  res.writeHead(stream.status, answerHeaders(stream.headers));
  let held = false;
  try {
    for await (const chunk of stream) {
      // [DONE] waits until the whole stream has verified: alone, or at the end of a frame.
      let bytes = Buffer.from(chunk);
      if (bytes.length >= DONE.length && bytes.subarray(bytes.length - DONE.length).equals(DONE)) {
        held = true;
        bytes = bytes.subarray(0, bytes.length - DONE.length);
        if (bytes.length === 0) continue;
      }
      if (!res.write(bytes)) await once(res, 'drain');
    }
  } catch (error) {
    const failure = failureOf(error);
    if (!res.destroyed && failure) res.end(`data: ${JSON.stringify(failure.toBody())}\n\n`);
    else res.destroy();
    return;
  }
  res.end(held ? DONE : undefined);
}

/**
 * The request's parts the gateway seals: body (bounded), authorization and organization.
 * Past maxBytes, 'too-large', and the rest of the body is dropped while `res` answers.
 */
export async function readRequest(req: IncomingMessage, res: ServerResponse, maxBytes: number, signal: AbortSignal): Promise<ClientRequest | 'too-large'> {
  const chunks: Buffer[] = [];
  let size = 0;
  // Not destroyed on the early return: that would reset the connection under the 413.
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) break;
    chunks.push(chunk);
  }
  // After the loop, once the iterator has let go of the stream (with it listening, resume() would not flow).
  if (size > maxBytes) {
    dropRestOfBody(req, res);
    return 'too-large';
  }
  const header = (name: string) => {
    const value = req.headers[name];
    return typeof value === 'string' && value !== '' ? value : undefined;
  };
  return {
    method: req.method ?? 'GET',
    target: req.url ?? '/',
    body: Buffer.concat(chunks),
    authorization: header('authorization'),
    organization: header('organization_id') ?? header('openai-organization'),
    signal,
  };
}
