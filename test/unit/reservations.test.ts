import { describe, expect, it } from 'vitest';
import { Reservations } from '../../enclave/memory/reservations.js';

const applied = { tenants: 2, memories: 10, storedBytes: 1000, terms: 50 };

describe('reservations of changes in flight', () => {
  it('count towards usage and per tenant until released, and a second release gives nothing back twice', () => {
    const reservations = new Reservations();
    const first = reservations.reserve({ usage: { tenants: 1, memories: 3, storedBytes: 300, terms: 7 }, memories: new Map([['t', 3]]), terms: new Map([['t', 7]]) });
    const second = reservations.reserve({ usage: { tenants: 0, memories: 0, storedBytes: 20, terms: 2 }, terms: new Map([['t', 2]]) });
    expect(reservations.plus(applied)).toEqual({ tenants: 3, memories: 13, storedBytes: 1320, terms: 59 });
    expect([reservations.memoriesOf('t'), reservations.termsOf('t'), reservations.memoriesOf('u')]).toEqual([3, 9, 0]);
    first();
    first();
    expect(reservations.plus(applied)).toEqual({ tenants: 2, memories: 10, storedBytes: 1020, terms: 52 });
    expect([reservations.memoriesOf('t'), reservations.termsOf('t')]).toEqual([0, 2]);
    second();
    expect(reservations.plus(applied)).toEqual(applied);
    expect(reservations.termsOf('t')).toBe(0);
  });
});
