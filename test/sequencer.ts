import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Runs the test files longest first, by the durations recorded in test/durations.json, so
 * that no worker is left running one long file alone at the end while the other idles.
 * vitest orders by its own cache of the last run's durations, but CI runs a fresh clone
 * without one, and then vitest runs the largest files first: a short file of 80 lines that
 * starts services for 90 s came last. A file not in the list runs first (a new file may be
 * long); refresh the list with `node scripts/test-durations.js <vitest json report>`.
 */
export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const recorded = JSON.parse(readFileSync(join(root, 'test/durations.json'), 'utf8')) as Record<string, number>;
    const seconds = (file: TestSpecification) => recorded[file.moduleId.slice(root.length + 1)] ?? Infinity;
    return [...files].sort((a, b) => seconds(b) - seconds(a));
  }
}
