/**
 * A tenant's memories exported sealed to a key the caller holds (GET /v1/memory/export), so
 * the host relaying or keeping the file learns nothing. The enclave seals (enclave/api/
 * export-route.ts), the sdk opens (openExport).
 *
 * The answer is a server-sent event stream, like a sealed stream (sealed-stream.ts), each event
 * `data: <base64>\n\n`:
 *
 *   event 0   80 bytes: the enclave's one-time X25519 public key (32) ‖ nonce (24) ‖ secretstream header (24)
 *   events 1… frames of one crypto_secretstream_xchacha20poly1305 stream (sealed-stream.ts's
 *             FrameSealer: head, data…, end) under
 *               key = HKDF-SHA256(ikm = nacl.box.before(caller's public key, one-time secret key),
 *                                 salt = nonce, info = "agent-service/memory-export/v1", 32 bytes)
 *             whose data, in order, is JSON Lines: one line per memory
 *               {"type":"memory","memory":{…the record…},"history":[{event, at, key_id, extracted, record?}, …]}
 *             then one per deleted memory whose history is kept (no content: times, events, key ids)
 *               {"type":"deleted","id":"…","history":[{event, at, key_id, extracted}, …, {"event":"delete", …}]}
 *
 * and, after them, the enclave's tee.signature event over every byte before it (the export as
 * a whole is signed like every answer). The file saved is the stream as received; opening it
 * needs the caller's X25519 secret key. POST /v1/memory/import takes its lines.
 */
import { hkdfSync } from 'node:crypto';
import sodium from 'sodium-native';
import { boxBefore } from './box.js';
import { FrameOpener, outerEvents, SealedStreamError } from './sealed-stream.js';

export const EXPORT_KDF_INFO = 'agent-service/memory-export/v1';
export const EXPORT_PREAMBLE_BYTES = 32 + 24 + sodium.crypto_secretstream_xchacha20poly1305_HEADERBYTES;

/** The export's stream key (see above). */
export function exportKey(shared: Uint8Array, nonce: Uint8Array): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, nonce, EXPORT_KDF_INFO, sodium.crypto_secretstream_xchacha20poly1305_KEYBYTES));
}

/** One line of an export (and of an import): a memory, or a deleted memory's history. */
export type ExportLine = {
  type: 'memory';
  memory: { id: string; content: string; metadata?: Record<string, unknown>; created_at?: number; updated_at?: number } & Record<string, unknown>;
  history?: Array<Record<string, unknown>>;
} | {
  type: 'deleted';
  id: string;
  history: Array<{ event: 'add' | 'update' | 'delete'; at: number; key_id: string | null; extracted: boolean }>;
};

/**
 * Opens an export, as it streams in or from its file, with the caller's X25519 secret key:
 * yields the JSON Lines bytes in order; throws SealedStreamError if it was altered, cut, or
 * not sealed to that key. Holds one frame at a time.
 */
export async function* openExport(source: AsyncIterable<Uint8Array>, secretKey: Uint8Array): AsyncGenerator<Uint8Array> {
  let opener: FrameOpener | undefined;
  for await (const event of outerEvents(source)) {
    if (opener?.ended) return; // the signature event and anything after it are not the export
    if (!('frame' in event)) throw new SealedStreamError(`the export holds an event that is not a sealed frame: ${event.text.slice(0, 200)}`);
    if (!opener) {
      if (event.frame.length !== EXPORT_PREAMBLE_BYTES) throw new SealedStreamError('the export does not start with its key, nonce and header');
      const shared = boxBefore(event.frame.subarray(0, 32), secretKey);
      opener = new FrameOpener(exportKey(shared, event.frame.subarray(32, 56)), event.frame.subarray(56));
      continue;
    }
    const frame = opener.open(event.frame);
    if (frame.kind === 'head' && frame.status !== 200) throw new SealedStreamError(`the export failed inside the enclave (status ${frame.status})`);
    if (frame.kind === 'data') yield frame.bytes;
  }
  if (!opener?.ended) throw new SealedStreamError('the export was cut short (no final frame)');
}

/** JSON Lines, parsed a line at a time from bytes in any pieces. */
export async function* jsonLines(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<unknown> {
  let pending = '';
  const decoder = new TextDecoder();
  for await (const chunk of bytes) {
    pending += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + 1);
      if (line.trim() !== '') yield JSON.parse(line);
    }
  }
  if (pending.trim() !== '') yield JSON.parse(pending);
}
