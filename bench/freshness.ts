/**
 * `npm run bench -- freshness`: what freshness across enclaves costs a write. Sequential
 * single-item writes (POST /v1/memory, one client, so each is its own group commit and its own
 * witness round trip) through the proxy to enclave A of a pair on one host store (SHARDS=4,
 * SHARDS_OPEN=none, B joined from A for the keys, A holding every shard), with WITNESSES=1 (B
 * confirms each new head) and WITNESSES=0, in alternating rounds; and once against one enclave
 * as `npm start` runs it (no peers). Prints p50/p99 per run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import sodium from 'sodium-native';
import { channelOptions, enclaveProto, type EnclaveClient } from '../common/proto.js';
import { freePort, startService } from '../scripts/lib/run-service.js';
import { nodeArgs } from '../scripts/lib/node-args.js';
import { timeIt } from './stats.js';

const distRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WRITES = process.env.BENCH_QUICK ? 100 : 400;
const ROUNDS = 2;

interface Pair {
  baseUrl: string;
  stop(): Promise<void>;
}

function launch(script: string, env: NodeJS.ProcessEnv, children: ChildProcess[]): { child: ChildProcess; waitFor(text: string): Promise<void> } {
  const child = spawn(process.execPath, nodeArgs(resolve(distRoot, script), env), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  const waiters: Array<() => void> = [];
  const read = (chunk: Buffer) => {
    output += chunk.toString();
    for (const w of waiters.splice(0)) w();
  };
  child.stdout!.on('data', read);
  child.stderr!.on('data', read);
  return {
    child,
    waitFor: (text) => new Promise((res, rej) => {
      const check = () => {
        if (output.includes(text)) return res();
        if (child.exitCode !== null) return rej(new Error(`${script} exited:\n${output.slice(-2000)}`));
        waiters.push(check);
      };
      child.once('exit', check);
      check();
    }),
  };
}

async function startPair(witnesses: number): Promise<Pair> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-freshness-'));
  const operator = Buffer.alloc(32);
  sodium.crypto_sign_keypair(operator, sodium.sodium_malloc(64));
  const env: NodeJS.ProcessEnv = {
    ...process.env, DATA_DIR: dataDir, HOST_STORE_ADDR: `127.0.0.1:${await freePort()}`, SHARDS: '4', SHARDS_OPEN: 'none',
    WITNESSES: String(witnesses), OPERATOR_PUBKEY: operator.toString('base64'), RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0', LOG_LEVEL: 'warn',
  };
  const children: ChildProcess[] = [];
  const [a, b, port] = [`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`, await freePort()];
  await launch('host-store/main.js', { ...env, LOG_LEVEL: 'info' }, children).waitFor('host store listening');
  await launch('enclave/main.js', { ...env, ENCLAVE_ADDR: a, LOG_LEVEL: 'info' }, children).waitFor('enclave listening');
  await launch('enclave/main.js', { ...env, ENCLAVE_ADDR: b, JOIN_ENCLAVE_ADDR: a, LOG_LEVEL: 'info' }, children).waitFor('enclave listening');
  await launch('proxy/main.js', { ...env, ENCLAVE_ADDR: a, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' }, children).waitFor('proxy listening');
  const rpc = (address: string) => new (enclaveProto().Enclave)(address, grpc.credentials.createInsecure(), channelOptions) as unknown as EnclaveClient;
  const [ca, cb] = [rpc(a), rpc(b)];
  const unary = (call: (done: (err: grpc.ServiceError | null) => void) => void) => new Promise<void>((res, rej) => call((err) => (err ? rej(err) : res())));
  await unary((done) => ca.SetPeers({ addresses: [b] }, done));
  await unary((done) => cb.SetPeers({ addresses: [a] }, done));
  for (let shard = 0; shard < 4; shard++) await unary((done) => ca.OpenShard({ shard, generation: 1 }, done));
  ca.close();
  cb.close();
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    async stop() {
      for (const child of children.reverse()) {
        if (child.exitCode !== null) continue;
        await new Promise<void>((res) => { child.once('exit', () => res()); child.kill('SIGTERM'); });
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function writes(baseUrl: string, label: string): Promise<{ p50: number; p99: number }> {
  let n = 0;
  const result = await timeIt(WRITES, async () => {
    const i = n++;
    const res = await fetch(`${baseUrl}/v1/memory`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tenant_id: `bench-${i % 16}`, content: `memory ${i}: the freshness benchmark writes one item at a time` }),
    });
    if (res.status !== 200) throw new Error(`${label}: write answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  });
  process.stdout.write(`${label}: ${WRITES} single writes, p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms\n`);
  return result;
}

export async function run(): Promise<void> {
  const runs: Record<string, Array<{ p50: number; p99: number }>> = { 'pair, WITNESSES=1': [], 'pair, WITNESSES=0': [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const witnesses of round % 2 === 0 ? [1, 0] : [0, 1]) {
      const pair = await startPair(witnesses);
      try {
        runs[`pair, WITNESSES=${witnesses}`].push(await writes(pair.baseUrl, `round ${round + 1}, pair, WITNESSES=${witnesses}`));
      } finally {
        await pair.stop();
      }
    }
  }
  const log = join(mkdtempSync(join(tmpdir(), 'bench-freshness-one-')), 'service.log');
  const one = await startService({ RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0', DATA_DIR: dirname(log) }, log);
  try {
    await writes(one.baseUrl, 'one enclave (npm start: SHARDS_OPEN=all, no peers)');
  } finally {
    await one.stop();
    rmSync(dirname(log), { recursive: true, force: true });
  }
  for (const [label, results] of Object.entries(runs)) {
    process.stdout.write(`${label}: p50 ${results.map((r) => r.p50.toFixed(2)).join(' / ')} ms, p99 ${results.map((r) => r.p99.toFixed(2)).join(' / ')} ms\n`);
  }
}
