import { setTimeout as sleep } from 'node:timers/promises';
import { type Dispatcher, type Pool } from 'undici';
import type { ChatCompletionInput } from '../../common/chat-schema.js';
import { SseParser } from './sse-parser.js';
import { pinnedPool, pinRefused, PinMismatchError, type PeerNote } from './upstream-tls.js';
import type { Completion, CompletionChunk } from './types.js';
import {
  isConnectFailure, modelBadAnswer, transportError, upstreamStatusError, upstreamStreamError,
} from './upstream-errors.js';

export interface UpstreamConfig {
  /** e.g. https://api.openai.com/v1 — `/chat/completions` is appended. */
  baseUrl: string;
  apiKey?: string;
  connectTimeoutMs: number;
  /** Longest wait for the answer's headers, and for each next piece of its body. */
  responseTimeoutMs: number;
  /** Further attempts after a failure to connect (nothing was sent, so it is safe). */
  connectRetries: number;
  /** Keep-alive connections kept open to the model server. */
  connections?: number;
  /** base64 SHA-256 SPKI pins (MODEL_TLS_PINS): connections presenting another key are refused. */
  tlsPins?: readonly string[];
}

/** Told, for each request sent upstream, the certificate key (base64 SPKI hash) of the connection that carried it. */
export type PeerSeen = (spkiSha256: string | undefined) => void;

/** Largest non-streamed answer read from the model (it must fit a gRPC message back). */
const MAX_ANSWER_BYTES = 6 * 1024 * 1024;
/** Largest error body read to find the model's message. */
const MAX_ERROR_BYTES = 64 * 1024;

/**
 * The upstream OpenAI-compatible chat model, called from inside the enclave with undici:
 * one pool of keep-alive connections, connect and response timeouts, and retries only
 * for failures to connect. The API key is only ever put in the Authorization header.
 * Every failure comes out as an ApiError (502/503/504, see upstream-errors.ts).
 */
export class UpstreamModel {
  private readonly pool: Pool;
  private readonly path: string;
  /** What answers name as their upstream (protocol/upstream.ts). */
  readonly origin: string;

  constructor(private readonly config: UpstreamConfig) {
    const url = new URL(config.baseUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`MODEL_BASE_URL must be http(s), got ${url.protocol}`);
    this.path = `${url.pathname.replace(/\/+$/, '')}/chat/completions${url.search}`;
    if ((config.tlsPins?.length ?? 0) > 0 && url.protocol !== 'https:') throw new Error('MODEL_TLS_PINS needs an https MODEL_BASE_URL');
    this.origin = url.origin;
    this.pool = pinnedPool(url.origin, {
      pins: config.tlsPins ?? [],
      connections: config.connections ?? 32,
      connectTimeout: config.connectTimeoutMs,
      headersTimeout: config.responseTimeoutMs,
      bodyTimeout: config.responseTimeoutMs,
      keepAliveTimeout: 30_000,
    });
  }

  /** A non-streamed completion. */
  async complete(request: ChatCompletionInput, signal: AbortSignal, seen?: PeerSeen): Promise<Completion> {
    const response = await this.send(request, signal, seen);
    const text = await readText(response.body, MAX_ANSWER_BYTES).catch((err: unknown) => {
      throw transportError(err);
    });
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch {
      throw modelBadAnswer('the chat model answered with malformed JSON');
    }
    if (!isCompletion(answer)) throw modelBadAnswer('the chat model\'s answer is not a chat completion (no choices with a message)');
    return answer;
  }

