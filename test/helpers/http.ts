import { Agent, request as httpRequest } from 'node:http';
import { expect } from 'vitest';

export interface JsonResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

/** A fetch that returns the parsed JSON body alongside the status and headers. */
export async function request(baseUrl: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<JsonResponse> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' || body instanceof Uint8Array ? (body as string) : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
  }
  const res = await fetch(baseUrl + path, init);
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

/** Asserts the OpenAI error shape and returns the error object. */
export function expectError(res: JsonResponse, status: number, code?: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ error: { message: expect.any(String), type: expect.any(String) } });
  expect(Object.keys(res.body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(res.text).not.toMatch(/\bat \S+ \(|node_modules|\.ts:\d+/); // no stack traces
  if (code) expect(res.body.error.code).toBe(code);
  return res.body.error as { message: string; type: string; param: string | null; code: string | null };
}

/**
 * Requests over one kept-alive connection: each answer's status and whether it came on a
 * socket an earlier request used (so a test sees whether the server kept the connection).
 */
export function oneConnection(baseUrl: string, headers: Record<string, string> = {}) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const send = (method: string, path: string, body?: Buffer) => new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
    const req = httpRequest(`${baseUrl}${path}`, { method, agent, headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }));
    });
    req.on('error', reject);
    req.end(body);
  });
  return { send, close: () => agent.destroy() };
}
