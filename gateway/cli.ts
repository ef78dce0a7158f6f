/**
 * agent-gateway's command line: pure parsing (argv → what to run), and --help, which
 * documents every flag. The trust flags are agent-verify's (sdk/bin/trust-args.ts).
 */
import { createHash } from 'node:crypto';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs as parseNodeArgs } from 'node:util';
import { parseKey32, parsePcrs } from '../sdk/bin/trust-args.js';
import { normalizeOrigin } from '../protocol/upstream.js';

export const USAGE = `Usage: agent-gateway --service <base-url> [--port 8081] (--pcr … | --manifest … --operator-key … | --insecure-dev)
       agent-gateway --service <base-url> (trust options) --mcp --tenant <id> [--api-key-file <path>]

Runs on your machine, in front of an agent service whose host you do not trust. It verifies
the service's attestation, then serves the whole API unchanged on http://127.0.0.1:<port>
for any client (openai, the AI SDK, LangChain, curl): every request is sealed to the
attested enclave (streams included), every answer opened and checked (signature, tenant,
API key, state head). An answer that fails a check becomes a 502 gateway_check_failed
naming the check; nothing unverified is passed on. Your Authorization header travels only
inside the sealed envelope.

It also serves memory tools over the Model Context Protocol (add_memory, search_memory,
list_memories, update_memory, delete_memory), through the same sealed, verified calls: at
http://127.0.0.1:<port>/mcp (streamable HTTP; the tenant from each request's X-Tenant-Id
header, the key from its Authorization header), or, with --mcp, on stdin/stdout for an MCP
client that starts the gateway itself (Claude Desktop, Cursor). See docs/mcp.md.

Options:
  --service <base-url>   the service, e.g. https://agents.example.com (required)
  --port <port>          local port on 127.0.0.1 (default 8081; 0 picks a free one)
  --root <pem-file>      root certificate to pin (default: AWS Nitro Enclaves Root G1;
                         locally: <DATA_DIR>/simulated-root.pem)
  --pcr <index>=<hex>    expected PCR value; repeatable
  --manifest <file|url>  pin the PCRs of a release manifest signed by the operator; needs
                         --operator-key, and replaces --pcr
  --operator-key <key>   the operator's Ed25519 key, base64 or hex: checked against the
                         document's user_data (and a manifest's signature)
  --allow-debug          accept an enclave in debug mode (PCR0-2 all zero), whose memory
                         the host can read. Development only
  --insecure-dev         start without pinned PCRs (any code the root vouches for).
                         Development only
  --require-upstream <origin>
                         refuse (502 gateway_check_failed, check "upstream") any answer
                         whose signed statement says the enclave sent the prompt and
                         memories to another chat model than <origin>
  --state-file <path>    where the newest state head seen is kept across restarts, so an
                         older or forked copy of the store is refused (default
                         ~/.agent-gateway/state-<hash of the service URL>.json)
  --tenant-key-file <path>
                         a file of 32 to 256 random bytes (head -c 32 /dev/urandom):
                         sent inside every sealed call, it seals the memories of the
                         tenants you use under keys derived from it, which the host's
                         copies and later enclaves cannot open without it (docs/api.md,
                         Tenant keys). Lose the file and those memories are gone
  --mcp                  serve the memory tools over MCP on stdin/stdout instead of HTTP;
                         everything else the gateway prints goes to stderr
  --tenant <id>          with --mcp: the tenant whose memory the tools act on (required)
  --api-key-file <path>  with --mcp: a file holding your API key (default: the
                         AGENT_API_KEY environment variable; none for a service
                         without keys). Never on the command line, where ps shows it
  -h, --help             show this help

It re-attests when the enclave's keys change (an answer signed by another key, or an
envelope the enclave cannot open), and retries a request only when the new keys show it
could not have been opened. Exit status: 0 after a clean stop, 1 when the service cannot be
trusted at start, 2 for usage errors.`;

export interface GatewayCommand {
  kind: 'run';
  service: URL;
  port: number;
  rootFile?: string;
  pcrs: Record<number, Uint8Array>;
  manifest?: string;
  operatorKey?: Uint8Array;
  allowDebug: boolean;
  insecureDev: boolean;
  stateFile: string;
  /** With --mcp: serve the memory tools on stdio for this tenant, instead of HTTP. */
  mcp?: { tenant: string; apiKeyFile?: string };
  /** The only chat model origin answers may name (sdk requireUpstream). */
  requireUpstream?: string;
  /** The tenant key sent inside every sealed call (sdk tenantKeyFile). */
  tenantKeyFile?: string;
}

