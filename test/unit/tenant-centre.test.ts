import { describe, expect, it } from 'vitest';
import { SHRINK, TenantCentre, centred, centredCosine } from '../../enclave/retrieval/tenant-centre.js';

const v = (...xs: number[]) => Float32Array.from(xs);

describe('TenantCentre', () => {
  it('keeps the shrunk mean of the vectors added and not removed', () => {
    const centre = new TenantCentre(2);
    expect([...centre.mean()]).toEqual([0, 0]);
    centre.add(v(1, 0));
    centre.add(v(0, 1));
    centre.add(v(1, 1));
    centre.remove(v(0, 1));
    const [x, y] = centre.mean();
    expect(x).toBeCloseTo(2 / (2 + SHRINK), 6);
    expect(y).toBeCloseTo(1 / (2 + SHRINK), 6);
    centre.remove(v(1, 0));
    centre.remove(v(1, 1));
    expect([...centre.mean()]).toEqual([0, 0]);
  });

  it('measures cosine from the mean: what all memories share stops counting', () => {
    // Two memories that share a large common part (the first axis) and differ on the others.
    const a = v(0.9, 0.3, 0);
    const b = v(0.9, 0, 0.3);
    const mean = v(0.9, 0.15, 0.15);
    expect(centredCosine(a, b, v(0, 0, 0))).toBeCloseTo(0.9, 6);
    expect(centredCosine(a, b, mean)).toBeCloseTo(-1, 6);
    expect(centredCosine(a, a, mean)).toBeCloseTo(1, 6);
  });

  it('leaves a zero vector without direction, from any mean', () => {
    const mean = v(0.5, 0.5);
    expect(centredCosine(v(0, 0), v(1, 0), mean)).toBe(0);
    expect(centredCosine(v(1, 0), v(0, 0), mean)).toBe(0);
    expect([...centred(v(0, 0), mean)]).toEqual([0, 0]);
    expect([...centred(v(1, 0), mean)]).toEqual([0.5, -0.5]);
  });
});
