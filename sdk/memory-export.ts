/**
 * Export and import of a tenant's memories (issue 37): fetch an export sealed to your X25519
 * key and check the enclave's signature on it, open it, and import lines (of an export, plain
 * JSON Lines, or a Mem0 export's items) in sealed batches.
 */
import { boxKeyPair, type BoxKeyPair } from '../protocol/box.js';
import { jsonLines, openExport } from '../protocol/memory-export.js';
import type { TeeClient } from './client.js';

export { jsonLines, openExport, type ExportLine } from '../protocol/memory-export.js';

/** A key pair to seal exports to: keep the secret key (32 bytes) to open them later. */
export const exportKeyPair = (): BoxKeyPair => boxKeyPair();

/**
 * GET /v1/memory/export for `tenantId`, sealed to `publicKey`: returns the stream as received
 * (save it: it is the export file) once its signature by the attested enclave checks out. The
 * host relaying it sees only sealed frames.
 */
export async function fetchExport(client: TeeClient, baseUrl: string, tenantId: string, publicKey: Uint8Array, authorization?: string): Promise<Uint8Array> {
  const target = `/v1/memory/export?tenant_id=${encodeURIComponent(tenantId)}&public_key=${encodeURIComponent(Buffer.from(publicKey).toString('base64'))}`;
  const floor = client.stateFloor();
  const headers: Record<string, string> = { ...client.stateHeaders(floor), ...(authorization ? { authorization } : {}) };
  const response = await fetch(new URL(target, baseUrl), { headers });
  const transcript = new Uint8Array(await response.arrayBuffer());
  client.verifyStream({ method: 'GET', target, authorization, knownState: headers['x-tee-known-state'], body: new Uint8Array() }, response.status, transcript, floor);
  return transcript;
}

/** The lines of an export file, opened with the secret key; streamed, one frame at a time. */
export function exportLines(file: AsyncIterable<Uint8Array>, secretKey: Uint8Array): AsyncGenerator<unknown> {
  return jsonLines(openExport(file, secretKey));
}

/**
 * Imports `items` (lines of an export or of plain JSON Lines, or a Mem0 export's items) into
 * `tenantId` in sealed calls of up to `batch` (100 at most), holding one batch at a time.
 * Returns the memories restored, the deleted memories' histories restored, and the ids skipped
 * (already held).
 */
export async function importMemories(client: TeeClient, tenantId: string, items: AsyncIterable<unknown> | Iterable<unknown>, batch = 100): Promise<{ imported: number; deleted: number; skipped: string[] }> {
  let imported = 0;
  let deleted = 0;
  const skipped: string[] = [];
  let pending: unknown[] = [];
  const send = async () => {
    const answer = await client.sealedCall<{ imported: number; deleted: number; skipped: string[]; error?: { message: string } }>('POST', '/v1/memory/import', { tenant_id: tenantId, memories: pending });
    if (answer.status !== 200) throw new Error(`import refused (${answer.status}): ${answer.body.error?.message ?? ''}`);
    imported += answer.body.imported;
    deleted += answer.body.deleted;
    skipped.push(...answer.body.skipped);
    pending = [];
  };
  for await (const item of items) {
    pending.push(item);
    if (pending.length >= batch) await send();
  }
  if (pending.length > 0) await send();
  return { imported, deleted, skipped };
}
