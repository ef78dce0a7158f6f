/**
 * Flags every process of the service runs node with: `npm start`'s supervisor, the tests'
 * and benchmarks' launcher, the enclave image's entrypoint and the host's systemd units
 * (deploy/; test/unit/deploy-scripts.test.ts checks they carry the same).
 *
 * A 32 MiB young generation (V8's default is 16 MiB on 64-bit): under load the proxy and
 * the enclave allocate per request what dies within milliseconds, and with the default
 * more of it outlived two scavenges and was promoted, so the proxy ran a full mark-compact
 * about every second (steps of up to 12 ms, seen with --trace-gc). On a 100k-memory tenant
 * at 16 clients, four runs alternating with and without: 1,534 and 1,429 queries/s at p99
 * 20.7 and 19.6 ms, against 1,273 and 1,321 at 26.1 and 24.0 ms. It costs at most a few
 * tens of MiB of RSS per process.
 *
 * The old generation may grow to twice its live size before a full mark-compact (V8 picks
 * the factor itself, and picked about 1.4 for the enclave's 95 MiB heap on a 100k-memory
 * tenant). With that headroom, and incremental marking starting some 38 MiB before the limit,
 * the enclave under 16 clients began a mark-compact after every 3-5 MiB promoted: one every
 * 2-3 s, each 3-10 ms of pause plus marking steps and helper threads on the two cores, and a
 * query caught in one took 25-40 ms. Four runs alternating, four rounds of 10,000 queries
 * each (docs/performance.md): 9-11 enclave mark-compacts a run and p99 11.1-15.0 ms without,
 * none and p99 8.8-11.1 ms with. The 1M-memory store's heap peaked as before (about 450-490
 * MiB), its RSS too.
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32', '--heap-growing-percent=100'];
