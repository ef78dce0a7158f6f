/**
 * Builds anyone can repeat (issue 32, finding 3). Docker cannot run here, so a stand-in
 * docker records what it would be sent: the build context, as
 * deploy/enclave.Dockerfile.dockerignore selects it (scripts/build-context.ts). With it
 * and a stand-in nitro-cli, release.sh runs for real, twice, in a copy of this repository:
 * the second build's context must be the first's, with none of the first's output in it,
 * and the manifest must name every input and the nitro-cli version.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { chmod, cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { included, parseDockerignore } from '../../scripts/lib/dockerignore.js';
import { listContext } from '../../scripts/build-context.js';

const repo = resolve(import.meta.dirname, '../..');
const digest = `sha256:${'ab'.repeat(32)}`;
const LOCK = `NODE_BUILD_IMAGE=node:20-bookworm@${digest}\nNODE_RUN_IMAGE=node:20-bookworm-slim@${digest}\nRUST_IMAGE=rust:1-bookworm@${digest}\nDEBIAN_SNAPSHOT=20251101T000000Z\n`;
const KEY_ARN = 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
const PCR = (n: number) => `${n}`.repeat(96).slice(0, 96);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'release-reproducible-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

function git(cwd: string, ...args: string[]): string {
  const result = spawnSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`git ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
}

/** A checkout of this working tree (tracked and new files), committed, with the built dist/ beside it. */
async function checkout(name: string): Promise<string> {
  const root = join(dir, name);
  const files = git(repo, 'ls-files', '-co', '--exclude-standard', '-z').split('\0').filter((f) => f !== '' && f !== 'node_modules' && f !== 'models');
  for (const file of files) {
    await mkdir(dirname(join(root, file)), { recursive: true });
    await cp(join(repo, file), join(root, file), { verbatim: true } as never).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error; // deleted but not yet committed
    });
  }
  await symlink(join(repo, 'dist'), join(root, 'dist'));
  await symlink(join(repo, 'node_modules'), join(root, 'node_modules'));
  await writeFile(join(root, 'deploy/base-images.lock'), LOCK);
  await writeFile(join(root, 'deploy/nsm-attest/Cargo.lock'), '# crates\n');
  await writeFile(join(root, 'deploy/kmstool/sources.lock'), `aws-lc https://github.com/aws/aws-lc.git v1.0.2 ${'c'.repeat(40)}\n`);
  await mkdir(join(root, 'deploy/build'), { recursive: true });
  await writeFile(join(root, 'deploy/build/image.env'), `KMS_KEY_ID=${KEY_ARN}\nAWS_REGION=eu-west-1\nOPERATOR_PUBKEY=${'A'.repeat(43)}=\n`);
  git(root, 'init', '-q');
  git(root, 'add', '-f', '.');
  git(root, 'commit', '-q', '-m', 'release');
  return root;
}

