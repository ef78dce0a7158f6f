import { basename, dirname } from 'node:path';
import { NODE_FLAGS } from '../../common/node-flags.js';
import { enclaveHeapFlag } from '../../enclave/heap-flag.js';

/**
 * The arguments node runs one of the service's processes with (dist/<process>/main.js):
 * the flags every process shares, and for the enclave the heap its capacity settings in
 * `env` need. `npm start`, the benchmarks and the tests all launch through here.
 */
export function nodeArgs(script: string, env: NodeJS.ProcessEnv, extra: readonly string[] = []): string[] {
  const isEnclave = basename(dirname(script)) === 'enclave' && basename(script) === 'main.js';
  return [...NODE_FLAGS, ...(isEnclave ? [enclaveHeapFlag(env)] : []), ...extra, script];
}
