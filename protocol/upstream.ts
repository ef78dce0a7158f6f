/**
 * Where a chat's prompt and memories went: the value of the signed `x-tee-upstream` header
 * (response-signature.ts puts it in the statement). One definition, used by the enclave to
 * write it and by the sdk and agent-gateway to read it:
 *
 *   local                                        the enclave's own offline responder: nothing left it
 *   <origin>[ sha256/<base64>…][ memories-withheld]
 *
 * `<origin>` is MODEL_BASE_URL's origin; each `sha256/<base64>` the SHA-256 of the DER
 * SubjectPublicKeyInfo of the TLS certificate the enclave saw on a connection that carried
 * this answer (the form of HPKP pins; none over plain http). `memories-withheld`: the
 * enclave sent none of the tenant's memories and offered no memory tools (MEMORY_UPSTREAM=never).
 * Answers that used no chat model carry no header (the statement signs "").
 *
 * Uses no node: modules (the sdk's protocol may be bundled for the browser).
 */

export const UPSTREAM_HEADER = 'x-tee-upstream';
export const LOCAL_UPSTREAM = 'local';
const WITHHELD = 'memories-withheld';
const SPKI = /^sha256\/[A-Za-z0-9+/]{43}=$/;

export interface Upstream {
  /** 'local', or the upstream's origin (scheme://host[:port]). */
  origin: string;
  /** base64 SHA-256 of each certificate public key (SPKI) the enclave saw. */
  spkiSha256: string[];
  memoriesWithheld: boolean;
}

export function formatUpstream(upstream: Upstream): string {
  if (upstream.origin === LOCAL_UPSTREAM) return LOCAL_UPSTREAM;
  return [upstream.origin, ...upstream.spkiSha256.map((s) => `sha256/${s}`), ...(upstream.memoriesWithheld ? [WITHHELD] : [])].join(' ');
}

/** The header's meaning, or undefined when it is not one (a statement with such a value is refused). */
export function parseUpstream(text: string): Upstream | undefined {
  if (text === LOCAL_UPSTREAM) return { origin: LOCAL_UPSTREAM, spkiSha256: [], memoriesWithheld: false };
  const [origin, ...rest] = text.split(' ');
  if (!/^https?:\/\/[^\s/?#]+$/.test(origin ?? '')) return undefined;
  const memoriesWithheld = rest.at(-1) === WITHHELD;
  const pins = memoriesWithheld ? rest.slice(0, -1) : rest;
  if (!pins.every((p) => SPKI.test(p))) return undefined;
  return { origin, spkiSha256: pins.map((p) => p.slice('sha256/'.length)), memoriesWithheld };
}

/** An upstream origin as `requireUpstream` / `--require-upstream` takes it; throws on anything but http(s)://host[:port]. */
export function normalizeOrigin(value: string): string {
  const url = new URL(value);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new TypeError(`not an http(s) origin: ${value}`);
  return url.origin;
}

/**
 * Why an answer's upstream is not the one the client requires, or undefined when it may be
 * accepted: no upstream ("": the answer used no chat model) and `local` (nothing left the
 * enclave) always may.
 */
export function upstreamRefusal(signed: string, required: string | undefined): string | undefined {
  if (required === undefined || signed === '' || signed === LOCAL_UPSTREAM) return undefined;
  const upstream = parseUpstream(signed);
  if (!upstream) return `the answer names an upstream that is not one: ${JSON.stringify(signed.slice(0, 200))}`;
  if (upstream.origin !== required) return `the enclave sent this request to ${upstream.origin}, not to the required upstream ${required}`;
  return undefined;
}
