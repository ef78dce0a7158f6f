import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../common/config.js';
import { enclaveSettings } from '../../enclave/config.js';
import { SseParser } from '../../enclave/chat/sse-parser.js';
import {
  isConnectFailure, transportError, upstreamMessage, upstreamStatusError, upstreamStreamError,
} from '../../enclave/chat/upstream-errors.js';

const KEY = 'sk-live-abcdef0123456789';

describe('SSE parser', () => {
  const parseAll = (pieces: string[]) => {
    const parser = new SseParser();
    const events = pieces.flatMap((p) => parser.push(Buffer.from(p)));
    return [...events, ...parser.end()];
  };

  it('reads OpenAI-style events, skipping comments and blank lines', () => {
    const text = ': keep-alive\n\ndata: {"a":1}\n\ndata: {"a":2}\n\ndata: [DONE]\n\n';
    expect(parseAll([text]).map((e) => e.data)).toEqual(['{"a":1}', '{"a":2}', '[DONE]']);
  });

  it('joins multi-line data and keeps the event name', () => {
    expect(parseAll(['event: error\ndata: line1\ndata: line2\n\n'])).toEqual([{ event: 'error', data: 'line1\nline2' }]);
  });

  it('accepts \\n, \\r\\n and \\r line ends', () => {
    expect(parseAll(['data: a\r\n\r\ndata: b\r\rdata: c\n\n']).map((e) => e.data)).toEqual(['a', 'b', 'c']);
  });

  it('gives the same events however the bytes are split (including inside \\r\\n and UTF-8 characters)', () => {
    const text = 'data: {"t":"héllo → wörld"}\r\n\r\ndata: second\n\n: c\ndata: [DONE]\r\n\r\n';
    const whole = parseAll([text]);
    const bytes = Buffer.from(text);
    fc.assert(fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 12 }), (cuts) => {
      const points = [0, ...cuts.sort((a, b) => a - b), bytes.length];
      const parser = new SseParser();
      const events = [];
      for (let i = 0; i + 1 < points.length; i++) events.push(...parser.push(bytes.subarray(points[i], points[i + 1])));
      events.push(...parser.end());
      expect(events).toEqual(whole);
    }));
  });

  it('does not emit an event that was never terminated', () => {
    expect(parseAll(['data: {"a":1}\n\ndata: {"partial"'])).toEqual([{ data: '{"a":1}' }]);
  });

  it('refuses to hold an unbounded line', () => {
    const parser = new SseParser(1024);
    expect(() => parser.push(Buffer.from(`data: ${'x'.repeat(2000)}`))).toThrow(/too large/);
  });
});

