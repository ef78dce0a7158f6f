/**
 * The V8 heap limit the enclave is started with: what its capacity settings admit
 * (memory/heap-budget.ts), so that an add is refused before the heap runs out rather than
 * the process dying of it, and again at every replay. A heap limit cannot be changed once
 * node runs, so every launcher passes it: `npm start`, the benchmarks, the tests and the
 * Nitro image's entrypoint (through `node dist/enclave/heap-flag.js`, which prints it).
 */
import { fileURLToPath } from 'node:url';
import { heapNeeded } from './memory/heap-budget.js';
import { enclaveSettings } from './config.js';

/** `--max-old-space-size=<MiB>` for the capacity in `env`; defaults where a value does not parse (the enclave reports it). */
export function enclaveHeapFlag(env: NodeJS.ProcessEnv = process.env): string {
  const read = (setting: { parse(raw: string | undefined): number }, name: string) => {
    try {
      return setting.parse(env[name]);
    } catch {
      return setting.parse(undefined);
    }
  };
  const needed = heapNeeded({
    maxTenants: read(enclaveSettings.maxTenants, 'MAX_TENANTS'),
    maxMemories: read(enclaveSettings.maxMemories, 'MAX_MEMORIES'),
    maxStoredBytes: read(enclaveSettings.maxStoredBytes, 'MAX_STORED_BYTES'),
    maxTerms: read(enclaveSettings.maxTerms, 'MAX_TERMS'),
  });
  return `--max-old-space-size=${Math.ceil(needed / 1024 ** 2)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.stdout.write(`${enclaveHeapFlag()}\n`);
