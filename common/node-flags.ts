/**
 * Flags every process of the service runs node with: `npm start`'s supervisor, the tests'
 * and benchmarks' launcher, the enclave image's entrypoint and the host's systemd units
 * (deploy/; test/unit/deploy-scripts.test.ts checks they carry the same).
 *
 * A 32 MiB young generation, so what a request allocates dies young instead of being promoted
 * (docs/performance-log.md#the-query-path-part-two-2026-11-25-later-still).
 * An old generation that grows to twice its live size, so a loaded enclave does not stop for a
 * full mark-compact every few seconds (docs/performance-log.md#a-newer-machine-and-a-full-gc-every-few-seconds-2026-11-27-night).
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32', '--heap-growing-percent=100'];
