import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { startLone, type Lone } from '../helpers/processes.js';
import { freePort, waitFor } from '../helpers/service.js';
import { scratch, stackTraceLine, startSupervisor, type Supervisor } from '../helpers/supervisor.js';

/**
 * Two `npm start`s on one machine (issue 33): the second never serves, opens or dials the
 * first's store or enclave. It stops with one line naming the setting to change, or, given
 * a folder and ports of its own, serves its own store.
 */
const folder = scratch();
let first: Supervisor;
const tenant = 'agent-1';
const firstMemory = 'The first instance keeps this: the boat is moored at pier 4';

const contents = async (s: Supervisor) => {
  const res = await request(s.baseUrl, 'GET', `/v1/memory?tenant_id=${tenant}`);
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Array<{ content: string }>).map((m) => m.content);
};
const pick = (env: NodeJS.ProcessEnv, names: string[]) => Object.fromEntries(names.map((n) => [n, env[n]]));
/** Each file of a folder with its size and modification time, to see that nobody wrote there. */
const filesOf = (dir: string): string[] => readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort()
  .map((name) => { const st = statSync(join(dir, name)); return `${name} ${st.size} ${st.mtimeMs}`; });
const commandOf = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8');

/** Every answer the second's PORT gives while it runs (there should be none). */
async function answersUntilExit(s: Supervisor): Promise<string[]> {
  const answers: string[] = [];
  let running = true;
  void s.exited.then(() => { running = false; });
  while (running) {
    try {
      const res = await fetch(`${s.baseUrl}/v1/memory?tenant_id=${tenant}`);
      answers.push(`${res.status} ${await res.text()}`);
    } catch {
      // nobody listens: what we expect
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return answers;
}

beforeAll(async () => {
  first = await startSupervisor(folder.dir, { LOG_LEVEL: 'info' });
  await first.ready();
  expect((await request(first.baseUrl, 'POST', '/v1/memory', { tenant_id: tenant, content: firstMemory })).status).toBe(200);
});
afterAll(async () => {
  await folder.remove();
});

describe('a second npm start beside a running one', () => {
  it('with only another PORT (README: "PORT=9000 npm start"): exit 2 with one line naming DATA_DIR; it touches nothing of the first, which keeps serving', async () => {
    const firstChildren = first.children();
    const filesBefore = filesOf(first.env.DATA_DIR!);
    const second = await startSupervisor(folder.dir, { ...pick(first.env, ['DATA_DIR', 'ENCLAVE_ADDR', 'HOST_STORE_ADDR']), LOG_LEVEL: 'info' });
    const answers = answersUntilExit(second);
    expect(await second.exited).toBe(2);
    expect(await answers).toEqual([]);
    const line = /^agent-service: the host-store cannot start: DATA_DIR (.+) is in use by another instance \(host store pid (\d+)\); set DATA_DIR to another folder/.exec(second.lastLine());
    expect(line, second.output()).not.toBeNull();
    expect(line![1]).toBe(first.env.DATA_DIR);
    expect(firstChildren).toContain(Number(line![2]));
    expect(second.output()).not.toMatch(stackTraceLine);
    // It started no enclave and no proxy of its own, and wrote nothing in the first's folder.
    expect(second.output()).not.toMatch(/"process":"(enclave|proxy)"/);
    expect(filesOf(first.env.DATA_DIR!)).toEqual(filesBefore);
    expect(first.children()).toEqual(firstChildren);
    expect(await contents(first)).toEqual([firstMemory]);
  });

  it('with its own DATA_DIR and HOST_STORE_ADDR but the first\'s ENCLAVE_ADDR: it never relays to the first\'s enclave, and stops naming ENCLAVE_ADDR', async () => {
    const second = await startSupervisor(folder.dir, { ...pick(first.env, ['ENCLAVE_ADDR']), LOG_LEVEL: 'info' });
    const answers = answersUntilExit(second);
    expect(await second.exited).toBe(2);
    // The old supervisor took the first's enclave (answering on that address) as its own, and started a proxy serving its memories.
    expect(await answers).toEqual([]);
    expect(second.output()).not.toMatch(/starting proxy/);
    expect(second.lastLine()).toMatch(/^agent-service: the enclave cannot start: port \d+ on 127\.0\.0\.1 \(ENCLAVE_ADDR\) is in use by another program; set ENCLAVE_ADDR to a free port$/);
    expect(await contents(first)).toEqual([firstMemory]);
  });

  it('with a folder and ports of its own: it serves its own empty store beside the first', async () => {
    const second = await startSupervisor(folder.dir);
    try {
      await second.ready();
      expect(await contents(second)).toEqual([]);
      expect((await request(second.baseUrl, 'POST', '/v1/memory', { tenant_id: tenant, content: 'only the second knows this' })).status).toBe(200);
      expect(await contents(first)).toEqual([firstMemory]);
    } finally {
      await second.stop();
    }
    expect(await second.exited).toBe(0);
  });

  it('the folder\'s lock dies with its holder: after kill -9 of the first\'s host store, the restarted one takes it again', async () => {
    const hostStorePid = first.children().find((pid) => commandOf(pid).includes('host-store/main.js'))!;
    process.kill(hostStorePid, 'SIGKILL');
    await waitFor(async () => first.children().some((pid) => pid !== hostStorePid && commandOf(pid).includes('host-store/main.js')), 30_000, first.output);
    // A write reaches the disk only through a host store that holds the folder.
    await waitFor(async () => (await request(first.baseUrl, 'POST', '/v1/memory', { tenant_id: tenant, content: 'after the restart' })).status === 200, 30_000, first.output);
    expect(await contents(first)).toContain(firstMemory);
    expect(first.output()).not.toMatch(/is in use by another instance/);
  });
});

describe('the host store alone (npm run start:host-store)', () => {
  const lones: Lone[] = [];
  afterAll(async () => { await Promise.all(lones.map((l) => l.stop())); });

  it('refuses a folder another host store holds, whatever its address, until that one dies (even by kill -9)', async () => {
    const DATA_DIR = join(folder.dir, 'lone-data');
    const hostStore = async () => {
      const lone = startLone('host-store/main.js', { DATA_DIR, HOST_STORE_ADDR: `127.0.0.1:${await freePort()}` });
      lones.push(lone);
      return lone;
    };
    const holder = await hostStore();
    await holder.waitForOutput('host store listening');
    const second = await hostStore();
    // Either it stops (2) or it serves the folder too ('listening'): whichever comes first.
    const outcome = await Promise.race([second.exited, second.waitForOutput('host store listening').then(() => 'listening')]);
    expect(outcome, second.output()).toBe(2);
    // Its own line (stderr), beside the JSON log line (stdout): two pipes, in either order under load.
    expect(second.output().split('\n')).toContain(
      `host-store: DATA_DIR ${DATA_DIR} is in use by another instance (host store pid ${holder.child.pid}); set DATA_DIR to another folder (a second instance needs its own PORT, ENCLAVE_ADDR and HOST_STORE_ADDR too)`,
    );
    holder.child.kill('SIGKILL');
    await holder.exited;
    await (await hostStore()).waitForOutput('host store listening');
  });
});
