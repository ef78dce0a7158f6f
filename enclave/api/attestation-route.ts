import { ApiError, unavailable } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { ApiReply } from '../../common/proto.js';
import type { AttestationProvider } from '../attestation/provider.js';
import type { EnclaveIdentity } from '../keys.js';
import { jsonReply } from './request.js';
import type { RouteCall } from './resolve-call.js';

export interface AttestationDeps {
  log: Logger;
  provider: AttestationProvider;
  identity: EnclaveIdentity;
  operatorKey: Uint8Array;
  /** The X25519 key sealed requests are encrypted to (also in userData). */
  boxPublicKey: Uint8Array;
  /** Bytes bound into the document's user_data (the operator key, the sealed-request key). */
  userData: Uint8Array;
  /**
   * Fresh (nonce'd) documents made at once. Anyone may ask for one without a key, and each
   * costs a signature by the security module (on Nitro, a helper process): beyond this many
   * at once the answer is 503, so such requests cannot crowd out the rest. Default 4.
   */
  maxFreshAtOnce?: number;
}

// Documents carry a timestamp and a short-lived leaf certificate: renew the cached one.
const CACHE_MS = 5 * 60 * 1000;

/**
 * GET /v1/attestation. Without a nonce one document serves every caller for a few
 * minutes (it binds the same keys); with a nonce each answer is made fresh.
 */
export function attestationRoute(deps: AttestationDeps) {
  const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
  let cached: { at: number; doc: Promise<Uint8Array> } | undefined;
  const maxFresh = deps.maxFreshAtOnce ?? 4;
  let fresh = 0;

  const document = (nonce: Uint8Array | undefined): Promise<Uint8Array> => {
    const request = { publicKey: deps.identity.publicKey, userData: deps.userData, nonce };
    if (nonce) {
      fresh++;
      return deps.provider.attest(request).finally(() => { fresh--; });
    }
    if (!cached || Date.now() - cached.at > CACHE_MS) {
      const doc = deps.provider.attest(request);
      cached = { at: Date.now(), doc };
      doc.catch(() => { if (cached?.doc === doc) cached = undefined; });
    }
    return cached.doc;
  };

  return async ({ query: { nonce } }: RouteCall<'GetAttestation'>): Promise<ApiReply> => {
    if (nonce !== undefined && fresh >= maxFresh) {
      throw new ApiError('attestation_busy', `${maxFresh} attestation documents with a nonce are being made; retry shortly`, { headers: { 'retry-after': '1' } });
    }
    let doc: Uint8Array;
    try {
      doc = await document(nonce === undefined ? undefined : new Uint8Array(Buffer.from(nonce, 'hex')));
    } catch (err) {
      // The security module (or the simulated one) failed: a service problem, not the caller's.
      deps.log.error({ err: (err as Error).message }, 'attestation provider failed');
      throw unavailable('the attestation document could not be made; try again shortly', 'attestation_unavailable');
    }
    return jsonReply(200, {
      code_attestation: b64(doc),
      operator_pubkey: b64(deps.operatorKey),
      tee_name: deps.provider.teeName,
      tee_public_key: b64(deps.identity.publicKey),
      tee_box_public_key: b64(deps.boxPublicKey),
    });
  };
}
