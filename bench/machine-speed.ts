/**
 * A fixed workload, timed at the start and at the end of a benchmark run. The development
 * machine's two cores are shared with other jobs: the same code's figures, and the time of
 * this very workload, move 1.5–2.5× within an hour. So two runs compare through it (a run
 * whose reference took twice as long ran on a machine about half as fast), not by their
 * figures alone; and a run whose start and end differ much ran while the machine changed.
 */
import { generateKeyPairSync, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';

export interface MachineSpeed {
  at: string;
  /** One Ed25519 signature of 200 bytes through OpenSSL (node:crypto), µs: CPU speed. */
  ed25519SignUs: number;
  /** One read at a random place in 16 MiB, ns: memory latency, where much of a search's time goes. */
  randomReadNs: number;
}

const SIGNATURES = 5_000;
const TABLE_FLOATS = 4 * 1024 * 1024; // 16 MiB: beyond the caches
const READS = 8 * 1024 * 1024;

export function machineSpeed(): MachineSpeed {
  const { privateKey } = generateKeyPairSync('ed25519');
  const message = Buffer.alloc(200, 7);
  for (let i = 0; i < SIGNATURES / 10; i++) sign(null, message, privateKey);
  let start = performance.now();
  for (let i = 0; i < SIGNATURES; i++) sign(null, message, privateKey);
  const ed25519SignUs = ((performance.now() - start) * 1000) / SIGNATURES;

  const table = new Float32Array(TABLE_FLOATS).fill(1);
  let x = 1;
  let sum = 0;
  start = performance.now();
  for (let i = 0; i < READS; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) | 0; // a linear congruential walk: no pattern to prefetch
    sum += table[(x >>> 10) & (TABLE_FLOATS - 1)];
  }
  const randomReadNs = ((performance.now() - start) * 1e6) / READS;
  if (sum !== READS) throw new Error('machine speed: the read loop lost reads'); // and keeps the loop from being optimised away
  return { at: new Date().toISOString(), ed25519SignUs: round(ed25519SignUs, 1), randomReadNs: round(randomReadNs, 1) };
}

export function describeSpeed({ ed25519SignUs, randomReadNs }: MachineSpeed): string {
  return `an Ed25519 signature ${ed25519SignUs} µs, a random read ${randomReadNs} ns`;
}

/**
 * The processor, as far as the machine tells: a virtual machine's model name is often just
 * "AMD EPYC", the same for generations whose speed differs twofold, so on Linux the family and
 * model numbers from /proc/cpuinfo are added (family 23 is Zen 2, 25 Zen 3 or 4, 26 Zen 5).
 */
export function cpuIdentity(): string {
  const name = cpus()[0]?.model ?? 'unknown';
  let cpuinfo: string;
  try {
    cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    return name;
  }
  const field = (key: string) => new RegExp(`^${key}\\s*:\\s*(.+)$`, 'm').exec(cpuinfo)?.[1]?.trim();
  const family = field('cpu family');
  const model = field('model');
  return family && model ? `${name}, family ${family} model ${model}` : name;
}

function round(value: number, digits: number): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}
