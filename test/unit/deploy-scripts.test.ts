/**
 * What of deploy/ can run off AWS (issue 13): every shell script passes shellcheck; the
 * systemd units and vsock-proxy allowlist render from the operator's values and refuse
 * unsafe ones; enclave-run.sh starts, watches and stops an enclave through a stand-in
 * nitro-cli; host-setup.sh and release.sh check their inputs and, with --dry-run, say what
 * they would run.
 */
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '../../common/node-flags.js';
import { ensureCommand } from '../helpers/system-package.js';

const repo = resolve(import.meta.dirname, '../..');
const deploy = join(repo, 'deploy');
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'deploy-scripts-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

function sh(script: string, args: string[], env: NodeJS.ProcessEnv = {}, cwd = repo): SpawnSyncReturns<string> {
  return spawnSync(join(deploy, script), args, { cwd, encoding: 'utf8', env: { ...process.env, ...env } });
}

describe('shellcheck', () => {
  it('passes on every script in deploy/', async () => {
    const shellcheck = ensureCommand('shellcheck', 'shellcheck');
    const scripts = [...(await readdir(deploy)).filter((f) => f.endsWith('.sh')).map((f) => join(deploy, f)), join(deploy, 'kmstool/build.sh')];
    expect(scripts.length).toBeGreaterThanOrEqual(9);
    const result = spawnSync(shellcheck, scripts, { encoding: 'utf8' });
    expect(result.stdout).toBe('');
    expect(result.status).toBe(0);
  });
});