/** docker and nitro-cli stand-ins on PATH; docker keeps the context it would have been sent. */
async function fakes(root: string): Promise<{ env: NodeJS.ProcessEnv; contexts: string }> {
  const bin = join(root, '..', `${root.split('/').pop()}-bin`);
  const contexts = join(bin, 'contexts');
  await mkdir(contexts, { recursive: true });
  await writeFile(join(bin, 'docker'), `#!/usr/bin/env bash
set -eu
case "$1 $2" in
  "buildx build")
    n=$(ls '${contexts}' | wc -l)
    # The last argument is the context directory; list it as BuildKit would receive it.
    node '${join(repo, 'dist/scripts/build-context.js')}' --root "\${@: -1}" > '${contexts}'/$((n + 1)).txt ;;
  *) echo "docker stand-in: unexpected $*" >&2; exit 1 ;;
esac
`);
  await writeFile(join(bin, 'nitro-cli'), `#!/usr/bin/env bash
set -eu
case "$1" in
  --version) echo 'Nitro CLI 1.4.2' ;;
  build-enclave) out=""; while [[ $# -gt 0 ]]; do [[ "$1" == --output-file ]] && out="$2"; shift; done
    echo "eif built at $(date +%s%N)" > "$out"
    echo '{"Measurements":{"HashAlgorithm":"Sha384 { ... }","PCR0":"${PCR(0)}","PCR1":"${PCR(1)}","PCR2":"${PCR(2)}"}}' ;;
esac
`);
  await chmod(join(bin, 'docker'), 0o755);
  await chmod(join(bin, 'nitro-cli'), 0o755);
  return { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` }, contexts };
}

async function operatorKey(): Promise<string> {
  const file = join(dir, 'operator.pem');
  await writeFile(file, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }));
  return file;
}

function release(root: string, env: NodeJS.ProcessEnv, tag: string, key: string, extra: string[] = []): SpawnSyncReturns<string> {
  return spawnSync(join(root, 'deploy/release.sh'), ['--tag', tag, '--key', key, ...extra], { cwd: root, env, encoding: 'utf8' });
}

describe('the build context', () => {
  it('follows the .dockerignore as BuildKit does: anchored patterns, directories cover their files, the last rule wins', () => {
    const rules = parseDockerignore('*\n!common/\n!deploy/kmstool/\ncommon/generated/\n**/*.map\n!keep.map\n');
    expect(included(rules, 'common/config.ts')).toBe(true);
    expect(included(rules, 'common/generated/enclave.ts')).toBe(false);
    expect(included(rules, 'deploy/kmstool/build.sh')).toBe(true);
    expect(included(rules, 'deploy/release.sh')).toBe(false);
    expect(included(rules, 'common/x.js.map')).toBe(false);
    expect(included(rules, 'keep.map')).toBe(true);
    expect(included(rules, 'node_modules/a/index.js')).toBe(false);
  });

  it('is the same file list with the same hashes when listed twice, and holds no data/, dist/, node_modules or release output', async () => {
    const dockerignore = join(repo, 'deploy/enclave.Dockerfile.dockerignore');
    const first = await listContext(repo, dockerignore);
    const second = await listContext(repo, dockerignore);
    expect(second).toEqual(first);
    const paths = first.map((e) => e.path);
    expect(paths).toContain('package-lock.json');
    expect(paths).toContain('deploy/kmstool/build.sh');
    expect(paths.filter((p) => /^(data|dist|node_modules|models|releases|common\/generated)\//.test(p))).toEqual([]);
  });
});

describe('release.sh with stand-ins for docker and nitro-cli', () => {
  it('builds the second release from the first\'s context: its output stays outside', async () => {
    const root = await checkout('twice');
    const { env, contexts } = await fakes(root);
    const key = await operatorKey();
    const one = release(root, env, 'v1', key);
    expect(one.stderr).toContain('release: v1 built');
    expect(one.status).toBe(0);
    const two = release(root, env, 'v2', key);
    expect(two.status).toBe(0);
    const [first, second] = await Promise.all([readFile(join(contexts, '1.txt'), 'utf8'), readFile(join(contexts, '2.txt'), 'utf8')]);
    expect(second.split('\n').filter((line) => !first.includes(line))).toEqual([]);
    expect(second).toBe(first);
  });

  it('signs a manifest that names every input and the nitro-cli version, and no .eif hash', async () => {
    const root = await checkout('manifest');
    const { env } = await fakes(root);
    const result = release(root, env, 'v1', await operatorKey());
    expect(result.status).toBe(0);
    const { manifest } = JSON.parse(await readFile(join(root, 'releases/v1/release-manifest-v1.json'), 'utf8')) as { manifest: { image: Record<string, string>; source: Record<string, string> } };
    expect(manifest.image.nitro_cli_version).toBe('Nitro CLI 1.4.2');
    expect(manifest.image).not.toHaveProperty('eif_sha384');
    const listing = await readFile(join(root, 'releases/v1/context-v1.txt'), 'utf8');
    const sha = spawnSync('sha256sum', { input: listing, encoding: 'utf8' }).stdout.split(' ')[0];
    expect(manifest.source.context_sha256).toBe(sha);
    expect(listing).toMatch(/^[0-9a-f]{64} {2}deploy\/kmstool\/sources\.lock$/m);
    for (const name of ['package_lock_sha256', 'cargo_lock_sha256', 'kmstool_sources_lock_sha256', 'image_env_sha256']) expect(manifest.source[name], name).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses an --out-dir inside the build context', async () => {
    const root = await checkout('inside');
    const { env } = await fakes(root);
    // deploy/build/ holds the image's inputs, so it is part of the context.
    const result = release(root, env, 'v1', await operatorKey(), ['--out-dir', 'deploy/build/release']);
    expect(result.stderr).toContain('is inside the build context');
    expect(result.status).toBe(1);
    expect(release(root, env, 'v1', await operatorKey(), ['--out-dir', 'elsewhere/v1']).status).toBe(0);
  });
});

describe('release.sh --lock with stand-ins for docker and git ls-remote', () => {
  it('pins the base images, kmstool\'s sources and the crates, and commits the four lock files', async () => {
    const root = await checkout('lock');
    const bin = join(dir, 'lock-bin');
    await mkdir(bin, { recursive: true });
    await writeFile(join(bin, 'docker'), `#!/usr/bin/env bash
set -eu
case "$1" in
  pull) ;;
  image) echo "\${@: -1}@sha256:${'cd'.repeat(32)}" ;;
  run) if [[ "$*" == *"-v "* ]]; then src="$4"; echo '# nsm-attest crates' > "\${src%%:*}/Cargo.lock"; else echo '# nsm-api crates'; fi ;;