export type Command = GatewayCommand | { kind: 'help' } | { kind: 'usage-error'; message: string };

const usageError = (message: string): Command => ({ kind: 'usage-error', message });

/** The default state file: one per service, under the user's home. */
export function defaultStateFile(service: URL, home = homedir()): string {
  const id = createHash('sha256').update(service.origin).digest('hex').slice(0, 16);
  return join(home, '.agent-gateway', `state-${id}.json`);
}

export function parseArgs(argv: string[]): Command {
  let values;
  try {
    ({ values } = parseNodeArgs({
      args: argv,
      strict: true,
      options: {
        service: { type: 'string' },
        port: { type: 'string', default: '8081' },
        root: { type: 'string' },
        pcr: { type: 'string', multiple: true },
        manifest: { type: 'string' },
        'operator-key': { type: 'string' },
        'allow-debug': { type: 'boolean', default: false },
        'insecure-dev': { type: 'boolean', default: false },
        'state-file': { type: 'string' },
        mcp: { type: 'boolean', default: false },
        tenant: { type: 'string' },
        'api-key-file': { type: 'string' },
        'tenant-key-file': { type: 'string' },
        'require-upstream': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (error) {
    return usageError((error as Error).message);
  }
  if (values.help) return { kind: 'help' };
  if (!values.service) return usageError('--service <base-url> is required');
  let service: URL;
  try {
    service = new URL(values.service);
  } catch {
    return usageError(`--service is not a URL: ${values.service}`);
  }
  if (!['http:', 'https:'].includes(service.protocol)) return usageError('--service must be an http(s) URL');
  // The signed target is the path as sent: a prefix in the base URL would change it.
  if (service.pathname !== '/' || service.search) return usageError('--service must be an origin, without a path');
  if (!/^\d{1,5}$/.test(values.port) || Number(values.port) > 65535) return usageError(`--port must be 0-65535, got "${values.port}"`);
  const pcrs = parsePcrs(values.pcr ?? []);
  if (typeof pcrs === 'string') return usageError(pcrs);
  let operatorKey: Uint8Array | undefined;
  if (values['operator-key'] !== undefined) {
    operatorKey = parseKey32(values['operator-key']);
    if (!operatorKey) return usageError('--operator-key must be a 32-byte key in base64 or hex');
  }
  if (values.manifest !== undefined) {
    if (!operatorKey) return usageError('--manifest needs --operator-key: the operator key you trust to sign releases');
    if (Object.keys(pcrs).length > 0) return usageError('--manifest and --pcr exclude each other: the manifest says which PCRs to pin');
  }
  if (values.mcp && !values.tenant) return usageError('--mcp needs --tenant <id>: the tenant whose memory the tools act on');
  if (!values.mcp && (values.tenant !== undefined || values['api-key-file'] !== undefined)) {
    return usageError('--tenant and --api-key-file go with --mcp (over HTTP, /mcp takes them from each request\'s X-Tenant-Id and Authorization headers)');
  }
  // Without pinned code, the gateway would seal your data to whatever the root vouches for.
  if (Object.keys(pcrs).length === 0 && values.manifest === undefined && !values['insecure-dev']) {
    return usageError('refusing to start without --pcr or --manifest (--insecure-dev for a development run)');
  }
  let requireUpstream: string | undefined;
  if (values['require-upstream'] !== undefined) {
    try {
      requireUpstream = normalizeOrigin(values['require-upstream']);
    } catch {
      return usageError(`--require-upstream must be an http(s) origin, got "${values['require-upstream']}"`);
    }
  }
  return {
    kind: 'run',
    service,
    port: Number(values.port),
    ...(values.root !== undefined ? { rootFile: values.root } : {}),
    pcrs,
    ...(values.manifest !== undefined ? { manifest: values.manifest } : {}),
    ...(operatorKey ? { operatorKey } : {}),
    allowDebug: values['allow-debug'],
    insecureDev: values['insecure-dev'],
    stateFile: values['state-file'] ?? defaultStateFile(service),
    ...(values.mcp ? { mcp: { tenant: values.tenant!, ...(values['api-key-file'] !== undefined ? { apiKeyFile: values['api-key-file'] } : {}) } } : {}),
    ...(requireUpstream ? { requireUpstream } : {}),
    ...(values['tenant-key-file'] !== undefined ? { tenantKeyFile: values['tenant-key-file'] } : {}),
  };
}