describe('upstream error mapping', () => {
  it('5xx → 502 with the model\'s message, the key scrubbed', () => {
    const err = upstreamStatusError(500, JSON.stringify({ error: { message: `boom, key ${KEY} rejected` } }), KEY);
    expect(err.status).toBe(502);
    expect(err.toBody().error).toMatchObject({ type: 'upstream_error', code: 'model_error' });
    expect(err.message).toContain('boom');
    expect(err.message).not.toContain(KEY);
  });

  it('401/403 → 502 without the model\'s message (it can quote part of the key)', () => {
    for (const status of [401, 403]) {
      const err = upstreamStatusError(status, JSON.stringify({ error: { message: 'Incorrect API key provided: sk-li*****6789' } }), KEY);
      expect(err.status).toBe(502);
      expect(err.code).toBe('model_auth_failed');
      expect(err.message).not.toContain('sk-');
    }
  });

  it('the caller\'s errors keep their status: 400, 404, 413, 422, 429', () => {
    for (const status of [400, 404, 413, 422, 429]) {
      const err = upstreamStatusError(status, '{"error":{"message":"nope"}}', KEY);
      expect(err.status).toBe(status);
      expect(err.message).toContain('nope');
    }
    expect(upstreamStatusError(429, '', KEY).type).toBe('rate_limit_error');
  });

  it('other statuses are the model\'s failure: 502', () => {
    expect(upstreamStatusError(418, '', KEY).status).toBe(502);
    expect(upstreamStatusError(503, '', KEY).status).toBe(502);
  });

  it('messages are made safe: plain text kept, HTML dropped, control characters removed, length capped', () => {
    expect(upstreamMessage('upstream overloaded', undefined)).toBe('upstream overloaded');
    expect(upstreamMessage('<html><body>502 Bad Gateway</body></html>', undefined)).toBeUndefined();
    expect(upstreamMessage('{"error":{"message":"a\\u001b[31mb\\nc"}}', undefined)).toBe('a [31mb c');
    expect(upstreamMessage(JSON.stringify({ error: { message: 'x'.repeat(5000) } }), undefined)!.length).toBeLessThanOrEqual(501);
    expect(upstreamMessage('{"error":"plain string"}', undefined)).toBe('plain string');
    // A key split by a control character is not passed on either.
    const key = 'sk-live-0123456789abcdef';
    const split = upstreamMessage(JSON.stringify({ error: { message: `bad key sk-live-0123\u0000456789abcdef` } }), key)!;
    expect(split).not.toContain('0123 456789abcdef');
    expect(split.replace(/\s/g, '')).not.toContain(key);
    expect(upstreamMessage(JSON.stringify({ error: { message: `bad key ${key}` } }), key)).toBe('bad key [redacted]');
    expect(upstreamMessage('{"error":{"code":5}}', undefined)).toBeUndefined();
  });

  it('an error inside a stream → 502', () => {
    const err = upstreamStreamError({ error: { message: `overloaded ${KEY}` } }, KEY);
    expect(err.status).toBe(502);
    expect(err.message).toContain('overloaded [redacted]');
  });

  it('transport errors: refused/unresolvable/connect timeout → 503, response timeouts → 504, the rest → 502', () => {
    const coded = (code: string) => Object.assign(new Error(code), { code });
    for (const code of ['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'UND_ERR_CONNECT_TIMEOUT']) {
      expect(transportError(coded(code)).status).toBe(503);
      expect(isConnectFailure(coded(code))).toBe(true);
    }
    expect(transportError(coded('UND_ERR_HEADERS_TIMEOUT')).status).toBe(504);
    expect(transportError(coded('UND_ERR_BODY_TIMEOUT')).status).toBe(504);
    expect(transportError(coded('UND_ERR_SOCKET')).status).toBe(502);
    expect(transportError(coded('ECONNRESET')).status).toBe(502);
    expect(isConnectFailure(coded('ECONNRESET'))).toBe(false); // the request may have been sent: not retried
    // Node reports a refused dual-stack connect as an AggregateError, and errors may be wrapped.
    expect(transportError(new AggregateError([coded('ECONNREFUSED'), coded('ECONNREFUSED')])).status).toBe(503);
    expect(transportError(new Error('fetch failed', { cause: coded('ENOTFOUND') })).status).toBe(503);
  });
});

describe('chat settings', () => {
  it('MODEL_BASE_URL must be an http(s) URL, checked at start-up', () => {
    expect(() => loadConfig(enclaveSettings, { MODEL_BASE_URL: 'ftp://models.example' })).toThrow(/MODEL_BASE_URL: expected an http\(s\) URL/);
    expect(() => loadConfig(enclaveSettings, { MODEL_BASE_URL: 'not a url' })).toThrow(/MODEL_BASE_URL/);
    expect(loadConfig(enclaveSettings, { MODEL_BASE_URL: 'http://127.0.0.1:11434/v1' })).toMatchObject({
      modelBaseUrl: 'http://127.0.0.1:11434/v1', modelTimeoutMs: 120_000, modelConnectTimeoutMs: 5_000, modelConnectRetries: 2, chatMemoryTopK: 5, chatToolRounds: 4,
    });
  });
});
