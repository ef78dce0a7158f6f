import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';

/**
 * onnxruntime-node 1.30 leaves /tmp/mat-debug-<pid>.log and ~/.cache/Microsoft/... behind
 * whenever a session is created, unless ORT_DISABLE_TELEMETRY is set before it loads
 * (enclave/embedding/ort-no-telemetry.ts). Each check runs a fresh process with its own
 * HOME and without the variable in its environment, so only our own module can set it.
 * The library also stays quiet by itself when it sees a CI system's variable (CI,
 * GITHUB_ACTIONS, ...: the names below are the ones in libonnxruntime.so), and moves its
 * cache to XDG_CACHE_HOME when that is set; the children get neither, so both checks
 * mean the same on a CI runner as on a laptop.
 */
const agentEmbed = resolve(import.meta.dirname, '../../dist/scripts/agent-embed.js');
// The library writes to /tmp itself, whatever TMPDIR says.
const debugLog = (pid: number) => join('/tmp', `mat-debug-${pid}.log`);

const ciVariables = [
  'CI', 'TF_BUILD', 'GITHUB_ACTIONS', 'GITLAB_CI', 'CIRCLECI', 'TRAVIS', 'JENKINS_URL',
  'CODEBUILD_BUILD_ID', 'BUILDKITE', 'TEAMCITY_VERSION', 'APPVEYOR', 'BITBUCKET_BUILD_NUMBER',
];

const homes: string[] = [];
afterEach(async () => {
  await Promise.all(homes.splice(0).map((home) => rm(home, { recursive: true, force: true })));
});

async function freshHome(): Promise<string> {
  const home = await mkdtemp(join(tmpdir(), 'ort-home-'));
  homes.push(home);
  return home;
}

/**
 * Runs node with `args` and HOME=`home`, with ORT_DISABLE_TELEMETRY, XDG_CACHE_HOME and
 * every CI variable unset; resolves with its pid and exit code.
 */
function run(args: string[], home: string, input = ''): Promise<{ pid: number; code: number | null; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
  for (const name of ['ORT_DISABLE_TELEMETRY', 'XDG_CACHE_HOME', ...ciVariables]) delete env[name];
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, args, { env, cwd: resolve(import.meta.dirname, '../..'), stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ pid: child.pid!, code, stderr }));
    child.stdin.end(input);
  });
}

describe('onnxruntime telemetry', () => {
  it('the enclave embedder, run in its own process, leaves no debug log and no ~/.cache/Microsoft', async () => {
    const home = await freshHome();
    const { pid, code, stderr } = await run([agentEmbed], home, 'My dog is called Rex\nwhat is my pet called?\n');
    expect(code, stderr).toBe(0);
    expect(existsSync(debugLog(pid))).toBe(false);
    expect(existsSync(join(home, '.cache', 'Microsoft'))).toBe(false);
  });

  it('the check can fail: onnxruntime-node loaded directly, without our module, writes both', async () => {
    const home = await freshHome();
    const script =
      "const ort = await import('onnxruntime-node'); const { readFileSync } = await import('node:fs');" +
      `await ort.InferenceSession.create(readFileSync(${JSON.stringify(join(modelsDir, 'static-sif-100d', 'model.onnx'))}));`;
    const { pid, code, stderr } = await run(['--input-type=module', '-e', script], home);
    try {
      expect(code, stderr).toBe(0);
      expect(existsSync(debugLog(pid))).toBe(true);
      expect(existsSync(join(home, '.cache', 'Microsoft'))).toBe(true);
    } finally {
      await rm(debugLog(pid), { force: true });
    }
  });
});
