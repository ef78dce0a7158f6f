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
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32'];
