/** The client-side sdk: verify attestation, make signed and sealed calls. */
export {
  AttestationError, connect, knownStateHeaders, ResponseSignatureError, RollbackError, SealedCallError, stateTrackerFor, TeeClient, TrustError, UpstreamError,
  type CallOptions, type ConnectOptions, type SealedStream, type TeeResponse, type VerifiedAttestation,
} from './client.js';
export { verifyAttestation, type Check, type DecodedDocument, type VerificationResult, type VerifyOptions } from '../protocol/attestation/verify.js';
export { AWS_NITRO_ROOT_G1_PEM } from '../protocol/attestation/aws-root.js';
export {
  canonicalJson, manifestSigningBytes, ManifestError, MANIFEST_TYPE, verifyManifest,
  type ReleaseManifest, type SignedManifest, type VerifiedManifest,
} from './attestation/manifest.js';
export {
  ANCESTOR_HEADER, checkSignature, formatKnownStates, formatState, KNOWN_STATE_HEADER, parseKnownStates, parseState, responseStatement, sha256Hex, SHARD_HEADER,
  splitSignedStream, streamSignatureEvent, SIGNATURE_HEADER, STATE_HEADER, STATEMENT_TAG, StateTracker, STORE_HEADER, STREAM_SIGNATURE_EVENT, TIMESTAMP_HEADER,
  UPSTREAM_HEADER,
  type Ancestry, type Floor, type KnownState, type KnownStates, type ResponseSignature, type SavedState, type SignedRequest, type StateHead,
} from '../protocol/response-signature.js';
export { MAX_SHARDS, shardOf } from '../protocol/shards.js';
export { openReply, sealRequest, SEALED_CONTENT_TYPE, SEALED_PATH, type SealedEnvelope, type SealedReply, type SealedRequest } from '../protocol/sealed.js';
export { SEALED_STREAM_PATH, SealedStreamError } from '../protocol/sealed-stream.js';
export { encodeUserData, parseUserData, type BoundKeys } from '../protocol/user-data.js';
export { formatUpstream, LOCAL_UPSTREAM, parseUpstream, type Upstream } from '../protocol/upstream.js';
export { checkReceipt, receiptState, receiptStatement, RECEIPT_TAG, type DeletionReceipt, type ReceiptCheck } from '../protocol/deletion-receipt.js';
export { exportKeyPair, exportLines, fetchExport, importMemories, jsonLines, openExport, type ExportLine } from './memory-export.js';
