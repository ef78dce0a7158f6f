import type { MemoryRecord } from './types.js';

/**
 * A time the API was given (RFC 3339, or a date alone: schemas.ts `instant`) as the enclave
 * keeps it: `Date.toISOString`, UTC to the millisecond, so times compare as strings.
 * Undefined when it names no real time (February 30th, hour 25).
 */
export function normalizeInstant(text: string): string | undefined {
  const [, year, month, day] = /^(\d{4})-(\d{2})-(\d{2})/.exec(text) ?? [];
  if (!year) return undefined;
  const date = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)));
  if (date.getUTCFullYear() !== Number(year) || date.getUTCMonth() !== Number(month) - 1 || date.getUTCDate() !== Number(day)) return undefined;
  const ms = Date.parse(text.replace(/^(.{10})[Tt ]/, '$1T').replace(/z$/, 'Z'));
  return Number.isFinite(ms) ? new Date(ms).toISOString() : undefined;
}

/** When a memory's content happened: its occurred_at, or for a record stored before that existed, its created_at. */
export const occurredAt = (record: MemoryRecord): string => record.occurred_at ?? new Date(record.created_at * 1000).toISOString();

/** A period of `since` and `until` (normalized; both included; either may be open). */
export interface Period {
  since?: string;
  until?: string;
}

export const isOpen = (period: Period): boolean => period.since === undefined && period.until === undefined;

export function inPeriod(record: MemoryRecord, { since, until }: Period): boolean {
  const at = occurredAt(record);
  return (since === undefined || at >= since) && (until === undefined || at <= until);
}
