/**
 * What the web console imports: the entry of the bundle scripts/build-console.ts builds
 * from this source into dist/console/verifier.js, so the page runs the sdk's verifier and
 * no copy of it.
 */
export { checkAttestationAnswer, parsePcrLines, type AnswerCheckOptions, type AnswerVerification, type Pins } from './answer.js';
export { verifyAttestation } from '../../protocol/attestation/verify.js';
export { toHex } from '../../protocol/bytes.js';
