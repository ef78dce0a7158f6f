import type { ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { spawnCapturing } from './processes.js';
import { waitFor } from './service.js';

const root = resolve(import.meta.dirname, '../..');

/** The built agent-gateway (dist/gateway/main.js) as a user runs it. */
export interface GatewayProcess {
  child: ChildProcess;
  /** http://127.0.0.1:<port> once it serves. */
  url: string;
  output(): string;
  /** Resolves with the exit code once the process ends. */
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

export function spawnGateway(args: string[]): Omit<GatewayProcess, 'url'> {
  const { child, out, exited } = spawnCapturing([join(root, 'dist/gateway/main.js'), ...args], { ...process.env });
  return {
    child,
    output: out,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}

/** Starts the gateway on a free port and waits until it says where it serves. */
export async function startGateway(args: string[]): Promise<GatewayProcess> {
  const gateway = spawnGateway([...args, '--port', '0']);
  const serving = () => /sealed and verified on (http:\/\/127\.0\.0\.1:\d+)/.exec(gateway.output())?.[1];
  await waitFor(async () => serving() !== undefined || gateway.child.exitCode !== null, 30_000, gateway.output);
  if (serving() === undefined) throw new Error(`agent-gateway exited: ${gateway.output()}`);
  return { ...gateway, url: serving()! };
}
