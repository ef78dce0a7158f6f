/**
 * The upgrade (issue 32, finding 7), as deploy/README.md's "Upgrade" runs it: deploy/upgrade.sh
 * with stand-ins for aws (a key policy kept in a file, starting from deploy/sealing.md's),
 * nitro-cli, systemctl and agent-verify. The new PCRs join the policy before the switch and
 * the old ones leave it only after the service verified against the new signed manifest; a
 * manifest not signed by the operator, an .eif that is not the signed one, and a release that
 * never verifies each stop it with the old release still able to unseal.
 */
import { spawnSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import nacl from 'tweetnacl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main as kmsPolicy } from '../../scripts/kms-policy.js';
import { signedManifest } from '../helpers/manifests.js';

const repo = resolve(import.meta.dirname, '../..');
const operator = nacl.sign.keyPair();
const operatorKey = Buffer.from(operator.publicKey).toString('base64');
const KEY_ARN = 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
const pcrs = (seed: string) => ({ 0: `${seed}0`.repeat(48), 1: `${seed}1`.repeat(48), 2: `${seed}2`.repeat(48) });
const V1 = pcrs('a');
const V2 = pcrs('b');

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'upgrade-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** deploy/sealing.md's policy, as written for release v1. */
async function documentedPolicy(): Promise<string> {
  const text = await readFile(join(repo, 'deploy/sealing.md'), 'utf8');
  const start = text.indexOf('```json\n', text.indexOf('## The KMS key policy')) + '```json\n'.length;
  return text.slice(start, text.indexOf('```', start))
    .replace('<PCR0 of the enclave image, 96 hex digits>', V1[0]).replace('<PCR1>', V1[1]).replace('<PCR2>', V1[2])
    .replace('<PCR0 of the enclave image>', V1[0]);
}

interface Policy { Statement: { Sid: string; Condition?: Record<string, Record<string, string | string[]>> }[] }

async function setUp(name: string, options: { verifyExit?: number; eifPcrs?: Record<number, string>; signer?: nacl.SignKeyPair } = {}) {
  const root = join(dir, name);
  const bin = join(root, 'bin');
  await mkdir(bin, { recursive: true });
  const calls = join(root, 'calls.log');
  await writeFile(join(root, 'policy.json'), await documentedPolicy());
  const fake = async (cmd: string, body: string) => {
    await writeFile(join(bin, cmd), `#!/usr/bin/env bash\nset -eu\necho "${cmd} $*" >> '${calls}'\n${body}\n`);
    await chmod(join(bin, cmd), 0o755);
  };
  await fake('aws', `case "$2" in
  get-key-policy) cat '${root}/policy.json' ;;
  put-key-policy) while [[ $# -gt 0 ]]; do [[ "$1" == --policy ]] && cp "\${2#file://}" '${root}/policy.json'; shift; done ;;
esac`);
  const eif = options.eifPcrs ?? V2;
  await fake('nitro-cli', `echo '{"Measurements":{"HashAlgorithm":"Sha384 { ... }","PCR0":"${eif[0]}","PCR1":"${eif[1]}","PCR2":"${eif[2]}"}}'`);
  await fake('systemctl', '');
  await fake('agent-verify', `exit ${options.verifyExit ?? 0}`);
  const manifest = (version: string, values: Record<number, string>, signer = operator) =>
    JSON.stringify(signedManifest({ signer, pcrs: values, teeName: 'aws-nitro-enclaves', overrides: { version } }));
  await writeFile(join(root, 'release-manifest-v1.json'), manifest('v1', V1));
  await writeFile(join(root, 'release-manifest-v2.json'), manifest('v2', V2, options.signer));
  const systemd = join(root, 'systemd');
  const run = () => spawnSync(join(repo, 'deploy/upgrade.sh'), [
    '--key-id', KEY_ARN, '--region', 'eu-west-1', '--operator-key', operatorKey,
    '--from', 'release-manifest-v1.json', '--to', 'release-manifest-v2.json',
    '--eif', '/opt/agent-service/releases/v2/agent-enclave-v2.eif', '--cid', '17', '--cpus', '2', '--memory-mib', '6144',
    '--url', 'https://agents.example.com', '--app-dir', repo, '--work-dir', join(root, 'work'),
  ], {
    cwd: root, encoding: 'utf8',
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, SYSTEMD_DIR: systemd, AGENT_VERIFY: join(bin, 'agent-verify'), VERIFY_ATTEMPTS: '2', VERIFY_INTERVAL: '0' },
  });
  const policy = async (file = join(root, 'policy.json')) => JSON.parse(await readFile(file, 'utf8')) as Policy;
  const log = async () => (await readFile(calls, 'utf8').catch(() => '')).trim().split('\n').filter(Boolean);
  return { root, systemd, run, policy, log };
}

const allowed = (policy: Policy) => policy.Statement.filter((s) => s.Condition?.StringEqualsIgnoreCase).map((s) => s.Condition!.StringEqualsIgnoreCase['kms:RecipientAttestation:PCR0']);
const denyList = (policy: Policy) => policy.Statement.find((s) => s.Sid === 'NoUseWithoutAttestation')!.Condition!.StringNotEqualsIgnoreCase['kms:RecipientAttestation:PCR0'];

