/**
 * Keys shared only by attestation: how a second enclave of the service comes to sign and
 * open sealed requests with the same keys as the first, so clients keep seeing one service
 * key, while the host that relays every byte between them learns nothing.
 *
 *   joiner → member  JoinChallenge                 member: 32 random bytes, single use, 60 s
 *   joiner → member  Join(challenge, document J)   J: nonce = challenge, user_data binds a
 *                                                  fresh X25519 key T and the operator key
 *   member → joiner  document M, keys sealed to T  only if J verifies against the root and its
 *                                                  PCRs (every one) and operator key equal the
 *                                                  member's own; M: nonce = SHA-256(J), binds
 *                                                  the service keys
 *   joiner           takes the keys only if M verifies the same way, and the keys that open
 *                    are the secret halves of the public keys M binds
 *
 * Both sides run the project's one verifier (protocol/attestation/verify.ts). Each side
 * learns its own PCRs from a document of its own, so the same code serves Nitro and the
 * simulated TEE. Equal PCRs mean the same code and the same trust-relevant configuration
 * (PCR1 measures it), so whoever passes can be handed the keys; the host can replay a
 * document, but keys sealed to a T whose secret only that enclave holds are of no use to it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { verifyAttestation, type VerificationResult } from '../../protocol/attestation/verify.js';
import { boxKeyPair } from '../../protocol/box.js';
import { ed25519KeyFromSpki } from '../../protocol/public-key.js';
import { encodeUserData, parseUserData } from '../../protocol/user-data.js';
import type { AttestationProvider } from '../attestation/provider.js';
import { generateIdentity, openServiceKeys, SealedKeysError, type ServiceKeys } from '../keys.js';

export const CHALLENGE_BYTES = 32;
const CHALLENGE_TTL_MS = 60_000;
/** Joins under way at once: a host asking for challenges without end must not fill memory. */
const MAX_OPEN_CHALLENGES = 64;

/** What both sides need to attest themselves and check the other. */
export interface AttestationContext {
  provider: AttestationProvider;
  /** The root documents must chain to: undefined on Nitro (the AWS root), the simulated CA locally. */
  rootPem?: string;
  operatorKey: Uint8Array;
}

/** A join refused or failed, with the reason (the check that failed). */
export class KeySharingError extends Error {
  override name = 'KeySharingError';
}

const failedChecks = (result: VerificationResult) => result.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`).join('; ');

/** What the member's document must carry as its nonce: it answers this join, and no other. */
export const joinDigest = (document: Uint8Array): Uint8Array => createHash('sha256').update('agent-service/join/v1\0').update(document).digest();

/** This enclave's PCRs, read from a document of its own (the same way on Nitro and simulated). */
export async function ownPcrs(context: AttestationContext): Promise<Record<number, Uint8Array>> {
  const nonce = randomBytes(CHALLENGE_BYTES);
  const document = await context.provider.attest({ publicKey: generateIdentity().publicKey, nonce });
  const result = await verifyAttestation(document, { rootPem: context.rootPem, nonce });
  if (!result.ok || !result.document) throw new KeySharingError(`this enclave's own attestation document does not verify: ${failedChecks(result)}`);
  return Object.fromEntries(Object.entries(result.document.pcrs).map(([index, hex]) => [Number(index), new Uint8Array(Buffer.from(hex, 'hex'))]));
}

/** The member's side: answers challenges and hands the keys to enclaves that prove they run as it does. */
export class KeyMember {
  private readonly challenges = new Map<string, number>();
  private pcrs?: Promise<Record<number, Uint8Array>>;

  constructor(
    private readonly keys: ServiceKeys,
    private readonly context: AttestationContext,
    /** The user_data this enclave's documents bind (operator key, service box key). */
    private readonly userData: Uint8Array,
    private readonly now: () => number = Date.now,
  ) {}

  challenge(): Uint8Array {
    this.expire();
    if (this.challenges.size >= MAX_OPEN_CHALLENGES) throw new KeySharingError(`${MAX_OPEN_CHALLENGES} joins are already under way; try again in a minute`);
    const challenge = randomBytes(CHALLENGE_BYTES);
    this.challenges.set(challenge.toString('hex'), this.now() + CHALLENGE_TTL_MS);
    return challenge;
  }

  async share(challenge: Uint8Array, document: Uint8Array): Promise<{ document: Uint8Array; sealedKeys: Uint8Array }> {
    this.expire();
    // Used once, whatever the outcome: a refused document cannot be retried against it.
    if (!this.challenges.delete(Buffer.from(challenge).toString('hex'))) {
      throw new KeySharingError('the challenge was not issued by this enclave, was already used, or expired');
    }
    this.pcrs ??= ownPcrs(this.context);
    const pcrs = await this.pcrs;
    const result = await verifyAttestation(document, { rootPem: this.context.rootPem, nonce: challenge, pcrs, operatorKey: this.context.operatorKey });
    if (!result.ok || !result.document) throw new KeySharingError(`the joining enclave's document does not verify: ${failedChecks(result)}`);
    const recipient = parseUserData(result.document.userData).boxPublicKey;
    const own = await this.context.provider.attest({ publicKey: this.keys.identity.publicKey, userData: this.userData, nonce: joinDigest(document) });
    return { document: own, sealedKeys: this.keys.sealFor(recipient) };
  }

  private expire(): void {
    const now = this.now();
    for (const [challenge, until] of this.challenges) if (until <= now) this.challenges.delete(challenge);
  }
}

/** How the joiner reaches a member (gRPC through the host: enclave/cluster/join-client.ts). */
export interface JoinChannel {
  challenge(): Promise<Uint8Array>;
  join(challenge: Uint8Array, document: Uint8Array): Promise<{ document: Uint8Array; sealedKeys: Uint8Array }>;
}

/** The joiner's side: the service's keys from a member, or KeySharingError saying which check failed. */
export async function joinService(channel: JoinChannel, context: AttestationContext): Promise<ServiceKeys> {
  const pcrs = await ownPcrs(context);
  const transport = boxKeyPair(true);
  const challenge = await channel.challenge();
  if (challenge.length !== CHALLENGE_BYTES) throw new KeySharingError(`the member's challenge is ${challenge.length} bytes, not ${CHALLENGE_BYTES}`);
  const mine = await context.provider.attest({
    publicKey: generateIdentity().publicKey,
    userData: encodeUserData({ operatorKey: context.operatorKey, boxPublicKey: transport.publicKey }),
    nonce: challenge,
  });
  const answer = await channel.join(challenge, mine);
  const result = await verifyAttestation(answer.document, { rootPem: context.rootPem, nonce: joinDigest(mine), pcrs, operatorKey: context.operatorKey });
  if (!result.ok || !result.document) throw new KeySharingError(`the member's document does not verify: ${failedChecks(result)}`);
  const signingPublicKey = result.document.publicKey && ed25519KeyFromSpki(result.document.publicKey);
  if (!signingPublicKey) throw new KeySharingError('the member\'s document binds no Ed25519 public key');
  try {
    return openServiceKeys(answer.sealedKeys, transport, { signingPublicKey, boxPublicKey: parseUserData(result.document.userData).boxPublicKey });
  } catch (error) {
    if (error instanceof SealedKeysError) throw new KeySharingError(error.message);
    throw error;
  }
}
