import { describe, expect, it } from 'vitest';
import { ApiError } from '../../common/errors.js';
import { WorkGate } from '../../enclave/api/work-gate.js';

/** A piece of work that ends when the test says so. */
function pending<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => { resolve = r; });
  return { promise, resolve };
}

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('WorkGate', () => {
  it('gives each API key a fair share (finding 7): one key at its share gets 429, another key and keyless calls still get in', async () => {
    const gate = new WorkGate({ maxInFlight: 10, maxInFlightPerKey: 2, timeoutMs: 60_000 });
    const alice = gate.shareOf('alice', true);
    const hold = pending<string>();
    const held = [gate.run(() => hold.promise, Infinity, Infinity, alice), gate.run(() => hold.promise, Infinity, Infinity, alice)];
    const e = await refusal(gate.run(async () => 'x', Infinity, Infinity, alice));
    expect([e.status, e.code, e.headers['retry-after']]).toEqual([429, 'too_many_concurrent_requests', '1']);
    expect(await gate.run(async () => 'bob', Infinity, Infinity, gate.shareOf('bob', true))).toBe('bob');
    expect(await gate.run(async () => 'open', Infinity, Infinity, gate.shareOf(undefined, false))).toBe('open');
    hold.resolve('done');
    await Promise.all(held);
    expect(await gate.run(async () => 'again', Infinity, Infinity, alice)).toBe('again');
    expect(gate.inFlight).toBe(0);
  });

  it('caps requests without a valid key together (hold round two, 4): keyless traffic cannot take the places keyed callers need', async () => {
    const gate = new WorkGate({ maxInFlight: 10, maxInFlightPerKey: 4, maxInFlightKeyless: 2, timeoutMs: 60_000 });
    const hold = pending<string>();
    const keyless = gate.shareOf(undefined, true);
    const held = [gate.run(() => hold.promise, Infinity, Infinity, keyless), gate.run(() => hold.promise, Infinity, Infinity, keyless)];
    const e = await refusal(gate.run(async () => 'x', Infinity, Infinity, gate.shareOf(undefined, true)));
    expect([e.status, e.code]).toEqual([429, 'too_many_concurrent_requests']);
    expect(e.message).toMatch(/without a valid API key/);
    expect(await gate.run(async () => 'keyed', Infinity, Infinity, gate.shareOf('alice', true))).toBe('keyed');
    hold.resolve('done');
    await Promise.all(held);
    expect(gate.heldBy(keyless)).toBe(0);
  });

  it('moves a place to another share (a sealed call, once opened, counts under its inner key), refusing a full one', async () => {
    const gate = new WorkGate({ maxInFlight: 10, maxInFlightPerKey: 1, maxInFlightKeyless: 5, timeoutMs: 60_000 });
    const keyless = gate.shareOf(undefined, true);
    const alice = gate.shareOf('alice', true);
    const hold = pending<string>();
    const first = gate.run(async (place) => { place.moveTo(alice); return hold.promise; }, Infinity, Infinity, keyless);
    expect([gate.heldBy(keyless), gate.heldBy(alice)]).toEqual([0, 1]);
    const e = await refusal(gate.run(async (place) => { place.moveTo(alice); return 'x'; }, Infinity, Infinity, keyless));
    expect([e.status, e.code]).toEqual([429, 'too_many_concurrent_requests']);
    expect(gate.heldBy(keyless)).toBe(0);
    hold.resolve('done');
    await first;
    expect([gate.heldBy(keyless), gate.heldBy(alice), gate.inFlight]).toEqual([0, 0, 0]);
  });

  it('gives work without a deadline or a limit of its own all the time it takes (no 1 ms timeout from setTimeout(Infinity))', async () => {
    const gate = new WorkGate({ maxInFlight: 2, timeoutMs: 60_000 });
    const slow = () => new Promise<string>((resolve) => setTimeout(() => resolve('done'), 30));
    expect(await gate.run(slow, Infinity, Infinity)).toBe('done');
    // A budget past what setTimeout can hold is not clamped to 1 ms either.
    expect(await gate.run(slow, Date.now() + 2 ** 40, 2 ** 40)).toBe('done');
  });

  it('runs up to the cap at once and refuses the next with 503 and Retry-After', async () => {
    const gate = new WorkGate({ maxInFlight: 2, timeoutMs: 60_000 });
    const a = pending<string>();
    const b = pending<string>();
    const ra = gate.run(() => a.promise);
    const rb = gate.run(() => b.promise);
    expect(gate.inFlight).toBe(2);
    const e = await refusal(gate.run(async () => 'c'));
    expect([e.status, e.code, e.headers['retry-after']]).toEqual([503, 'enclave_overloaded', '1']);

    a.resolve('a');
    expect(await ra).toBe('a');
    expect(gate.inFlight).toBe(1);
    expect(await gate.run(async () => 'd')).toBe('d');
    b.resolve('b');
    expect(await rb).toBe('b');
    expect(gate.inFlight).toBe(0);
  });

  it('frees its place when the work fails', async () => {
    const gate = new WorkGate({ maxInFlight: 1, timeoutMs: 60_000 });
    await expect(gate.run(async () => { throw new Error('boom'); })).rejects.toThrow('boom');
    expect(gate.inFlight).toBe(0);
  });

  it('answers 504 when the time runs out, but keeps the place until the work really ends', async () => {
    const gate = new WorkGate({ maxInFlight: 1, timeoutMs: 20 });
    const slow = pending<string>();
    const e = await refusal(gate.run(() => slow.promise));
    expect([e.status, e.type, e.code]).toEqual([504, 'timeout_error', 'enclave_timeout']);
    expect(gate.inFlight).toBe(1);
    expect((await refusal(gate.run(async () => 'x'))).status).toBe(503);
    slow.resolve('late');
    await slow.promise;
    await new Promise((r) => setImmediate(r));
    expect(gate.inFlight).toBe(0);
  });

  it('uses the caller\'s deadline when it is sooner, and does not start work already past it', async () => {
    const gate = new WorkGate({ maxInFlight: 1, timeoutMs: 60_000 });
    let started = false;
    const late = await refusal(gate.run(async () => { started = true; }, Date.now() - 1));
    expect([late.status, late.code, started]).toEqual([504, 'deadline_exceeded', false]);
    const soon = await refusal(gate.run(() => new Promise(() => {}), Date.now() + 20));
    expect(soon.code).toBe('enclave_timeout');
  });
});
