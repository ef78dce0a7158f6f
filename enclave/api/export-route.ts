import { badRequest } from '../../common/errors.js';
import type { ApiReply } from '../../common/proto.js';
import { sseHeaders } from '../../common/sse.js';
import { boxBefore, boxKeyPair, PUBLIC_KEY_BYTES, uniqueNonce } from '../../protocol/box.js';
import { exportKey } from '../../protocol/memory-export.js';
import { FrameSealer, frameEvent } from '../../protocol/sealed-stream.js';
import { TENANT_HEADER } from '../../protocol/response-signature.js';
import { authorize, requireWholeTenant } from '../auth/caller.js';
import type { MemoryService } from '../memory/memory-service.js';
import type { RouteCall } from './resolve-call.js';
import type { ChunkSink } from './stream.js';

/** Plaintext handed to one sealed frame: large enough for few frames, small enough to stream a large tenant in steps. */
const FRAME_BYTES = 64 * 1024;

/** The unary call cannot carry an export (the proxy always streams it). */
export const exportUnary = async (): Promise<ApiReply> => {
  throw badRequest('GET /v1/memory/export must be sent on the streaming call', null, 'stream_mismatch');
};

/** The export's lines (protocol/memory-export.ts): each memory with its history, then what is kept of those deleted. */
function* exportedLines(memory: MemoryService, tenantId: string): Generator<string> {
  for (const { record, history } of memory.exportTenant(tenantId)) yield `${JSON.stringify({ type: 'memory', memory: record, history })}\n`;
  for (const { id, versions } of memory.exportDeleted(tenantId)) yield `${JSON.stringify({ type: 'deleted', id, history: versions })}\n`;
}

/**
 * GET /v1/memory/export: the tenant's memories with their history, as JSON Lines sealed to
 * the caller's X25519 key (protocol/memory-export.ts), streamed a frame at a time and never
 * held whole; the stream wrapper signs it with a last event.
 */
export function exportRoute(memory: MemoryService) {
  return async ({ caller, query: { tenant_id, public_key } }: RouteCall<'ExportMemories'>, sink: ChunkSink, signal: AbortSignal): Promise<void> => {
    authorize(caller, tenant_id);
    requireWholeTenant(caller);
    memory.admitTenant(tenant_id, caller.tenantKey);
    const theirs = Buffer.from(public_key, 'base64');
    if (theirs.length !== PUBLIC_KEY_BYTES) throw badRequest('public_key must be a base64 X25519 public key (32 bytes)', 'public_key', 'invalid_value');
    const mine = boxKeyPair();
    let shared: Uint8Array;
    try {
      shared = boxBefore(theirs, mine.secretKey);
    } catch {
      throw badRequest('public_key is not a usable X25519 public key', 'public_key', 'invalid_value');
    } finally {
      mine.secretKey.fill(0);
    }
    const nonce = uniqueNonce();
    const sealer = new FrameSealer(exportKey(shared, nonce));
    sink.head({ status: 200, body: Buffer.alloc(0), headers: { ...sseHeaders, [TENANT_HEADER]: tenant_id } });
    await sink.data(frameEvent(Buffer.concat([mine.publicKey, nonce, sealer.header])));
    await sink.data(frameEvent(sealer.head(200, { 'content-type': 'application/x-ndjson' })));
    let lines: string[] = [];
    let bytes = 0;
    const flush = async () => {
      await sink.data(frameEvent(sealer.data(Buffer.from(lines.join(''), 'utf8'))));
      lines = [];
      bytes = 0;
    };
    for (const line of exportedLines(memory, tenant_id)) {
      if (signal.aborted) return;
      lines.push(line);
      bytes += line.length;
      if (bytes >= FRAME_BYTES) await flush();
    }
    if (lines.length > 0) await flush();
    await sink.data(frameEvent(sealer.end()));
  };
}
