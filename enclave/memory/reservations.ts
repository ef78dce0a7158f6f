import type { Usage } from './admission.js';

/** What a change in flight will add once applied: to the enclave's usage, and per tenant. */
export interface Reservation {
  usage: Usage;
  /** Memories it adds, per tenant. */
  memories?: ReadonlyMap<string, number>;
  /** New distinct terms it adds, per tenant. */
  terms?: ReadonlyMap<string, number>;
}

const NOTHING: Usage = { tenants: 0, memories: 0, storedBytes: 0, terms: 0 };

/**
 * What adds and updates admitted but not yet applied will add. They count towards every
 * limit from admission on, so two changes in flight cannot pass a limit together that each
 * passes alone; a reservation ends when its change is applied (then it counts as applied)
 * or fails, never both, so nothing is counted twice.
 */
export class Reservations {
  private readonly total: Usage = { ...NOTHING };
  private readonly memories = new Map<string, number>();
  private readonly terms = new Map<string, number>();

  /** Holds `reservation` until the returned function is called (once or more: only the first counts). */
  reserve(reservation: Reservation): () => void {
    this.add(reservation, 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.add(reservation, -1);
    };
  }

  /** `applied` with every reservation added: what admission adds to. */
  plus(applied: Usage): Usage {
    return {
      tenants: applied.tenants + this.total.tenants,
      memories: applied.memories + this.total.memories,
      storedBytes: applied.storedBytes + this.total.storedBytes,
      terms: applied.terms + this.total.terms,
    };
  }

  /** Memories reserved for the tenant: 0, or adds to it are in flight. */
  memoriesOf(tenantId: string): number {
    return this.memories.get(tenantId) ?? 0;
  }

  /** New distinct terms reserved for the tenant. */
  termsOf(tenantId: string): number {
    return this.terms.get(tenantId) ?? 0;
  }

  private add(reservation: Reservation, sign: 1 | -1): void {
    this.total.tenants += sign * reservation.usage.tenants;
    this.total.memories += sign * reservation.usage.memories;
    this.total.storedBytes += sign * reservation.usage.storedBytes;
    this.total.terms += sign * reservation.usage.terms;
    for (const [tenantId, count] of reservation.memories ?? []) bump(this.memories, tenantId, sign * count);
    for (const [tenantId, count] of reservation.terms ?? []) bump(this.terms, tenantId, sign * count);
  }
}

/** Adds `delta` to a per-tenant count, dropping it at 0. */
function bump(counts: Map<string, number>, tenantId: string, delta: number): void {
  const count = (counts.get(tenantId) ?? 0) + delta;
  if (count === 0) counts.delete(tenantId);
  else counts.set(tenantId, count);
}
