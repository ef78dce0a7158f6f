/**
 * The end of a switch over a union: a member the switch forgets is a compile error here, and
 * a value from outside the types (a foreign writer, a bug) a thrown error, never a fall-through.
 */
export function unreachable(value: never, what: string): never {
  throw new Error(`unknown ${what}: ${String((value as { type?: unknown } | null)?.type)}`);
}
