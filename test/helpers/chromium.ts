import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export const CHROMIUM = '/usr/bin/chromium';

/**
 * Debian's chromium, installed with apt when missing (CI runs as root on a fresh machine
 * with Debian mirrors reachable). Playwright's own browser download is never used: it
 * would fetch from outside the package mirrors.
 */
export function ensureChromium(): string {
  if (existsSync(CHROMIUM)) return CHROMIUM;
  const apt = (args: string[]) => execFileSync('apt-get', args, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  apt(['update']);
  apt(['install', '-y', '--no-install-recommends', 'chromium']);
  if (!existsSync(CHROMIUM)) throw new Error(`apt-get installed chromium, but ${CHROMIUM} is missing`);
  return CHROMIUM;
}
