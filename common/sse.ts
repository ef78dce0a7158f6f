/**
 * Server-Sent Events framing as OpenAI streams it: one `data:` line of JSON per event,
 * a blank line after each, and `data: [DONE]` at the end. The enclave frames the chunks
 * it produces; the proxy frames only the error it reports when the enclave goes away
 * mid-stream. JSON.stringify never emits a raw newline, so one line always suffices.
 */
export const sseEvent = (value: unknown): Buffer => Buffer.from(`data: ${JSON.stringify(value)}\n\n`);

export const sseDone = (): Buffer => Buffer.from('data: [DONE]\n\n');

/**
 * A comment line (`: <name> <JSON>`): every SSE client skips it, so clients built for OpenAI's
 * stream read on unharmed, and one that wants it can read it (a streamed chat's memory_extraction).
 */
export const sseComment = (name: string, value: unknown): Buffer => Buffer.from(`: ${name} ${JSON.stringify(value)}\n\n`);

export const sseHeaders = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  // Tells reverse proxies in front of the service not to buffer the stream.
  'x-accel-buffering': 'no',
} as const;
