import { BlockList, isIP } from 'node:net';

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/**
 * True when a listen address is reachable only from this machine: 127.0.0.0/8, ::1
 * (in any spelling, IPv4-mapped included) or the name "localhost". Wildcards (0.0.0.0,
 * ::) and every other name count as exposed, so an unknown value errs on the safe side.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost') return true;
  const family = isIP(h);
  return family !== 0 && loopback.check(h, family === 4 ? 'ipv4' : 'ipv6');
}
