/**
 * Reading a sealed stream (protocol/sealed-stream.ts) on the client: TeeClient.sealedStream
 * sends the request; this opens the frames as they arrive and checks the inner answer's
 * signature once the enclave's final frame has come.
 *
 * What a yielded chunk has proven: it opened under a key only the attested enclave and this
 * call share, in its place in the stream. What the end proves besides: nothing was cut, and
 * the enclave signed exactly these bytes for this request, tenant, key and state head. A JSON
 * (non-streamed) answer is yielded only after that end check.
 */
import type { StateHead } from '../protocol/response-signature.js';
import { FrameOpener, outerEvents, SealedStreamError, type OpenedFrame } from '../protocol/sealed-stream.js';
import { SealedCallError, TrustError } from './errors.js';

export interface SealedStream extends AsyncIterable<Uint8Array> {
  /** The inner answer's status and headers, as the enclave sealed them. */
  readonly status: number;
  readonly headers: Record<string, string>;
  /** Once the stream has been read to its end: when it was signed and the state head it reports. */
  readonly verified: { signedAt: Date; state: StateHead } | undefined;
  /** Stops reading; the request is abandoned. */
  cancel(): Promise<void>;
}

/** Checks the whole inner answer's signature; throws (ResponseSignatureError, RollbackError) when it fails. */
export type VerifyInner = (status: number, headers: Record<string, string>, body: Uint8Array, streamed: boolean) => { signedAt: Date; state: StateHead };

const failure = (error: unknown): Error =>
  error instanceof SealedStreamError ? new SealedCallError(`the sealed stream cannot be trusted: ${error.message}`) : (error as Error);

/** What may follow the final frame (nothing, from the enclave). More, and the rest is not read. */
const MAX_EVENTS_AFTER_END = 4;

/** Reads the outer events left after the final frame; false when more came than may, or reading failed. */
async function drained(events: AsyncIterator<unknown>): Promise<boolean> {
  try {
    for (let i = 0; i <= MAX_EVENTS_AFTER_END; i++) if ((await events.next()).done) return true;
  } catch {
    // A connection closed after the end changes nothing that was verified.
  }
  return false;
}

/** Opens the header and the head frame, then returns the stream of the inner body. */
export async function readSealedStream(
  source: AsyncIterable<Uint8Array>,
  key: Uint8Array,
  verify: VerifyInner,
  cancel: () => Promise<void>,
): Promise<SealedStream> {
  const events = outerEvents(source)[Symbol.asyncIterator]();
  const next = async (): Promise<Uint8Array> => {
    const { value, done } = await events.next();
    if (done) throw new SealedStreamError('the stream ended before the enclave\'s final frame: it was cut');
    if ('text' in value) throw new SealedStreamError(`the stream was interrupted before its final frame (the host said: ${value.text.slice(0, 300)})`);
    return value.frame;
  };
  let opener: FrameOpener;
  let head: OpenedFrame;
  try {
    opener = new FrameOpener(key, await next());
    head = opener.open(await next());
  } catch (error) {
    await cancel().catch(() => undefined);
    throw failure(error);
  }
  if (head.kind !== 'head') throw new SealedCallError('the sealed stream has no head');
  const { status, headers } = head;
  const streamed = (headers['content-type'] ?? '').startsWith('text/event-stream');
  let verified: SealedStream['verified'];
  let used = false;
  let ended = false;

  async function* body(): AsyncGenerator<Uint8Array> {
    if (used) throw new TypeError('a sealed stream can be read once');
    used = true;
    const received: Uint8Array[] = [];
    try {
      for (;;) {
        const frame = opener.open(await next());
        if (frame.kind === 'end') {
          ended = true;
          break;
        }
        if (frame.kind !== 'data') throw new SealedStreamError('a second head');
        received.push(frame.bytes);
        if (streamed) yield frame.bytes;
      }
      const whole = Buffer.concat(received);
      verified = verify(status, headers, whole, streamed);
      if (!streamed && whole.length > 0) yield whole;
    } catch (error) {
      throw error instanceof TrustError ? error : failure(error);
    } finally {
      // Failed or left early: stop reading. Ended: read to the end of the body (nothing
      // after the final frame is part of the answer) so the connection can be used again;
      // cancelling closed it, and a new connection per call cost more than the rest of the
      // client's work on a streamed chat.
      if (!ended || !(await drained(events))) await cancel().catch(() => undefined);
    }
  }

  return {
    status,
    headers,
    get verified() {
      return verified;
    },
    cancel,
    [Symbol.asyncIterator]: body,
  };
}
