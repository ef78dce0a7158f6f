import type { FilterValue, MetadataFilter } from '../../common/schemas.js';

/**
 * A predicate over a memory's metadata from a search's `filters`: every key must match,
 * by equality or, for `{"$in": [...]}`, by membership. A key the memory lacks matches only
 * `null`. Equality is strict: "1" does not match 1.
 */
export function metadataMatcher(filters: MetadataFilter): (metadata: Readonly<Record<string, FilterValue>>) => boolean {
  const rules = Object.entries(filters).map(([key, rule]): [string, (value: FilterValue) => boolean] => {
    if (rule !== null && typeof rule === 'object') {
      const allowed = new Set(rule.$in);
      return [key, (value) => allowed.has(value)];
    }
    return [key, (value) => value === rule];
  });
  return (metadata) => rules.every(([key, matches]) => matches(Object.hasOwn(metadata, key) ? metadata[key] : null));
}
