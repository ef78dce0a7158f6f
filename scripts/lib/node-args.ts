import { basename, dirname } from 'node:path';
import { NODE_FLAGS } from '../../common/node-flags.js';
import { enclaveHeapFlag } from '../../enclave/heap-flag.js';

/**
 * The arguments node runs one of the service's processes with (dist/<process>/main.js):
 * the flags every process shares, and for the enclave the heap its capacity settings in
 * `env` need. `npm start`, `start:cluster`, the benchmarks and the tests all launch through
 * here. CPU_PROF_DIR in `env`: each process writes a V8 CPU profile there when it stops
 * (node refuses --cpu-prof in NODE_OPTIONS).
 */
export function nodeArgs(script: string, env: NodeJS.ProcessEnv, extra: readonly string[] = []): string[] {
  const isEnclave = basename(dirname(script)) === 'enclave' && basename(script) === 'main.js';
  const profile = env.CPU_PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${env.CPU_PROF_DIR}`] : [];
  return [...NODE_FLAGS, ...(isEnclave ? [enclaveHeapFlag(env)] : []), ...profile, ...extra, script];
}
