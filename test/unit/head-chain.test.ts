import { describe, expect, it } from 'vitest';
import { HeadChain } from '../../enclave/storage/head-chain.js';
import { advanceHead, genesisHead, type StateHead } from '../../enclave/storage/state-head.js';

/** `n` heads after genesis of store `id`, each from a distinct payload; [0] is genesis. */
function history(id: string, n: number, tag = 'change'): StateHead[] {
  const heads = [genesisHead(id)];
  for (let i = 1; i <= n; i++) heads.push(advanceHead(heads[i - 1], Buffer.from(`${tag} ${i}`)));
  return heads;
}

function chainOf(heads: StateHead[]): HeadChain {
  const chain = HeadChain.startingAt(heads[0]);
  for (const head of heads.slice(1)) chain.push(head);
  return chain;
}

describe('the chain of heads (enclave/storage/head-chain.ts)', () => {
  const real = history('a'.repeat(32), 70_000);

  it('places every head of its own history: yes, for the newest and any ancestor', () => {
    const chain = chainOf(real);
    for (const seq of [0, 1, 65_535, 65_536, 65_537, 69_999, 70_000]) expect(chain.ancestry(real[seq])).toBe('yes');
    expect(chain.length).toBe(70_001);
    // Held in 512 KiB chunks of 65,536 heads: two for 70,001 heads, one for a new chain.
    expect(chain.bytes).toBe(2 * 512 * 1024);
    expect(HeadChain.startingAt(real[0]).bytes).toBe(512 * 1024);
  });

  it('says no for a fork (same seq, another history), a later head, and another store', () => {
    const chain = chainOf(real);
    // An older copy restored at 1,000 and written to since: its heads after 1,000 differ.
    const fork = real.slice(0, 1001);
    let head = fork[1000];
    for (let i = 1; i <= 5000; i++) fork.push((head = advanceHead(head, Buffer.from(`other tenant ${i}`))));
    expect(chainOf(fork).ancestry(real[1000])).toBe('yes');
    expect(chainOf(fork).ancestry(real[3000])).toBe('no');
    expect(chain.ancestry(fork[3000])).toBe('no');
    expect(chain.ancestry({ seq: 70_001, hash: real[70_000].hash })).toBe('no');
    expect(chain.ancestry({ seq: 1_000_000, hash: real[70_000].hash })).toBe('no');
    // Older heads are compared by 64 bits: agreeing in the second 32 is not enough.
    expect(chain.ancestry({ seq: 12_345, hash: (real[12_345].hash.startsWith('0') ? '1' : '0').repeat(8) + real[12_345].hash.slice(8) })).toBe('no');
    expect(chain.ancestry(history('b'.repeat(32), 10)[10])).toBe('no');
    // The newest head is compared whole: a hash that agrees only in its first 8 bytes is not it.
    expect(chain.ancestry({ seq: 70_000, hash: real[70_000].hash.slice(0, 16) + '0'.repeat(48) })).toBe('no');
  });

  it('says unknown only before the first head it holds (a chain that starts at a format 3 snapshot)', () => {
    const chain = chainOf(real.slice(500));
    expect(chain.ancestry(real[499])).toBe('unknown');
    expect(chain.ancestry(real[500])).toBe('yes');
    expect(() => chain.push(real[5])).toThrow(/does not follow/);
  });

  it('survives the round trip through a snapshot (prefixes up to a head), and refuses pieces that do not end at it', () => {
    const chain = chainOf(real);
    const pieces = [...chain.prefixes(68_000)];
    expect(pieces.map((p) => p.length)).toEqual([65_536 * 8, (68_001 - 65_536) * 8]);
    const restored = HeadChain.fromPrefixes(0, pieces, real[68_000])!;
    expect(restored.ancestry(real[12_345])).toBe('yes');
    expect(restored.ancestry(history('c'.repeat(32), 12_345)[12_345])).toBe('no');
    expect(HeadChain.fromPrefixes(0, pieces, real[68_001])).toBeUndefined();
    expect(HeadChain.fromPrefixes(1, pieces, real[68_000])).toBeUndefined();
    // Pieces that run past the head, though its own prefix is among them, do not end at it.
    expect(HeadChain.fromPrefixes(0, pieces, real[60_000])).toBeUndefined();
    // Exactly one chunk's worth of heads is one piece.
    expect([...chain.prefixes(65_535)].map((p) => p.length)).toEqual([65_536 * 8]);
    const altered = pieces.map((p) => Uint8Array.from(p));
    altered[1][altered[1].length - 1] ^= 1;
    expect(HeadChain.fromPrefixes(0, altered, real[68_000])).toBeUndefined();
    // Pieces that do not hold whole 8-byte prefixes do not fit.
    expect(HeadChain.fromPrefixes(0, [pieces[0], pieces[1].subarray(0, pieces[1].length - 3)], real[67_999])).toBeUndefined();
    // A snapshot cannot keep heads the chain does not hold yet.
    expect(() => [...chain.prefixes(70_001)]).toThrow('the chain ends at 70000, before 70001');
    expect([...chain.prefixes(70_000)].reduce((n, p) => n + p.length, 0)).toBe(70_001 * 8);
    // The head itself must agree in full with the last prefix: another head at that seq does not fit.
    const pieces100 = [...chainOf(real.slice(0, 101)).prefixes(100)];
    expect(HeadChain.fromPrefixes(0, pieces100, real[100])?.ancestry(real[50])).toBe('yes');
    expect(HeadChain.fromPrefixes(0, pieces100, history('d'.repeat(32), 100)[100])).toBeUndefined();
  });

  it('restores a chain that starts after seq 0, and places its heads from there', () => {
    const chain = chainOf(real.slice(1000, 1201));
    const restored = HeadChain.fromPrefixes(1000, [...chain.prefixes(1200)], real[1200])!;
    expect(restored.baseSeq).toBe(1000);
    expect(restored.length).toBe(201);
    expect(restored.ancestry(real[999])).toBe('unknown');
    for (const seq of [1000, 1001, 1199, 1200]) expect(restored.ancestry(real[seq])).toBe('yes');
    restored.push(real[1201]);
    expect(restored.head).toEqual(real[1201]);
    expect(restored.ancestry(real[1100])).toBe('yes');
  });
});
