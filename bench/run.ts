/**
 * `npm run bench`: runs each benchmark in turn and prints its figures. Add a benchmark by
 * adding a line to the list. `npm run bench -- --quick` runs smaller sizes; `-- scale`
 * (or another name) runs only the benchmarks whose name starts with it.
 */
const args = process.argv.slice(2);
if (args.includes('--quick')) process.env.BENCH_QUICK = '1';
const only = args.filter((a) => !a.startsWith('--'));
const benches: Array<[name: string, load: () => Promise<{ run(): Promise<void> }>]> = [
  ['memory: embedding single vs batched, query latency as a tenant grows', () => import('./memory.js')],
  ['chat: the two-process hop, memory augmentation, streamed chunk relay, offline responder', () => import('./chat.js')],
  ['storage: durable memory writes (group commit vs one fsync per write), snapshot and recovery', () => import('./storage.js')],
  ['scale: the real processes under load, many tenants, large tenants, recall against exact search and peers (writes bench/results.json)', () => import('./scale.js')],
  ['gateway: what privacy costs, a 100k-memory query and a streamed chat plain, through the sdk plain and sealed, and through agent-gateway (adds to bench/results.json)', () => import('./gateway.js')],
  ['writes: single-item ingest and the recovery of a million memories, this build against BENCH_BASELINE (another built checkout) in alternating rounds (adds to bench/results.json)', () => import('./writes.js')],
  ['ingest-cpu: single-item ingest at 16 clients, the CPU each process spends a write, this build against BENCH_BASELINE in alternating rounds (BENCH_NEW_TENANTS=1: each write to a new tenant, p99 against 50 ms, adds to bench/results.json)', () => import('./ingest-cpu.js')],
  ['freshness: what freshness across enclaves costs a single write (WITNESSES=1 against 0 on a pair of enclaves, and one enclave with no peers)', () => import('./freshness.js')],
  ['cluster: three enclaves placed through etcd against one, the same data: query throughput and CPU a query, single-item ingest, a planned move under writes, failover after SIGKILL (adds to bench/results.json)', () => import('./cluster.js')],
  ['open: an enclave restarted on a store holding a 99k-memory tenant, this build against BENCH_BASELINE on the same data: time and CPU until it answers', () => import('./open.js')],
  ['export: a 100k-memory tenant exported and imported through the real processes, the enclave\'s memory while it streams (adds to bench/results.json)', () => import('./export.js')],
];

if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(
    'usage: npm run bench [-- [--quick] [name ...]]\n\n' +
      'Runs every benchmark below in turn, or only those whose name starts with a given name.\n' +
      '--quick runs smaller sizes. Environment: BENCH_BASELINE=<another built checkout> for the\n' +
      'benchmarks that compare against one; see docs/performance.md.\n\n' +
      benches.map(([name]) => `  ${name}\n`).join(''),
  );
  process.exit(0);
}
const unknown = args.filter((a) => a.startsWith('--') && a !== '--quick');
if (unknown.length > 0) {
  process.stderr.write(`bench: unknown option ${unknown.join(' ')} (try --help)\n`);
  process.exit(2);
}
const unmatched = only.filter((prefix) => !benches.some(([name]) => name.startsWith(prefix)));
if (unmatched.length > 0) {
  process.stderr.write(`bench: no benchmark named ${unmatched.join(', ')} (try --help)\n`);
  process.exit(2);
}

for (const [name, load] of benches) {
  if (only.length > 0 && !only.some((prefix) => name.startsWith(prefix))) continue;
  process.stdout.write(`\n## ${name}\n\n`);
  await (await load()).run();
}
