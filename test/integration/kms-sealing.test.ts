import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installFakeKmstool } from '../helpers/fake-kmstool.js';
import { issueKey, startLoneEnclave, type Lone } from '../helpers/processes.js';
import { freePort } from '../helpers/service.js';

/** The built enclave in TEE_MODE=nitro with a stand-in kmstool (test/helpers/fake-kmstool.ts). */
const ARN = 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
const HOST_ARN = 'arn:aws:kms:eu-west-1:444455556666:key/99999999-8888-7777-6666-555555555555';

let dir: string;
let tool: string;
const started: Lone[] = [];
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'agent-kms-'));
  tool = installFakeKmstool(dir);
});
afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
  rmSync(dir, { recursive: true, force: true });
});

async function nitroEnclave(dataDir: string, env: NodeJS.ProcessEnv = {}) {
  const keys = join(dir, 'keys.json');
  issueKey(keys, ['t1']);
  const enclave = await startLoneEnclave({
    DATA_DIR: dataDir, ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, TEE_MODE: 'nitro', API_KEYS_FILE: keys,
    KMS_KEY_ID: ARN, AWS_REGION: 'eu-west-1', KMS_TOOL: tool, AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE', AWS_SECRET_ACCESS_KEY: 'secret-access-key-value',
    AWS_SESSION_TOKEN: 'token', NSM_HELPER: join(dir, 'no-nsm'), FAKE_KMS_LOG: join(dir, 'calls.log'), ...env,
  });
  started.push(enclave);
  return enclave;
}

describe('the sealing key on Nitro (stand-in kmstool)', () => {
  it('refuses an alias for KMS_KEY_ID as a configuration error (exit 2, one line)', async () => {
    const enclave = await nitroEnclave(join(dir, 'alias'), { KMS_KEY_ID: 'alias/agent-sealing' });
    expect(await enclave.exited).toBe(2);
    const problems = enclave.output().split('\n').filter((line) => line.includes('KMS_KEY_ID'));
    expect(problems).toEqual(['  KMS_KEY_ID: must be a key ARN (arn:aws:kms:<region>:<account>:key/<key id>), got an alias: "alias/agent-sealing"; '
      + 'an alias can be re-pointed and a bare id does not name the account, so neither pins the sealing key (deploy/sealing.md)']);
  });

  it('stops at start on a sealing-key.kms the host planted under its own key, and seals nothing', async () => {
    const data = join(dir, 'planted');
    mkdirSync(data);
    // The host, with a KMS key of its own, makes a data key it knows and plants its ciphertext.
    const out = execFileSync(tool, ['genkey', '--key-id', HOST_ARN, '--key-spec', 'AES-256'], { encoding: 'utf8' });
    writeFileSync(join(data, 'sealing-key.kms'), `${/^CIPHERTEXT: (\S+)$/m.exec(out)![1]}\n`);

    const enclave = await nitroEnclave(data);
    // Whichever comes first: the exit, or the log line of a key accepted (the old behaviour).
    const outcome = await Promise.race([enclave.exited, enclave.waitForOutput('sealing key released').then(() => 'accepted the planted key')]);
    expect(outcome).toBe(1);
    expect(enclave.output()).toMatch(/enclave: refusing to start: sealing-key\.kms in the host store does not open under KMS_KEY_ID arn:aws:kms:eu-west-1:111122223333:key\/1234abcd-12ab-34cd-56ef-1234567890ab .*IncorrectKeyException/);
    expect(enclave.output()).not.toContain('secret-access-key-value');
    const sealed = readdirSync(data, { recursive: true }).map(String).filter((name) => name.endsWith('.sealed'));
    expect(sealed).toEqual([]);
  });
});