esac
`);
    await writeFile(join(bin, 'ls-remote'), `#!/usr/bin/env bash
# ls-remote <url> refs/tags/<tag> refs/tags/<tag>^{}: an annotated tag, then the commit it points to
printf '%s\\t%s\\n' ${'1'.repeat(40)} "$3" ${'2'.repeat(40)} "$4"
`);
    await chmod(join(bin, 'docker'), 0o755);
    await chmod(join(bin, 'ls-remote'), 0o755);
    await rm(join(root, 'deploy/base-images.lock'));
    const result = spawnSync(join(root, 'deploy/release.sh'), ['--lock'], {
      cwd: root, encoding: 'utf8', env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, LS_REMOTE_GIT: join(bin, 'ls-remote'), GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.com' },
    });
    expect(result.stderr).toContain('release: committed the lock files');
    expect(result.status).toBe(0);
    expect(git(root, 'show', '--name-only', '--format=%s', 'HEAD').split('\n').filter(Boolean).slice(1).sort()).toEqual([
      'deploy/base-images.lock', 'deploy/kmstool/nsm-api.Cargo.lock', 'deploy/kmstool/sources.lock', 'deploy/nsm-attest/Cargo.lock',
    ]);
    expect(await readFile(join(root, 'deploy/base-images.lock'), 'utf8')).toMatch(new RegExp(`^NODE_RUN_IMAGE=node:20-bookworm-slim@sha256:${'cd'.repeat(32)}$`, 'm'));
    expect(await readFile(join(root, 'deploy/kmstool/sources.lock'), 'utf8')).toContain(`aws-nitro-enclaves-sdk-c https://github.com/aws/aws-nitro-enclaves-sdk-c.git v0.4.1 ${'2'.repeat(40)}\n`);
    expect(git(root, 'status', '--porcelain', '--untracked-files=no')).toBe('');
  });
});

describe('kmstool/build.sh', () => {
  it('refuses a checkout that is not the commit sources.lock names (a moved tag, a substituted repository)', async () => {
    const root = join(dir, 'kmstool');
    await mkdir(root, { recursive: true });
    await writeFile(join(root, 'sources.lock'), `aws-lc https://github.com/aws/aws-lc.git v1.0.2 ${'c'.repeat(40)}\n`);
    await writeFile(join(root, 'git'), `#!/bin/sh\n[ "$3" = rev-parse ] && echo ${'d'.repeat(40)}\nexit 0\n`);
    await chmod(join(root, 'git'), 0o755);
    const result = spawnSync('sh', [join(repo, 'deploy/kmstool/build.sh'), join(root, 'sources.lock')], {
      encoding: 'utf8', env: { ...process.env, GIT: join(root, 'git'), CMAKE: '/bin/false', SRC: join(root, 'src'), OUT: join(root, 'out') },
    });
    expect(result.stderr).toContain(`aws-lc: fetched ${'d'.repeat(40)}, but ${join(root, 'sources.lock')} says ${'c'.repeat(40)}`);
    expect(result.status).toBe(1);
  });

  it('refuses a line without a commit', async () => {
    const root = join(dir, 'kmstool-tag');
    await mkdir(root, { recursive: true });
    await writeFile(join(root, 'sources.lock'), 'aws-lc https://github.com/aws/aws-lc.git v1.0.2\n');
    const result = spawnSync('sh', [join(repo, 'deploy/kmstool/build.sh'), join(root, 'sources.lock')], { encoding: 'utf8', env: { ...process.env, SRC: join(root, 'src'), OUT: join(root, 'out') } });
    expect(result.stderr).toContain('aws-lc v1.0.2 has no commit');
    expect(result.status).toBe(1);
  });
});
