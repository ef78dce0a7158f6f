import { describe, expect, it } from 'vitest';
import { withContext, type CallContext } from '../../enclave/api/resolve-call.js';
import { NO_METER } from '../../enclave/memory/meter.js';
import type { Place } from '../../enclave/api/work-gate.js';

/** A context as the Exchange stream makes it: its signal made on first read (grpc-server.ts). */
function exchangeContext(): { context: CallContext; reads: () => number; controller: AbortController } {
  const controller = new AbortController();
  let reads = 0;
  const context: CallContext = { deadline: 1_000, get signal() { reads++; return controller.signal; } };
  return { context, reads: () => reads, controller };
}

const place: Place = { moveTo: () => {} };

describe('withContext', () => {
  it('adds a place or a meter without reading the signal', () => {
    const { context, reads } = exchangeContext();
    const placed = withContext(context, { place });
    const metered = withContext(placed, { meter: NO_METER });
    expect(reads()).toBe(0);
    expect([metered.deadline, metered.place, metered.meter]).toEqual([1_000, place, NO_METER]);
  });

  it('still gives the caller\'s signal when it is asked for, aborted when the call is cancelled', () => {
    const { context, reads, controller } = exchangeContext();
    const placed = withContext(withContext(context, { place }), { meter: NO_METER });
    controller.abort();
    expect(placed.signal?.aborted).toBe(true);
    expect(reads()).toBe(1);
  });

  it('without a context: nothing but what it adds', () => {
    const placed = withContext(undefined, { place });
    expect([placed.deadline, placed.place, placed.meter, placed.signal]).toEqual([undefined, place, undefined, undefined]);
  });
});
