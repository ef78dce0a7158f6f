import { createHash } from 'node:crypto';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import {
  SIGNATURE_HEADER, STATE_HEADER, TENANT_HEADER, TIMESTAMP_HEADER, formatState, sha256Hex, signAnswer, streamSignatureEvent, type SignedRequest,
  type StateHead,
} from '../../sdk/protocol/response-signature.js';
import type { EnclaveIdentity } from '../keys.js';

/** The enclave's key, and the state head each signed answer reports (the store's, after any change it made). */
export interface ResponseSigner extends EnclaveIdentity {
  state(): StateHead;
}

/** The request as the statement names it (sdk/protocol/response-signature.ts). */
function signedRequest(method: string, request: ApiRequest): SignedRequest {
  return { method, target: request.target, organization: request.organization, authorization: request.authorization, body: request.body };
}

/**
 * Adds x-tee-signature, x-tee-timestamp and x-tee-state to a reply: the enclave's Ed25519
 * signature over (method, target, organization, request body hash, status, response body
 * hash, timestamp, state head).
 */
export function signReply(signer: ResponseSigner, method: string, request: ApiRequest, reply: ApiReply): ApiReply {
  const body = reply.body ?? new Uint8Array();
  const { signature, timestamp, state } = signAnswer(
    (message) => signer.sign(message),
    signedRequest(method, request),
    { status: reply.status ?? 200, bodySha256: sha256Hex(body as Uint8Array), state: formatState(signer.state()), tenant: reply.headers?.[TENANT_HEADER] ?? '' },
  );
  // Object.assign, not a literal spreading `reply` and adding to it: V8 (Node 20) promoted
  // what such literals made to the old generation, on every reply (docs/performance.md).
  const headers = Object.assign({}, reply.headers, { [SIGNATURE_HEADER]: signature, [TIMESTAMP_HEADER]: timestamp, [STATE_HEADER]: state });
  return Object.assign({}, reply, { headers });
}

export interface StreamSigner {
  /** Feed every byte sent to the client after the head, in order. */
  update(chunk: Uint8Array): void;
  /** The final SSE event signing everything fed so far; send it last. */
  finish(): Buffer;
}

/**
 * Signs a streamed answer (server-stream RPC): hashes the streamed bytes as they go and
 * ends with a tee.signature event (sdk/protocol/response-signature.ts) over the same
 * statement as signReply, whose response body is the concatenation of the streamed bytes.
 */
export function streamSigner(signer: ResponseSigner, method: string, request: ApiRequest, status: number, tenant = ''): StreamSigner {
  const hash = createHash('sha256');
  let finished = false;
  return {
    update(chunk) {
      if (finished) throw new Error('stream already signed');
      hash.update(chunk);
    },
    finish() {
      if (finished) throw new Error('stream already signed');
      finished = true;
      // The head at the end: after any memory the stream's tool calls added.
      const signature = signAnswer((m) => signer.sign(m), signedRequest(method, request), {
        status, bodySha256: hash.digest('hex'), state: formatState(signer.state()), tenant,
      });
      return Buffer.from(streamSignatureEvent(signature), 'utf8');
    },
  };
}