  /**
   * A streamed completion: resolves once the model has accepted the request (so a refusal
   * is still a plain error reply), then yields its chunks as they arrive. A stream that
   * breaks, stalls past the response timeout, or ends without `[DONE]` throws.
   */
  async openStream(request: ChatCompletionInput, signal: AbortSignal, seen?: PeerSeen): Promise<AsyncGenerator<CompletionChunk>> {
    const response = await this.send(request, signal, seen);
    const type = String(response.headers['content-type'] ?? '');
    if (!type.includes('text/event-stream')) {
      response.body.destroy();
      throw modelBadAnswer(`the chat model did not stream (content-type ${JSON.stringify(type.slice(0, 100))})`);
    }
    return this.chunks(response.body);
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  private async *chunks(body: Dispatcher.ResponseData['body']): AsyncGenerator<CompletionChunk> {
    const parser = new SseParser();
    try {
      for await (const bytes of body) {
        for (const event of parser.push(bytes as Buffer)) {
          if (event.data === '[DONE]') return;
          yield this.chunk(event.data);
        }
      }
      for (const event of parser.end()) {
        if (event.data === '[DONE]') return;
        yield this.chunk(event.data);
      }
    } catch (err) {
      throw transportError(err);
    } finally {
      // Returning early (done, or the caller stopped) must not leave the socket half-read.
      if (!body.destroyed) body.destroy();
    }
    throw modelBadAnswer('the chat model\'s stream ended before [DONE]', 'model_stream_broken');
  }

  private chunk(data: string): CompletionChunk {
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      throw modelBadAnswer('the chat model streamed malformed JSON', 'model_stream_broken');
    }
    if (typeof value !== 'object' || value === null) throw modelBadAnswer('the chat model streamed something that is not a chunk', 'model_stream_broken');
    const error = (value as { error?: unknown }).error;
    if (error !== undefined && error !== null) throw upstreamStreamError(value, this.config.apiKey);
    const choices = (value as { choices?: unknown }).choices;
    if (choices !== undefined && !Array.isArray(choices)) throw modelBadAnswer('the chat model streamed a chunk without a choices list', 'model_stream_broken');
    return { ...(value as CompletionChunk), choices: (choices ?? []) as CompletionChunk['choices'] };
  }

  private async send(request: ChatCompletionInput, signal: AbortSignal, seen?: PeerSeen): Promise<Dispatcher.ResponseData> {
    const body = JSON.stringify(request);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: request.stream ? 'text/event-stream' : 'application/json',
      'user-agent': 'private-agent-service',
    };
    if (this.config.apiKey) headers.authorization = `Bearer ${this.config.apiKey}`;

    for (let attempt = 0; ; attempt++) {
      let response: Dispatcher.ResponseData;
      const note: PeerNote = {};
      try {
        response = await this.pool.request(Object.assign({ method: 'POST' as const, path: this.path, headers, body, signal }, { peerNote: note }));
      } catch (err) {
        if (err instanceof PinMismatchError) throw pinRefused(err);
        if (!signal.aborted && isConnectFailure(err) && attempt < this.config.connectRetries) {
          await sleep(100 * 2 ** attempt, undefined, { signal }).catch(() => undefined);
          continue;
        }
        throw signal.aborted ? err : transportError(err);
      }
      try {
        seen?.(note.connection?.spkiSha256);
      } catch (err) {
        response.body.destroy();
        throw err;
      }
      if (response.statusCode >= 200 && response.statusCode < 300) return response;
      const text = await readText(response.body, MAX_ERROR_BYTES).catch(() => '');
      throw upstreamStatusError(response.statusCode, text, this.config.apiKey);
    }
  }
}

async function readText(body: Dispatcher.ResponseData['body'], maxBytes: number): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of body) {
    size += (part as Buffer).length;
    if (size > maxBytes) {
      body.destroy();
      throw modelBadAnswer(`the chat model's answer is larger than ${maxBytes} bytes`);
    }
    parts.push(part as Buffer);
  }
  return Buffer.concat(parts).toString('utf8');
}

function isCompletion(value: unknown): value is Completion {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const choices = (value as { choices?: unknown }).choices;
  return Array.isArray(choices) && choices.length > 0
    && choices.every((c) => typeof c === 'object' && c !== null && typeof (c as { message?: unknown }).message === 'object' && (c as { message?: unknown }).message !== null);
}