describe('deploy/upgrade.sh with stand-ins for aws, nitro-cli, systemctl and agent-verify', () => {
  it('adds the new PCRs, starts the new enclave on a second CID with the store where it is, verifies it against the signed manifest, then removes the old PCRs', async () => {
    const up = await setUp('good');
    const result = up.run();
    expect(result.stderr).toContain('upgrade: upgraded to v2 on CID 17');
    expect(result.status).toBe(0);
    // While switching, both releases could unseal; afterwards only the new one.
    const both = await up.policy(join(up.root, 'work/policy-both.json'));
    expect(allowed(both)).toEqual([V1[0], V2[0]]);
    expect(denyList(both)).toEqual([V1[0], V2[0]]);
    const after = await up.policy();
    expect(allowed(after)).toEqual([V2[0]]);
    expect(denyList(after)).toBe(V2[0]);
    expect(after.Statement.map((s) => s.Sid)).toEqual(['KeyAdministrationWithoutUse', `DataKeysForPcr0${V2[0].slice(0, 16)}`, 'NoUseWithoutAttestation', 'NoWayAroundIt']);
    expect(after.Statement[1].Condition!.StringEqualsIgnoreCase).toEqual({
      'kms:RecipientAttestation:PCR0': V2[0], 'kms:RecipientAttestation:PCR1': V2[1], 'kms:RecipientAttestation:PCR2': V2[2],
    });
    const calls = await up.log();
    const order = ['nitro-cli describe-eif', 'aws kms get-key-policy', 'aws kms put-key-policy', 'systemctl daemon-reload', 'systemctl stop agent-enclave.service',
      'systemctl start agent-enclave.service', 'systemctl restart agent-host-bridge.service', 'agent-verify https://agents.example.com --manifest release-manifest-v2.json',
      'aws kms get-key-policy', 'aws kms put-key-policy'];
    expect(calls.map((line) => order.find((prefix) => line.startsWith(prefix)) ?? line)).toEqual(order);
    expect(await readFile(join(up.systemd, 'agent-enclave.service.d/release.conf'), 'utf8')).toContain(
      `ExecStart=\nExecStart=${repo}/deploy/enclave-run.sh --eif /opt/agent-service/releases/v2/agent-enclave-v2.eif --cid 17 --cpus 2 --memory-mib 6144\n`);
    expect(await readFile(join(up.systemd, 'agent-host-bridge.service.d/release.conf'), 'utf8')).toContain(`ExecStart=${repo}/deploy/host-bridge.sh 17\n`);
  });

  it('refuses a new manifest not signed by the operator key, before touching the policy or the enclave', async () => {
    const up = await setUp('forged', { signer: nacl.sign.keyPair() });
    const result = up.run();
    expect(result.stderr).toContain('kms-policy: refused: the manifest names operator key');
    expect(result.status).toBe(1);
    expect(allowed(await up.policy())).toEqual([V1[0]]);
    expect((await up.log()).filter((line) => line.startsWith('systemctl') || line.startsWith('aws kms put'))).toEqual([]);
  });

  it('refuses an .eif that is not the release the manifest signs', async () => {
    const up = await setUp('other-eif', { eifPcrs: pcrs('c') });
    const result = up.run();
    expect(result.stderr).toContain('PCR0 of /opt/agent-service/releases/v2/agent-enclave-v2.eif is');
    expect(result.status).toBe(1);
    expect((await up.log()).filter((line) => !line.startsWith('nitro-cli'))).toEqual([]);
  });

  it('goes back to the old release when the new one never verifies, the old PCRs still allowed', async () => {
    const up = await setUp('never-verified', { verifyExit: 1 });
    const result = up.run();
    expect(result.stderr).toContain('going back to the old one');
    expect(result.status).toBe(1);
    expect(allowed(await up.policy())).toEqual([V1[0], V2[0]]);
    expect(spawnSync('ls', [join(up.systemd, 'agent-enclave.service.d')], { encoding: 'utf8' }).stdout).toBe('');
    expect((await up.log()).slice(-3)).toEqual(['systemctl daemon-reload', 'systemctl restart agent-enclave.service', 'systemctl restart agent-host-bridge.service']);
  });
});

describe('kms-policy', () => {
  it('refuses to remove the only release the policy allows, and a debug-mode PCR0', async () => {
    const up = await setUp('only');
    const err: string[] = [];
    const args = (manifest: string) => ['--policy', join(up.root, 'policy.json'), '--manifest', join(up.root, manifest), '--operator-key', operatorKey];
    expect(await kmsPolicy(['remove', ...args('release-manifest-v1.json')], () => {}, (t) => err.push(t))).toBe(1);
    expect(err.join('')).toContain('the only release the policy allows');
    await writeFile(join(up.root, 'debug.json'), JSON.stringify(signedManifest({ signer: operator, pcrs: { 0: '0'.repeat(96), 1: '0'.repeat(96), 2: '0'.repeat(96) }, teeName: 'aws-nitro-enclaves' })));
    expect(await kmsPolicy(['add', ...args('debug.json')], () => {}, (t) => err.push(t))).toBe(1);
    expect(err.join('')).toContain('PCR0 is all zeros');
  });
});
