// Just enough CBOR (RFC 8949) for an attestation document: definite lengths only, tags
// skipped, maps as Map (COSE and the PCR map have integer keys). Anything else throws,
// so a malformed document fails the check instead of being half-read.

export function decodeCbor(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  const need = (n) => {
    if (at + n > bytes.length) throw new Error('CBOR: truncated');
  };
  const argument = (info) => {
    if (info < 24) return info;
    if (info === 24) { need(1); return view.getUint8(at++); }
    if (info === 25) { need(2); const v = view.getUint16(at); at += 2; return v; }
    if (info === 26) { need(4); const v = view.getUint32(at); at += 4; return v; }
    if (info === 27) {
      need(8);
      const v = view.getBigUint64(at); at += 8;
      if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('CBOR: integer too large');
      return Number(v);
    }
    throw new Error('CBOR: indefinite lengths are not used in attestation documents');
  };
  const item = (depth) => {
    if (depth > 32) throw new Error('CBOR: nested too deeply');
    need(1);
    const initial = bytes[at++];
    const major = initial >> 5;
    const info = initial & 31;
    if (major === 7) {
      if (info === 20) return false;
      if (info === 21) return true;
      if (info === 22) return null;
      if (info === 23) return undefined;
      if (info === 25) { need(2); at += 2; throw new Error('CBOR: half floats are not used'); }
      if (info === 26) { need(4); const v = view.getFloat32(at); at += 4; return v; }
      if (info === 27) { need(8); const v = view.getFloat64(at); at += 8; return v; }
      throw new Error(`CBOR: simple value ${info}`);
    }
    const n = argument(info);
    switch (major) {
      case 0: return n;
      case 1: return -1 - n;
      case 2: { need(n); const v = bytes.slice(at, at + n); at += n; return v; }
      case 3: { need(n); const v = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(at, at + n)); at += n; return v; }
      case 4: { const out = []; for (let i = 0; i < n; i++) out.push(item(depth + 1)); return out; }
      case 5: { const out = new Map(); for (let i = 0; i < n; i++) { const k = item(depth + 1); out.set(k, item(depth + 1)); } return out; }
      case 6: return item(depth + 1); // a tag (e.g. 18, COSE_Sign1): the value is what counts
      default: throw new Error(`CBOR: major type ${major}`);
    }
  };
  const value = item(0);
  if (at !== bytes.length) throw new Error('CBOR: trailing bytes');
  return value;
}

function head(major, length) {
  if (length < 24) return [(major << 5) | length];
  if (length < 256) return [(major << 5) | 24, length];
  if (length < 65536) return [(major << 5) | 25, length >> 8, length & 255];
  return [(major << 5) | 26, (length >>> 24) & 255, (length >> 16) & 255, (length >> 8) & 255, length & 255];
}

/** COSE's Sig_structure for COSE_Sign1 (RFC 8152 §4.4): ["Signature1", protected, external_aad = h'', payload]. */
export function sigStructure(protectedHeader, payload) {
  const label = new TextEncoder().encode('Signature1');
  const parts = [
    Uint8Array.from(head(4, 4)),
    Uint8Array.from(head(3, label.length)), label,
    Uint8Array.from(head(2, protectedHeader.length)), protectedHeader,
    Uint8Array.from(head(2, 0)),
    Uint8Array.from(head(2, payload.length)), payload,
  ];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}
