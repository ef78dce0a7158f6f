/**
 * `npm run test:s3-ceph`: the S3 backend's tests against a real server of S3's API, not only
 * the loopback stand-in `npm test` uses. It starts a one-node Ceph on loopback (a monitor, one
 * OSD that keeps its objects in memory, and the RADOS Gateway, Ceph's S3 server, on
 * 127.0.0.1:7480) in a temporary folder, installing Debian's packages first where they are
 * missing (as root), runs against it (S3_TEST_ENDPOINT) the BlobStore contract, the S3 backend's
 * own tests, the whole service on S3 and two enclaves' host stores on one bucket, and stops it.
 * Not part of `npm test`: the packages are some 200 MB and the gateway takes about a minute for
 * the 300-append test. Extra arguments go to vitest.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { repoRoot } from '../common/paths.js';

const PORT = Number(process.env.CEPH_RGW_PORT || 7480);
const MON_PORT = Number(process.env.CEPH_MON_PORT || 6789);
const BUCKET = 'agent-service-test';
const ACCESS = { accessKeyId: 'agent-service-test', secretAccessKey: 'agent-service-test-secret' };
/** Each command the run needs, and the Debian package that has it. */
const COMMANDS: Array<[string, string]> = [['ceph-mon', 'ceph-mon'], ['ceph-osd', 'ceph-osd'], ['radosgw', 'radosgw'], ['monmaptool', 'ceph-base'], ['ceph', 'ceph-common']];
const TESTS = ['test/unit/blob-store.test.ts', 'test/unit/s3-blob-store.test.ts', 'test/integration/s3-host-store.test.ts', 'test/integration/s3-shared-bucket.test.ts'];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const has = (command: string) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0;

function install(): void {
  const missing = [...new Set(COMMANDS.filter(([command]) => !has(command)).map(([, pkg]) => pkg))];
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) throw new Error(`Ceph is not installed: sudo apt-get install -y ${missing.join(' ')}`);
  process.stdout.write(`installing ${missing.join(', ')} with apt-get\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { stdio: 'inherit', env });
}

/** ceph.conf of a one-node cluster: no authentication (loopback only), pools of one copy, objects in memory. */
function conf(dir: string, fsid: string): string {
  return `[global]
fsid = ${fsid}
mon host = 127.0.0.1:${MON_PORT}
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
osd pool default pg num = 8
mon max pg per osd = 1000
osd objectstore = memstore
memstore device bytes = 2147483648
run dir = ${dir}/run
log file = ${dir}/log/$name.log
mon data = ${dir}/mon
osd data = ${dir}/osd
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:${PORT}
rgw data = ${dir}/rgw
`;
}

async function until(what: string, timeoutMs: number, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} not within ${timeoutMs / 1000} s`);
    await sleep(500);
  }
}

async function main(): Promise<number> {
  install();
  const dir = mkdtempSync(join(tmpdir(), 'ceph-s3-'));
  for (const sub of ['log', 'mon', 'osd', 'rgw', 'run']) mkdirSync(join(dir, sub));
  const env = { ...process.env, CEPH_CONF: join(dir, 'ceph.conf') };
  const run = (command: string, args: string[]) => execFileSync(command, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const daemons: ChildProcess[] = [];
  // -f: in the foreground, so each is this process's child and is stopped with it.
  const daemon = (command: string, args: string[]) => daemons.push(spawn(command, [...args, '-f'], { env, stdio: 'ignore' }));
  try {
    const fsid = randomUUID();
    writeFileSync(join(dir, 'ceph.conf'), conf(dir, fsid));
    run('monmaptool', ['--create', '--clobber', '--fsid', fsid, '--addv', 'a', `[v1:127.0.0.1:${MON_PORT}]`, join(dir, 'monmap')]);
    run('ceph-mon', ['--id', 'a', '--mkfs', '--monmap', join(dir, 'monmap'), '--keyring', '/dev/null']);
    daemon('ceph-mon', ['--id', 'a']);
    const osd = run('ceph', ['osd', 'create']).trim();
    run('ceph', ['osd', 'crush', 'add', `osd.${osd}`, '1', 'root=default', 'host=localhost']);
    run('ceph-osd', ['--id', osd, '--mkfs']);
    daemon('ceph-osd', ['--id', osd]);
    await until('the OSD up', 60_000, () => run('ceph', ['osd', 'stat']).includes('1 up'));
    daemon('radosgw', ['--id', 'rgw']);
    await until(`the RADOS Gateway on 127.0.0.1:${PORT}`, 120_000, () => fetch(`http://127.0.0.1:${PORT}/`).then(() => true, () => false));
    run('radosgw-admin', ['user', 'create', '--uid=agent-service-test', '--display-name=agent-service-test', `--access-key=${ACCESS.accessKeyId}`, `--secret-key=${ACCESS.secretAccessKey}`]);
    const s3 = new S3Client({ endpoint: `http://127.0.0.1:${PORT}`, forcePathStyle: true, region: 'us-east-1', credentials: ACCESS });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    s3.destroy();
    const version = run('ceph', ['--version']).trim();
    process.stdout.write(`${version}: RADOS Gateway on http://127.0.0.1:${PORT}, bucket ${BUCKET}\n`);
    const vitest = spawnSync(join(repoRoot, 'node_modules', '.bin', 'vitest'), ['run', ...TESTS, ...process.argv.slice(2)], {
      cwd: repoRoot,
      stdio: 'inherit',
      env: {
        ...process.env,
        S3_TEST_ENDPOINT: `http://127.0.0.1:${PORT}`, S3_TEST_BUCKET: BUCKET,
        AWS_ACCESS_KEY_ID: ACCESS.accessKeyId, AWS_SECRET_ACCESS_KEY: ACCESS.secretAccessKey, AWS_REGION: 'us-east-1',
      },
    });
    return vitest.status ?? 1;
  } finally {
    for (const child of daemons.reverse()) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then((code) => process.exit(code), (err: unknown) => {
  process.stderr.write(`test:s3-ceph: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
