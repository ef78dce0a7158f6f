#!/usr/bin/env node
/**
 * agent-gateway: a local, verifying front for an agent service (gateway/cli.ts has the
 * usage). Attests at start and prints one line per check; any failure at start is one line
 * on stderr and a non-zero exit, before anything listens.
 */
import { readFile } from 'node:fs/promises';
import { invokedDirectly } from '../sdk/bin/invoked-directly.js';
import { readManifestText } from '../sdk/bin/trust-args.js';
import { formatState, StateTracker } from '../sdk/protocol/response-signature.js';
import { parseArgs, USAGE, type GatewayCommand } from './cli.js';
import { startGateway, type GatewayServer } from './server.js';
import { StateFile } from './state-file.js';
import { Trust } from './trust.js';

export interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
}

const defaultIo: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

/** One line, whatever the error carried (a fetch failure's cause included). */
const oneLine = (error: unknown): string => {
  const e = error as Error & { cause?: { message?: string; code?: string } };
  const cause = e?.cause?.code ?? e?.cause?.message;
  return `${e?.message ?? String(error)}${cause ? ` (${cause})` : ''}`.replace(/\s*\n\s*/g, ' ');
};

/** Attests and starts serving; returns the server, or the exit status when it cannot start. */
export async function run(argv: string[], io: Io = defaultIo): Promise<GatewayServer | number> {
  const command = parseArgs(argv);
  if (command.kind === 'help') {
    io.out(USAGE);
    return 0;
  }
  if (command.kind === 'usage-error') {
    io.err(`agent-gateway: ${command.message} (--help for usage)`);
    return 2;
  }
  try {
    return await start(command, io);
  } catch (error) {
    io.err(`agent-gateway: not started: ${oneLine(error)}`);
    return 1;
  }
}

async function start(command: GatewayCommand, io: Io): Promise<GatewayServer> {
  const rootPem = command.rootFile === undefined ? undefined : await readFile(command.rootFile, 'utf8');
  const manifest = command.manifest === undefined ? undefined : await readManifestText(command.manifest, fetch);
  const stateFile = new StateFile(command.stateFile, command.service.origin);
  const remembered = stateFile.load();
  const tracker = new StateTracker(remembered);
  const trust = await Trust.attest({
    baseUrl: command.service.origin,
    rootPem,
    ...(manifest !== undefined ? { manifest } : { pcrs: command.pcrs }),
    operatorKey: command.operatorKey,
    allowDebug: command.allowDebug,
    insecureSkipPcrPinning: command.insecureDev,
    stateTracker: tracker,
    ...(command.requireUpstream ? { requireUpstream: command.requireUpstream } : {}),
  });
  const { attestation } = trust.client;
  for (const check of attestation.checks) io.out(`✓ ${check.name}: ${check.detail}`);
  io.out(`✓ answer signature: the attestation answer is signed by the attested key ${Buffer.from(attestation.teePublicKey).toString('base64')}`);
  io.out(`✓ state head: ${tracker.current ? formatState(tracker.current) : 'none yet'}${remembered ? ` (not older than ${formatState(remembered)}, remembered in ${command.stateFile})` : ` (remembered from now on in ${command.stateFile})`}`);
  if (command.requireUpstream) io.out(`✓ upstream: answers whose prompt and memories went to another chat model than ${command.requireUpstream} are refused`);
  if (command.insecureDev) io.out('! no PCRs pinned (--insecure-dev): any code the root vouches for is trusted; development only');
  stateFile.save(tracker.current);
  const gateway = await startGateway({ trust, tracker, stateFile, port: command.port });
  io.out(`agent-gateway: serving ${command.service.origin} (${attestation.teeName}) sealed and verified on http://127.0.0.1:${gateway.port}`);
  return gateway;
}

if (invokedDirectly(import.meta.url)) {
  const result = await run(process.argv.slice(2));
  if (typeof result === 'number') {
    process.exitCode = result;
  } else {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void result.close());
  }
}