describe('install-units.sh', () => {
  const base = ['--eif', '/opt/agent/agent-enclave.eif', '--region', 'eu-west-1'];
  async function render(extra: string[], name: string) {
    const out = join(dir, name, 'units');
    const etc = join(dir, name, 'etc');
    const result = sh('install-units.sh', [...base, ...extra, '--out', out, '--etc-dir', etc]);
    return { result, out, etc, unit: (file: string) => readFile(join(out, file), 'utf8') };
  }

  it('renders a unit for every host piece, the model proxy and its allowlist entry included', async () => {
    const { result, out, etc, unit } = await render(
      ['--model-url', 'https://api.openai.com/v1', '--cid', '20', '--cpus', '4', '--memory-mib', '8192', '--node', '/usr/bin/node-20', '--app-dir', '/opt/agent-service'],
      'with-model',
    );
    expect(result.stderr).not.toMatch(/error|refus/i);
    expect(result.status).toBe(0);
    expect((await readdir(out)).sort()).toEqual([
      'agent-credentials.service', 'agent-enclave.service', 'agent-host-bridge.service', 'agent-host-log-bridge.service', 'agent-host-log.service',
      'agent-host-store-bridge.service', 'agent-host-store.service', 'agent-model-proxy.service', 'agent-proxy.service', 'agent.target',
    ]);
    expect(await unit('agent-enclave.service')).toContain(
      'ExecStart=/opt/agent-service/deploy/enclave-run.sh --eif /opt/agent/agent-enclave.eif --cid 20 --cpus 4 --memory-mib 8192',
    );
    expect(await unit('agent-enclave.service')).toMatch(/^Requires=nitro-enclaves-allocator.service$/m);
    expect(await unit('agent-host-bridge.service')).toContain('ExecStart=/opt/agent-service/deploy/host-bridge.sh 20');
    expect(await unit('agent-model-proxy.service')).toContain('ExecStart=/usr/bin/vsock-proxy 8001 api.openai.com 443 --config');
    expect(await unit('agent-host-store.service')).toContain(`ExecStart=/usr/bin/node-20 ${NODE_FLAGS.join(' ')} dist/host-store/main.js`);
    expect(await unit('agent-proxy.service')).toContain(`ExecStart=/usr/bin/node-20 ${NODE_FLAGS.join(' ')} dist/proxy/main.js`);
    expect(await unit('agent.target')).toContain('agent-model-proxy.service agent-enclave.service');
    for (const file of await readdir(out)) {
      const text = await unit(file);
      expect(text, file).not.toMatch(/@[A-Z_]+@/);
      if (file.endsWith('.service')) expect(text, file).toMatch(/^Restart=always$/m);
    }
    expect(await readFile(join(etc, 'vsock-proxy.yaml'), 'utf8')).toContain(
      '- {address: kms.eu-west-1.amazonaws.com, port: 443}\n- {address: api.openai.com, port: 443}\n',
    );
    expect(await readFile(join(etc, 'proxy.env'), 'utf8')).toContain('TLS_CERT=');
  });

  it('leaves the model proxy out without --model-url, and keeps an existing proxy.env', async () => {
    const { result, out, etc, unit } = await render([], 'no-model');
    expect(result.status).toBe(0);
    expect(await readdir(out)).not.toContain('agent-model-proxy.service');
    expect(await unit('agent.target')).not.toContain('model');
    expect(await unit('agent-enclave.service')).toMatch(/^After=.*agent-host-store-bridge.service agent-host-log-bridge.service$/m);
    await writeFile(join(etc, 'proxy.env'), 'PORT=8443\n');
    expect(sh('install-units.sh', [...base, '--out', out, '--etc-dir', etc]).status).toBe(0);
    expect(await readFile(join(etc, 'proxy.env'), 'utf8')).toBe('PORT=8443\n');
  });

  it('units pass `systemd-analyze verify`, apart from the programs and AWS units this machine lacks', async (context) => {
    if (spawnSync('sh', ['-c', 'command -v systemd-analyze']).status !== 0) {
      context.skip(); // systemd is not part of every CI image; the rendering checks above still run
      return;
    }
    const { out } = await render(['--model-url', 'https://api.openai.com/v1', '--node', process.execPath], 'verify');
    const result = spawnSync('systemd-analyze', ['verify', ...(await readdir(out)).map((f) => join(out, f))], { encoding: 'utf8' });
    const unexpected = `${result.stdout}${result.stderr}`.split('\n').filter((line) => line.trim() !== '').filter(
      (line) => !/nitro-enclaves-[a-z-]+\.service not found|\/usr\/bin\/vsock-proxy is not executable/.test(line),
    );
    expect(unexpected).toEqual([]);
  });

  it.each([
    [['--region', 'eu-west-1'], '--eif is required'],
    [['--eif', '/x.eif'], '--region is required'],
    [[...base, '--cpus', '3'], 'even number'],
    [[...base, '--cid', '3'], '--cid must be a number of at least 4'],
    [[...base, '--eif', '/opt/my enclave.eif'], '--eif must be an absolute path'],
    [[...base, '--app-dir', '/opt/x\nExecStartPre=/bin/evil'], '--app-dir must be an absolute path'],
    [[...base, '--model-url', 'http://api.openai.com/v1'], '--model-url must be https://'],
    [[...base, '--model-url', 'https://10.0.0.1/v1'], 'needs a host name, not an address'],
    [[...base, '--region', 'eu-west-1|x'], '--region must look like eu-west-1'],
    [[...base, '--bogus', 'x'], 'unknown option --bogus'],
  ])('refuses %j', (args, message) => {
    const result = sh('install-units.sh', [...args, '--out', join(dir, 'refused'), '--etc-dir', join(dir, 'refused-etc')]);
    expect(result.stderr).toContain(message);
    expect(result.status).toBe(2);
  });
});

describe('enclave-entrypoint.sh', () => {
  it('starts the enclave process with the flags every process of the service runs with (common/node-flags.ts) and the heap its capacity needs', async () => {
    const script = await readFile(join(deploy, 'enclave-entrypoint.sh'), 'utf8');
    const launches = script.split('\n').filter((line) => /^\s*(heap_flag=|(LOG_SINK_FD=3 )?node\s.*dist\/)/.test(line));
    expect(launches).toEqual(['heap_flag="$(node dist/enclave/heap-flag.js)"', `LOG_SINK_FD=3 node ${NODE_FLAGS.join(' ')} "$heap_flag" dist/enclave/main.js 3>&"$BOOT_LOG_FD" &`]);
  });

  it('prints the heap flag the capacity settings need (what npm start and the tests pass too)', () => {
    const flag = (env: Record<string, string>) => spawnSync(process.execPath, [join(repo, 'dist/enclave/heap-flag.js')], { env: { ...process.env, ...env }, encoding: 'utf8' }).stdout.trim();
    const defaults = flag({});
    expect(defaults).toMatch(/^--max-old-space-size=\d+$/);
    expect(flag({ MAX_MEMORIES: '10000', MAX_STORED_BYTES: '10000000', MAX_TERMS: '10000' })).not.toBe(defaults);
    expect(Number(flag({ MAX_MEMORIES: '10000', MAX_STORED_BYTES: '10000000', MAX_TERMS: '10000' }).split('=')[1])).toBeLessThan(Number(defaults.split('=')[1]));
  });
});

