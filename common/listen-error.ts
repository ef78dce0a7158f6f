import { parseHostPort } from './config.js';

/** Where a process listens, and the settings that chose it (to name in the message). */
export interface ListenTarget {
  setting: string;
  host: string;
  port: number;
  /** The setting that chose the host, when another one than `setting` (the proxy's HOST). */
  hostSetting?: string;
}

/**
 * The one line for an address a process cannot listen on. No restart can fix a port that
 * another program holds, or one the process may not bind, so the line names the setting to
 * change and the process exits as for any configuration error (common/supervised.ts).
 */
export function listenErrorLine(target: ListenTarget, err: unknown): string {
  const { setting, host, port } = target;
  const message = err instanceof Error ? err.message : String(err);
  // grpc-js gives only a message ("… errors: [listen EADDRINUSE: …]"); fastify gives err.code too.
  const reason = `${String((err as { code?: unknown } | undefined)?.code ?? '')} ${message}`;
  const where = `port ${port} on ${host} (${setting})`;
  if (/EADDRINUSE/.test(reason)) return `${where} is in use by another program; set ${setting} to a free port`;
  if (/EACCES/.test(reason)) return `${where} needs privileges to listen on; set ${setting} to a port above 1023`;
  if (/EADDRNOTAVAIL/.test(reason)) return `${host} is not an address of this machine; set ${target.hostSetting ?? setting} to one that is`;
  return `cannot listen on ${where}: ${message}; check ${setting}`;
}

/** The target of a host:port setting (ENCLAVE_ADDR, HOST_STORE_ADDR), already validated. */
export function addressTarget(setting: string, address: string): ListenTarget {
  const hp = parseHostPort(address);
  return { setting, host: hp?.host ?? address, port: hp?.port ?? 0 };
}
