import { describe, expect, it } from 'vitest';
import { DEFAULT_HNSW, HnswIndex } from '../../enclave/vectors/hnsw-index.js';
import { TieredIndex } from '../../enclave/vectors/tiered-index.js';

/**
 * A tenant's index opened from a saved graph (TieredIndex.restored) holds exactly what the
 * snapshot's memories say, whatever the graph held: storage/graph-file.ts relies on it.
 */
const dimension = 16;
const tiers = { promoteAbove: 16, hnsw: DEFAULT_HNSW };

function unit(seed: number): Float32Array {
  const v = new Float32Array(dimension);
  let x = seed * 7919 + 1;
  for (let d = 0; d < dimension; d++) {
    x = (x * 48271) % 2147483647;
    v[d] = x / 2147483647 - 0.5;
  }
  const norm = Math.hypot(...v);
  return v.map((c) => c / norm);
}

describe('a restored graph', () => {
  it('keeps a vector only when the snapshot adds the same one, and drops what the snapshot does not hold', async () => {
    const saved = new TieredIndex(dimension, tiers);
    for (let i = 0; i < 100; i++) saved.add(String(i), unit(i));
    const graph = (await saved.saveGraph())!;

    const restored = TieredIndex.restored(graph, tiers);
    expect(restored.kind).toBe('hnsw');
    // The snapshot: memories 0..89, memory 5 with another vector than the graph's.
    for (let i = 0; i < 90; i++) restored.add(String(i), i === 5 ? unit(500) : unit(i));
    expect(restored.settle()).toBe(10);
    expect(restored.size).toBe(90);
    expect(restored.vector('5')).toEqual(unit(500));
    expect(restored.search(unit(500), 1)[0].id).toBe('5');
    expect(restored.search(unit(95), 5).map((hit) => hit.id)).not.toContain('95');
    expect(restored.search(unit(42), 1)[0]).toMatchObject({ id: '42' });
  });

  it('is refused when the settings it was built with changed', async () => {
    const saved = new TieredIndex(dimension, tiers);
    for (let i = 0; i < 40; i++) saved.add(String(i), unit(i));
    const graph = (await saved.saveGraph())!;
    expect(() => HnswIndex.restore(graph, dimension + 1)).toThrow(/dimensions/);
    expect(() => HnswIndex.restore(graph, dimension, { ...DEFAULT_HNSW, m: 32 })).toThrow(/settings/);
    expect(() => HnswIndex.restore({ ...graph, ids: graph.ids.slice(1) }, dimension)).toThrow(/do not agree/);
  });
});
