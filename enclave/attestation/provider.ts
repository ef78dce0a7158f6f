/**
 * Where attestation documents come from. The enclave asks its provider for a document
 * binding its public key (and optional user data and nonce); the provider decides the
 * format (simulated or AWS Nitro).
 */
export interface AttestationRequest {
  /** The enclave's raw 32-byte Ed25519 public key; providers bind it as a DER SubjectPublicKeyInfo. */
  publicKey: Uint8Array;
  /** Extra bytes bound into the document (keys for sealed requests, operator key). */
  userData?: Uint8Array;
  /** A client-supplied nonce for freshness. */
  nonce?: Uint8Array;
}

export interface AttestationProvider {
  /** `simulated` locally, `aws-nitro-enclaves` on Nitro. */
  readonly teeName: string;
  /** Returns the raw attestation document bytes (base64-encoded by the caller). */
  attest(request: AttestationRequest): Promise<Uint8Array>;
  /** The root its documents chain to, where it is not the AWS Nitro root (the simulated CA). */
  rootCertificatePem?(): Promise<string>;
}