describe('enclave-entrypoint.sh in a network namespace of its own (lo down, as in an enclave)', () => {
  it('gives lo 127.0.0.1/8, reports each boot stage to the host, and the reason it stops, before it exits', async () => {
    ensureCommand('socat', 'socat');
    const root = join(dir, 'entrypoint');
    spawnSync('mkdir', ['-p', root]);
    // The host's end of the log channel, on a Unix socket (no vsock here, and a new network namespace has no route out).
    const socket = join(root, 'log.sock');
    let received = '';
    const server = createServer((c) => c.on('data', (d: Buffer) => { received += d.toString(); }));
    await new Promise<void>((done) => server.listen(socket, done));
    // As the 4.14 enclave kernel left it: lo up but without 127.0.0.1/8 (connect() then fails with ENETUNREACH).
    const asOldKernel = 'ip link set dev lo up && ip addr del 127.0.0.1/8 dev lo && exec "$0"';
    const child = spawn('unshare', ['-n', 'sh', '-c', asOldKernel, join(deploy, 'enclave-entrypoint.sh')], {
      env: {
        ...process.env, TEE_MODE: 'nitro', AWS_REGION: 'eu-west-1', BOOT_LOG_SH: join(deploy, 'boot-log.sh'), BOOT_LOG_CONNECT: `UNIX-CONNECT:${socket}`,
        NSM_HELPER: '/bin/false', CREDENTIALS_ATTEMPTS: '1',
      },
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
    const status = await new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
    server.close();
    expect(stderr).toContain('no credentials from the parent');
    expect(status).toBe(1);
    const lines = received.trim().split('\n').map((line) => JSON.parse(line) as { stage?: string; msg: string; level: number });
    expect(lines.filter((l) => l.stage).map((l) => l.stage)).toEqual(['entrypoint', 'loopback', 'failed']);
    expect(lines.find((l) => l.level === 50)?.msg).toBe('no credentials from the parent on vsock port 8002');
    expect(lines.map((l) => l.msg)).toContain('warning: could not seed the entropy pool from the NSM; the kernel\'s own sources only');
  });
});

describe('enclave-run.sh with a stand-in nitro-cli', () => {
  /** A nitro-cli that logs its calls and reports the enclaves listed in a state file. */
  async function fakeNitroCli(name: string, startSeconds = 0) {
    const root = join(dir, name);
    spawnSync('mkdir', ['-p', root]);
    const state = join(root, 'enclaves.json');
    const calls = join(root, 'calls.log');
    const cli = join(root, 'nitro-cli');
    await writeFile(state, JSON.stringify([{ EnclaveName: 'agent-enclave', EnclaveID: 'i-old-enc1', State: 'RUNNING' }]));
    await writeFile(cli, `#!/usr/bin/env bash
echo "$*" >> '${calls}'
case "$1" in
  describe-enclaves) cat '${state}' ;;
  run-enclave) sleep ${startSeconds}
               echo '[{"EnclaveName":"agent-enclave","EnclaveID":"i-new-enc2","State":"RUNNING"}]' > '${state}'
               echo '{"EnclaveName":"agent-enclave","EnclaveID":"i-new-enc2","EnclaveCID":16}' ;;
  terminate-enclave) echo '{"Terminated":true}' ;;
esac
`);
    await chmod(cli, 0o755);
    await writeFile(join(root, 'agent.eif'), 'not really an image');
    return { cli, state, calls, eif: join(root, 'agent.eif') };
  }

  function start(cli: string, eif: string, env: NodeJS.ProcessEnv = {}) {
    const child = spawn(join(deploy, 'enclave-run.sh'), ['--eif', eif, '--cid', '16', '--cpus', '2', '--memory-mib', '4096'], {
      env: { ...process.env, NITRO_CLI: cli, ENCLAVE_POLL_SECONDS: '0.05', ENCLAVE_STATE_DIR: join(dirname(cli), 'state'), ...env },
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
    const said = (text: string) => new Promise<void>((done) => {
      const look = () => (stderr.includes(text) ? done() : setTimeout(look, 20));
      look();
    });
    return { child, exited, said, stderr: () => stderr };
  }

  it('terminates a stale enclave of its name, starts one with the pinned CID, and exits 1 when it is gone', async () => {
    const fake = await fakeNitroCli('gone');
    const run = start(fake.cli, fake.eif);
    await run.said('enclave i-new-enc2 running (CID 16, 2 vCPUs, 4096 MiB)');
    await writeFile(fake.state, '[]'); // the enclave ended (Node exited, or a bridge did)
    expect(await run.exited).toBe(1);
    expect(run.stderr()).toContain("enclave i-new-enc2 is gone (state 'none')");
    const calls = await readFile(fake.calls, 'utf8');
    expect(calls).toContain('terminate-enclave --enclave-id i-old-enc1');
    expect(calls).toContain('run-enclave --eif-path');
    expect(calls).toContain('--cpu-count 2 --memory 4096 --enclave-cid 16 --enclave-name agent-enclave');
  });

  it('backs off exponentially after quick failures, so a crash loop does not call KMS every few seconds, and forgets them once an enclave stays up', async () => {
    const fake = await fakeNitroCli('backoff');
    // A tiny base delay: the test checks what is waited, not how long it takes.
    const quick = { ENCLAVE_BACKOFF_SECONDS: '0.01', ENCLAVE_BACKOFF_MAX_SECONDS: '0.04' };
    const said: string[] = [];
    for (let attempt = 0; attempt < 4; attempt++) {
      const run = start(fake.cli, fake.eif, quick);
      await run.said('running (CID 16');
      await writeFile(fake.state, '[]'); // ended at once: a crash
      expect(await run.exited).toBe(1);
      said.push(run.stderr().split('\n').find((line) => line.includes('backing off')) ?? '(no backoff)');
    }
    expect(said).toEqual([
      '(no backoff)',
      'enclave-run: backing off 0.01 s before starting: the enclave ended within 300 s of its start 1 time(s) in a row',
      'enclave-run: backing off 0.02 s before starting: the enclave ended within 300 s of its start 2 time(s) in a row',
      'enclave-run: backing off 0.04 s before starting: the enclave ended within 300 s of its start 3 time(s) in a row',
    ]);
    const healthy = start(fake.cli, fake.eif, { ...quick, ENCLAVE_HEALTHY_SECONDS: '0' });
    await healthy.said('running (CID 16');
    await writeFile(fake.state, '[]');
    expect(await healthy.exited).toBe(1);
    const after = start(fake.cli, fake.eif, quick);
    await after.said('running (CID 16');
    after.child.kill('SIGTERM');
    expect(await after.exited).toBe(0);
    expect(after.stderr()).not.toContain('backing off');
    expect(await readFile(join(dirname(fake.cli), 'state', 'agent-enclave.failures'), 'utf8')).toBe('0\n');
  });

  it('terminates the enclave it started on SIGTERM (systemctl stop) and exits 0', async () => {
    const fake = await fakeNitroCli('stop');
    const run = start(fake.cli, fake.eif);
    await run.said('running');
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);
    expect(await readFile(fake.calls, 'utf8')).toContain('terminate-enclave --enclave-id i-new-enc2');
  });

  it('terminates the enclave when SIGTERM comes while nitro-cli is still starting it', async () => {
    const fake = await fakeNitroCli('stop-early', 0.5);
    const run = start(fake.cli, fake.eif);
    for (let i = 0; i < 200 && !(await readFile(fake.calls, 'utf8').catch(() => '')).includes('run-enclave'); i++) await new Promise((r) => setTimeout(r, 10));
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);
    expect(await readFile(fake.calls, 'utf8')).toContain('terminate-enclave --enclave-id i-new-enc2');
    expect(run.stderr()).not.toContain('running (CID');
  });

  it.each([
    [['--cid', '16', '--cpus', '2', '--memory-mib', '4096'], '--eif, --cid, --cpus and --memory-mib are all required'],
    [['--eif', '/x', '--cid', '2', '--cpus', '2', '--memory-mib', '4096'], '--cid must be a number of at least 4'],
    [['--eif', '/x', '--cid', '16', '--cpus', 'two', '--memory-mib', '4096'], '--cpus must be a number'],
    [['--eif'], '--eif needs a value'],
  ])('refuses %j (exit 2)', (args, message) => {
    const result = sh('enclave-run.sh', args, { NITRO_CLI: '/bin/false' });
    expect(result.stderr).toContain(message);
    expect(result.status).toBe(2);
  });
});

describe('host-setup.sh --dry-run', () => {
  it('installs Node 20, the compiler hnswlib-node needs and nitro-cli, and sizes the allocator', () => {
    const result = sh('host-setup.sh', ['--dry-run', '--cpus', '4', '--memory-mib', '8192', '--user', 'svc']);
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^\+ dnf install -y aws-nitro-enclaves-cli .*nodejs20 nodejs20-npm gcc-c\+\+ make python3 socat jq/m);
    expect(result.stdout).toContain('+ usermod -aG ne svc');
    expect(result.stdout).toContain('memory_mib: 8192\ncpu_count: 4\n');
    expect(result.stdout).toContain('+ systemctl restart nitro-enclaves-allocator.service');
  });
  it('refuses Graviton: the aarch64 enclave kernel has no PTP clock for chrony', () => {
    const result = sh('host-setup.sh', ['--dry-run'], { MACHINE_ARCH: 'aarch64' });
    expect(result.stderr).toContain('this is aarch64; the enclave needs x86_64');
    expect(result.status).toBe(1);
    expect(sh('release.sh', ['--tag', 'v1', '--key', 'k.pem', '--dry-run'], { MACHINE_ARCH: 'aarch64' }).stderr).toContain('release: this is aarch64');
  });
  it.each([[['--cpus', '3'], 'even number'], [['--memory-mib', 'lots'], '--memory-mib must be a number'], [['--user', 'Bad User'], 'plain user name']])(
    'refuses %j (exit 2)', (args, message) => {
      const result = sh('host-setup.sh', ['--dry-run', ...args]);
      expect(result.stderr).toContain(message);
      expect(result.status).toBe(2);
    });
});

describe('release.sh --dry-run', () => {
  const digest = `sha256:${'ab'.repeat(32)}`;
  const goodLock = `NODE_BUILD_IMAGE=node:20-bookworm@${digest}\nNODE_RUN_IMAGE=node:20-bookworm-slim@${digest}\nRUST_IMAGE=rust:1-bookworm@${digest}\nDEBIAN_SNAPSHOT=20251101T000000Z\n`;
  const keyArn = 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
  const goodEnv = `KMS_KEY_ID=${keyArn}\nAWS_REGION=eu-west-1\nOPERATOR_PUBKEY=${'A'.repeat(43)}=\n`;
  async function release(name: string, files: { lock?: string; cargo?: boolean; imageEnv?: string }, extra: string[] = []) {
    const root = join(dir, `release-${name}`);
    spawnSync('mkdir', ['-p', root]);
    await writeFile(join(root, 'base-images.lock'), files.lock ?? goodLock);
    if (files.cargo !== false) await writeFile(join(root, 'Cargo.lock'), '# lock\n');
    await writeFile(join(root, 'sources.lock'), `aws-lc https://github.com/aws/aws-lc.git v1.0.2 ${'c'.repeat(40)}\n`);
    await writeFile(join(root, 'image.env'), files.imageEnv ?? goodEnv);
    await writeFile(join(root, 'operator.pem'), '');
    await writeFile(join(root, 'nitro-cli'), '#!/bin/sh\necho "Nitro CLI 1.4.2"\n');
    await chmod(join(root, 'nitro-cli'), 0o755);
    return sh('release.sh', ['--tag', 'v1.0.0', '--key', 'operator.pem', '--image-env', 'image.env', '--out-dir', 'out', '--dry-run', ...extra], {
      BASE_IMAGES_LOCK: join(root, 'base-images.lock'), CARGO_LOCK: join(root, 'Cargo.lock'), KMSTOOL_LOCK: join(root, 'sources.lock'), NITRO_CLI: join(root, 'nitro-cli'),
    }, root);
  }

  it('builds from digests, one Debian snapshot, clamped file times, then signs the measurements', async () => {
    const result = await release('good', {}, ['--sign-cert', 'cert.pem', '--sign-key', 'key.pem']);
    expect(result.stderr).not.toContain('release: no ');
    expect(result.status).toBe(0);
    const docker = result.stdout.split('\n').find((line) => line.startsWith('+ docker buildx build'))!;
    expect(docker).toContain(`--build-arg NODE_RUN_IMAGE=node:20-bookworm-slim@${digest}`);
    expect(docker).toContain('--build-arg DEBIAN_SNAPSHOT=20251101T000000Z');
    expect(docker).toMatch(/--build-arg SOURCE_DATE_EPOCH=\d+ /);
    expect(docker).toContain(`--build-arg KMS_KEY_ID=${keyArn} --build-arg AWS_REGION=eu-west-1`);
    expect(docker).toContain('--output type=docker,name=agent-enclave:v1.0.0,rewrite-timestamp=true .');
    expect(result.stdout).toMatch(/^\+ \S*nitro-cli build-enclave .* --signing-certificate \/.*cert\.pem --private-key \/.*key\.pem > .*measurements-v1\.0\.0\.json$/m);
    const manifest = result.stdout.split('\n').find((line) => line.includes('release-manifest.js'))!;
    expect(manifest).toMatch(/--source commit=[0-9a-f]{40} /);
    expect(manifest).toMatch(/--source package_lock_sha256=[0-9a-f]{64} /);
    expect(manifest).toContain('--image signed=yes');
    expect(manifest).toContain('--image nitro_cli_version=Nitro CLI 1.4.2');
    expect(manifest).not.toContain('eif_sha384');
  });

  it.each([
    ['a base image by tag only', { lock: goodLock.replace(`node:20-bookworm-slim@${digest}`, 'node:20-bookworm-slim') }, 'NODE_RUN_IMAGE must be <image>[:tag]@sha256:<digest>'],
    ['no Debian snapshot', { lock: goodLock.replace(/DEBIAN_SNAPSHOT=.*\n/, '') }, 'DEBIAN_SNAPSHOT must be like'],
    ['no Cargo.lock', { cargo: false }, 'run deploy/release.sh --lock'],
    ['a KMS key alias (the Dockerfile\'s own check, deploy/check-image-config.sh)', { imageEnv: goodEnv.replace(keyArn, 'alias/agent-sealing') }, 'KMS_KEY_ID must be the key\'s ARN, not an alias'],
    ['no operator key', { imageEnv: goodEnv.replace(/OPERATOR_PUBKEY=.*\n/, '') }, 'OPERATOR_PUBKEY is required'],
    ['no API keys and no ALLOW_OPEN', { imageEnv: `${goodEnv}API_KEYS_BLOB=\n` }, 'no API keys: keep API_KEYS_BLOB=api-keys.signed.json'],
    ['keys in the image beside the signed ones', { imageEnv: `${goodEnv}API_KEYS_FILE=/opt/agent/api-keys.json\n` }, 'two sources of keys'],
    ['a secret in the image settings', { imageEnv: 'MODEL_API_KEY=sk-live\n' }, 'is not one of the image\'s settings'],
  ])('refuses %s', async (name, files, message) => {
    const result = await release(name.replace(/\W+/g, '-'), files);
    expect(result.stderr).toContain(message);
    expect(result.status).toBe(1);
  });

  it('refuses usage errors (exit 2)', async () => {
    expect((await release('cert-alone', {}, ['--sign-cert', 'c.pem'])).stderr).toContain('--sign-cert and --sign-key go together');
    const noTag = sh('release.sh', ['--key', 'k.pem', '--dry-run']);
    expect(noTag.stderr).toContain('--tag is required');
    expect(noTag.status).toBe(2);
  });
});

describe('check-image-config.sh', () => {
  it('is what the Dockerfile runs on its build arguments, and refuses an alias there too', async () => {
    const dockerfile = await readFile(join(deploy, 'enclave.Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/KMS_KEY_ID="\$KMS_KEY_ID" .*\n.*\n.*sh \/usr\/local\/bin\/check-image-config\.sh --files;/);
    const env = { KMS_KEY_ID: 'alias/agent-sealing', AWS_REGION: 'eu-west-1', OPERATOR_PUBKEY: 'x' };
    const alias = sh('check-image-config.sh', ['--files'], env);
    expect(alias.stderr).toContain("KMS_KEY_ID must be the key's ARN, not an alias or a bare id");
    expect(alias.status).toBe(1);
    const arn = sh('check-image-config.sh', [], { ...env, KMS_KEY_ID: 'arn:aws:kms:eu-west-1:111122223333:key/k' });
    expect(arn.status).toBe(0);
  });
});

describe('debian-snapshot.sh', () => {
  it('changes nothing without a snapshot and refuses a malformed one', () => {
    expect(sh('debian-snapshot.sh', []).status).toBe(0);
    const bad = sh('debian-snapshot.sh', ['2025-01-01']);
    expect(bad.stderr).toContain('expected a time like 20250101T000000Z');
    expect(bad.status).toBe(2);
  });
});
