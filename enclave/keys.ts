import nacl from 'tweetnacl';

/**
 * The enclave's identity: an Ed25519 key pair generated at start-up, inside the
 * enclave. The secret key never leaves this process: it is not logged, persisted or
 * sent over the channel; only the public key is published (and bound into attestation).
 */
export interface EnclaveIdentity {
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

export function generateIdentity(): EnclaveIdentity {
  const { publicKey, secretKey } = nacl.sign.keyPair();
  return {
    publicKey,
    sign: (message) => nacl.sign.detached(message, secretKey),
  };
}
