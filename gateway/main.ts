#!/usr/bin/env node
/**
 * agent-gateway: a local, verifying front for an agent service (gateway/cli.ts has the
 * usage). Attests at start and prints one line per check; any failure at start is one line
 * on stderr and a non-zero exit, before anything listens. With --mcp, stdout is the MCP
 * protocol, so every line the gateway prints goes to stderr.
 */
import { readFile } from 'node:fs/promises';
import { bearerToken } from '../common/bearer.js';
import { invokedDirectly } from '../sdk/bin/invoked-directly.js';
import { readManifestText } from '../sdk/bin/trust-args.js';
import { formatState, StateTracker } from '../protocol/response-signature.js';
import { parseArgs, USAGE, type GatewayCommand } from './cli.js';
import { serveMcpStdio } from './mcp-transports.js';
import { startGateway } from './server.js';
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

/** What runs once started: the HTTP gateway, or the MCP server on stdio. */
export interface Running {
  close(): Promise<void>;
  /** Resolves when the MCP client closes stdin (--mcp only). */
  closed?: Promise<void>;
}

/** Attests and starts serving; returns what runs, or the exit status when it cannot start. */
export async function run(argv: string[], io: Io = defaultIo): Promise<Running | number> {
  const command = parseArgs(argv);
  if (command.kind === 'help') {
    io.out(USAGE);
    return 0;
  }
  if (command.kind === 'usage-error') {
    io.err(`agent-gateway: ${command.message} (--help for usage)`);
    return 2;
  }
  // stdout carries the protocol: the report of what was verified must not corrupt it.
  const report: Io = command.mcp ? { out: io.err, err: io.err } : io;
  try {
    return await start(command, report);
  } catch (error) {
    io.err(`agent-gateway: not started: ${oneLine(error)}`);
    return 1;
  }
}

async function start(command: GatewayCommand, io: Io): Promise<Running> {
  const authorization = command.mcp ? await mcpAuthorization(command.mcp.apiKeyFile) : undefined;
  const rootPem = command.rootFile === undefined ? undefined : await readFile(command.rootFile, 'utf8');
  const manifest = command.manifest === undefined ? undefined : await readManifestText(command.manifest, fetch);
  const stateFile = new StateFile(command.stateFile, command.service.origin);
  const remembered = stateFile.load();
  const tracker = remembered ?? new StateTracker();
  const heads = (t: StateTracker) => [...(t.floor() ?? [])].map(([shard, head]) => `${shard}/${formatState(head)}`).join(', ');
  const before = remembered && heads(remembered);
  const trust = await Trust.attest({
    baseUrl: command.service.origin,
    rootPem,
    ...(manifest !== undefined ? { manifest } : { pcrs: command.pcrs }),
    operatorKey: command.operatorKey,
    allowDebug: command.allowDebug,
    insecureSkipPcrPinning: command.insecureDev,
    stateTracker: tracker,
    ...(command.requireUpstream ? { requireUpstream: command.requireUpstream } : {}),
    ...(command.tenantKeyFile !== undefined ? { tenantKeyFile: command.tenantKeyFile } : {}),
  });
  const { attestation } = trust.client;
  for (const check of attestation.checks) io.out(`✓ ${check.name}: ${check.detail}`);
  io.out(`✓ answer signature: the attestation answer is signed by the attested key ${Buffer.from(attestation.teePublicKey).toString('base64')}`);
  io.out(`✓ state head: ${tracker.floor() ? heads(tracker) : 'none yet'}${before ? ` (not older than ${before}, remembered in ${command.stateFile})` : ` (remembered from now on in ${command.stateFile})`}`);
  if (command.requireUpstream) io.out(`✓ upstream: answers whose prompt and memories went to another chat model than ${command.requireUpstream} are refused`);
  if (command.tenantKeyFile !== undefined) io.out(`✓ tenant key: read from ${command.tenantKeyFile}, sent only inside sealed calls`);
  if (command.insecureDev) io.out('! no PCRs pinned (--insecure-dev): any code the root vouches for is trusted; development only');
  stateFile.save(tracker);
  if (command.mcp) {
    const mcp = await serveMcpStdio({ trust, tenant: command.mcp.tenant, authorization, afterCall: () => stateFile.save(tracker) });
    io.out(`agent-gateway: serving ${command.service.origin} (${attestation.teeName}) sealed and verified as MCP memory tools on stdio`);
    return mcp;
  }
  const gateway = await startGateway({ trust, tracker, stateFile, port: command.port });
  io.out(`agent-gateway: serving ${command.service.origin} (${attestation.teeName}) sealed and verified on http://127.0.0.1:${gateway.port}`);
  return gateway;
}

/** `Bearer <key>` from --api-key-file, else AGENT_API_KEY; none for a service without keys. */
async function mcpAuthorization(file: string | undefined): Promise<string | undefined> {
  const key = (file === undefined ? process.env.AGENT_API_KEY ?? '' : await readFile(file, 'utf8')).trim();
  if (key === '') return undefined;
  const authorization = `Bearer ${key}`;
  // Not the key itself in the message: it may be one.
  if (!bearerToken(authorization)) throw new Error(`${file ?? 'AGENT_API_KEY'} does not hold an API key (one token, no spaces)`);
  return authorization;
}

if (invokedDirectly(import.meta.url)) {
  const result = await run(process.argv.slice(2));
  if (typeof result === 'number') {
    process.exitCode = result;
  } else {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void result.close());
    // An MCP client ends the session by closing stdin; open connections to the service must not keep the process.
    void result.closed?.then(() => process.exit(0));
  }
}
