import { Etcd3 } from 'etcd3';
import { configFromCli } from '../common/config.js';
import { MAX_SHARDS } from '../protocol/shards.js';
import { memberIdPattern } from '../placement/cluster-keys.js';
import { etcdHosts, etcdSettings } from '../placement/config.js';
import { ShardMap } from '../placement/shard-map.js';

/**
 * `npm run cluster:move -- --shard 3 --to enclave-2`: a planned move. It asks the controller
 * (`<prefix>/moves/<i>` in etcd), which closes the shard on its owner, changes the map and
 * opens it on the new one; this waits until the map names the new owner and says so.
 */
const usage = `agent-service cluster: move one shard to another enclave (a planned move, done by the placement controller).

Usage: npm run cluster:move -- --shard I --to MEMBER_ID [--timeout-s S]
  --shard I       the shard to move (0 to ${MAX_SHARDS - 1})
  --to MEMBER_ID  the live member to move it to (its MEMBER_ID, e.g. enclave-2 under start:cluster)
  --timeout-s S   how long to wait for the move [default: 120]`;
const config = configFromCli(usage, etcdSettings('The etcd holding the shard map; unset: 127.0.0.1:2379, start:cluster\'s'));
// start:cluster's etcd when none is named.
const endpoints = config.etcdEndpoints.length ? config.etcdEndpoints : ['127.0.0.1:2379'];

const arg = (name: string) => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};
const fail = (line: string): never => {
  process.stderr.write(`${line}\n`);
  process.exit(2);
};
const shard = Number(arg('--shard'));
const to = arg('--to') ?? '';
const timeoutS = Number(arg('--timeout-s') ?? 120);
if (!Number.isInteger(shard) || shard < 0 || shard >= MAX_SHARDS) fail(`--shard takes a shard number from 0 to ${MAX_SHARDS - 1}, got "${arg('--shard') ?? ''}"`);
if (!memberIdPattern.test(to)) fail(`--to takes a member id, got "${to}"`);
if (!Number.isInteger(timeoutS) || timeoutS < 1) fail(`--timeout-s takes a positive integer, got "${arg('--timeout-s') ?? ''}"`);

const client = new Etcd3({ hosts: etcdHosts(endpoints), dialTimeout: 3000 });
const map = new ShardMap(client, config.etcdPrefix);
try {
  const before = await map.read();
  if (before.count !== undefined && shard >= before.count) fail(`the service has ${before.count} shards: no shard ${shard}`);
  if (!before.members.has(to)) fail(`no live member "${to}"; members: ${[...before.members.keys()].join(', ') || 'none'}`);
  const from = before.shards.get(shard);
  if (from?.owner === to) {
    process.stdout.write(`shard ${shard} is already on ${to} (generation ${from.generation})\n`);
    process.exit(0);
  }
  const started = Date.now();
  await map.requestMove(shard, to);
  for (;;) {
    const view = await map.read();
    const now = view.shards.get(shard);
    if (now?.owner === to && !view.moves.has(shard)) {
      process.stdout.write(`shard ${shard} moved from ${from?.owner ?? 'nowhere'} to ${to} (generation ${now.generation}) in ${Date.now() - started} ms\n`);
      break;
    }
    if (!view.moves.has(shard)) fail(`the controller dropped the move (is "${to}" still a live member answering?); shard ${shard} is on ${now?.owner ?? 'nowhere'}`);
    if (Date.now() - started > timeoutS * 1000) fail(`shard ${shard} not moved after ${timeoutS} s (is a placement controller running?); the request stays in etcd`);
    await new Promise((r) => setTimeout(r, 100));
  }
} finally {
  client.close();
}
