/**
 * A verified, sealed call end to end with the sdk:
 *
 *   node dist/sdk/examples/sealed-call.js [base-url] [root-pem] [pcr0-hex]
 *
 * (defaults: http://127.0.0.1:8080, data/simulated-root.pem; without pcr0-hex it pins no
 * PCR, which the sdk allows only with its loudly named development opt-out). It attests
 * the service, stores a memory and queries it with sealed calls (the host relays only
 * ciphertext), then makes one plain call whose signature it checks.
 */
import { readFile } from 'node:fs/promises';
import { connect, TrustError } from '../index.js';

const [baseUrl = 'http://127.0.0.1:8080', rootFile = 'data/simulated-root.pem', pcr0] = process.argv.slice(2);

// Anything the sdk cannot verify is a TrustError: say why and stop.
process.on('uncaughtException', (error) => {
  console.error(error instanceof TrustError ? `not trusted: ${error.message}` : error);
  process.exit(1);
});

if (!pcr0) console.warn('WARNING: no PCR0 given, so nothing pins which code is attested (development only): pass it as the third argument');
const tee = await connect({ baseUrl, rootPem: await readFile(rootFile, 'utf8'), ...(pcr0 ? { pcrs: { 0: pcr0 } } : { insecureSkipPcrPinning: true }) });
const { attestation } = tee;
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
console.log(`attested ${baseUrl}: ${attestation.teeName}, module ${attestation.document.moduleId}`);
for (const check of attestation.checks) console.log(`  ✓ ${check.name}`);
console.log(`  PCR0 ${attestation.document.pcrs[0]}${pcr0 ? ' (pinned)' : ' (not pinned: pass it as the third argument)'}`);
console.log(`  signing key ${b64(attestation.teePublicKey)}, box key ${b64(attestation.boxPublicKey)}`);

const stored = await tee.sealedCall<{ id: string }>('POST', '/v1/memory', {
  tenant_id: 'alice',
  content: 'Alice keeps her passport in the blue folder.',
  metadata: { source: 'sealed-call example' },
});
console.log(`sealed POST /v1/memory → ${stored.status}, id ${stored.body.id}, signed at ${stored.signedAt.toISOString()}`);

const query = encodeURIComponent('where is the passport?');
const found = await tee.sealedCall<{ data: { content: string; score: number }[] }>('GET', `/v1/memory?tenant_id=alice&query=${query}&top_k=1`);
const top = found.body.data[0];
console.log(`sealed GET /v1/memory → ${found.status}, top result (score ${top?.score.toFixed(3)}): "${top?.content}"`);

const plain = await tee.call<{ data: unknown[] }>('GET', `/v1/memory?tenant_id=alice&query=${query}&top_k=3`);
console.log(`plain GET /v1/memory → ${plain.status}, ${plain.body.data.length} result(s), x-tee-signature verified`);
