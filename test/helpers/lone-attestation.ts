import { readFileSync } from 'node:fs';
import { EnclaveConnection } from '../../proxy/enclave-client.js';
import { simulatedRootPath } from '../../enclave/attestation/simulated-nsm.js';
import { verifyAttestation, type VerificationResult } from '../../protocol/attestation/verify.js';

/**
 * Asks an enclave for its attestation document over gRPC, as the proxy would, and verifies
 * it against the simulated root in the host store's DATA_DIR: what the running enclave
 * measures, read from a document it signed (not from a helper's hash of a file).
 */
export async function attestLoneEnclave(enclaveAddr: string, dataDir: string): Promise<VerificationResult & { body: Record<string, string> }> {
  const enclave = new EnclaveConnection(enclaveAddr, 30_000);
  try {
    const reply = await enclave.call({ requestId: 'pcr-test', method: 'GET', target: '/v1/attestation' });
    if (reply.status !== 200) throw new Error(`GET /v1/attestation answered ${reply.status}: ${Buffer.from(reply.body).toString()}`);
    const body = JSON.parse(Buffer.from(reply.body).toString('utf8')) as Record<string, string>;
    const result = await verifyAttestation(Buffer.from(body.code_attestation, 'base64'), {
      rootPem: readFileSync(simulatedRootPath(dataDir), 'utf8'),
      publicKey: Buffer.from(body.tee_public_key, 'base64'),
    });
    return { ...result, body };
  } finally {
    enclave.close();
  }
}
