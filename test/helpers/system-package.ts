import { execFileSync, spawnSync } from 'node:child_process';

/**
 * Makes sure a command from a Debian package is installed, installing it when it is not
 * (CI runs as root with Debian's mirrors reachable), so these tests work on a fresh
 * machine instead of silently skipping. Throws with the reason when it cannot.
 */
export function ensureCommand(command: string, debianPackage: string): string {
  const found = () => spawnSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' }).stdout.trim();
  let path = found();
  if (path) return path;
  if (process.getuid?.() !== 0) throw new Error(`${command} is missing; install the Debian package ${debianPackage}`);
  const install = () => execFileSync('apt-get', ['install', '-y', '--no-install-recommends', debianPackage], { stdio: 'ignore', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  try {
    install();
  } catch {
    execFileSync('apt-get', ['update'], { stdio: 'ignore' });
    install();
  }
  path = found();
  if (!path) throw new Error(`apt-get installed ${debianPackage} but ${command} is still missing`);
  return path;
}
