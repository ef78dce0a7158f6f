import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const script = resolve(import.meta.dirname, '../../dist/scripts/start-cluster.js');
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('npm run start:cluster', () => {
  it('--help says how to run it and what it needs', () => {
    const r = spawnSync(process.execPath, [script, '--help'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('Usage: npm run start:cluster -- [--enclaves N] [--etcd-port P]');
    expect(r.stdout).toContain('sudo apt-get install -y etcd-server');
  });

  it('without etcd installed, stops at once with the command that installs it and a non-zero exit', () => {
    // A PATH with a shell and nothing else: no etcd on it.
    const bin = mkdtempSync(join(tmpdir(), 'no-etcd-'));
    dirs.push(bin);
    symlinkSync('/bin/sh', join(bin, 'sh'));
    const r = spawnSync(process.execPath, [script, '--enclaves', '2'], { encoding: 'utf8', env: { ...process.env, PATH: bin, DATA_DIR: bin }, timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('etcd is not installed');
    expect(r.stderr).toContain('sudo apt-get install -y etcd-server');
  });

  it('refuses an enclave count it cannot run', () => {
    const r = spawnSync(process.execPath, [script, '--enclaves', '0'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--enclaves takes an integer from 1 to 16, got "0"');
  });
});
