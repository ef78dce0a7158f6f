/**
 * Environment configuration, read and validated once at start-up. Each process declares
 * its variables as a table of `Setting`s: the same table parses the environment and
 * prints `--help`, so the help cannot drift from the code.
 */

export interface Setting<T> {
  name: string;
  description: string;
  /** Shown in --help; undefined means "unset". */
  defaultText?: string;
  parse(raw: string | undefined): T;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

const fail = (name: string, message: string): never => {
  throw new ConfigError([`${name}: ${message}`]);
};

export function text(name: string, description: string, fallback: string): Setting<string> {
  return { name, description, defaultText: fallback || '(empty)', parse: (raw) => (raw === undefined || raw === '' ? fallback : raw) };
}

export function optionalText(name: string, description: string): Setting<string | undefined> {
  return { name, description, parse: (raw) => (raw === undefined || raw === '' ? undefined : raw) };
}

/** A comma-separated list; blanks around items are dropped. Unset: empty. */
export function list(name: string, description: string): Setting<string[]> {
  return {
    name, description, defaultText: '(empty)',
    parse: (raw) => (raw ?? '').split(',').map((item) => item.trim()).filter(Boolean),
  };
}

export function integer(name: string, description: string, fallback: number, min: number, max: number): Setting<number> {
  return {
    name,
    description,
    defaultText: String(fallback),
    parse(raw) {
      if (raw === undefined || raw === '') return fallback;
      if (!/^-?\d+$/.test(raw.trim())) return fail(name, `expected an integer, got "${raw}"`);
      const value = Number(raw);
      if (value < min || value > max) return fail(name, `must be between ${min} and ${max}, got ${value}`);
      return value;
    },
  };
}

export function oneOf<const T extends string>(name: string, description: string, allowed: readonly T[], fallback: T): Setting<T> {
  return {
    name,
    description: `${description} (${allowed.join(' | ')})`,
    defaultText: fallback,
    parse(raw) {
      if (raw === undefined || raw === '') return fallback;
      if (!(allowed as readonly string[]).includes(raw)) return fail(name, `must be one of ${allowed.join(', ')}, got "${raw}"`);
      return raw as T;
    },
  };
}

export interface HostPort { host: string; port: number }

/** host:port, with [v6]:port accepted. */
export function parseHostPort(value: string): HostPort | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(value.trim());
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return undefined;
  return { host: m[1] ?? m[2], port };
}

export function hostPort(name: string, description: string, fallback: string): Setting<string> {
  return {
    name,
    description,
    defaultText: fallback,
    parse(raw) {
      const value = raw === undefined || raw === '' ? fallback : raw;
      if (!parseHostPort(value)) return fail(name, `expected host:port, got "${value}"`);
      return value;
    },
  };
}

type Values<S extends Record<string, Setting<unknown>>> = { [K in keyof S]: S[K] extends Setting<infer T> ? T : never };

/** Parses every setting, reporting all problems at once rather than the first. */
export function loadConfig<S extends Record<string, Setting<unknown>>>(settings: S, env: NodeJS.ProcessEnv = process.env): Values<S> {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, setting] of Object.entries(settings)) {
    try {
      out[key] = setting.parse(env[setting.name]);
    } catch (err) {
      if (err instanceof ConfigError) problems.push(...err.problems);
      else throw err;
    }
  }
  if (problems.length) throw new ConfigError(problems);
  return out as Values<S>;
}

/** The `--help` text for a process: what it is, then one line per variable. */
export function helpText(title: string, settings: Record<string, Setting<unknown>>): string {
  const rows = Object.values(settings).map((s) => {
    const def = s.defaultText === undefined ? '' : ` [default: ${s.defaultText}]`;
    return `  ${s.name.padEnd(18)} ${s.description}${def}`;
  });
  return `${title}\n\nConfiguration (environment variables):\n${rows.join('\n')}\n`;
}

/**
 * Shared entry-point behaviour: `--help` prints the table and exits; a bad configuration
 * prints every problem and exits 2 instead of throwing a stack trace at the operator.
 */
export function configFromCli<S extends Record<string, Setting<unknown>>>(title: string, settings: S, argv = process.argv.slice(2)): Values<S> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(helpText(title, settings));
    process.exit(0);
  }
  try {
    return loadConfig(settings);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

export function logLevel(): Setting<string> {
  return oneOf('LOG_LEVEL', 'Log level', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, 'info');
}

export function logFormat(): Setting<'json' | 'pretty'> {
  // A person at a terminal reads lines; a collector (a pipe, a file, the journal) parses JSON.
  const setting = oneOf('LOG_FORMAT', 'Log lines: JSON, or readable text (the same redactions); unset: readable in a terminal, JSON otherwise', ['json', 'pretty'] as const, 'json');
  return {
    ...setting,
    defaultText: 'json (pretty when stdout is a terminal)',
    parse: (raw) => (raw === undefined || raw === '' ? (process.stdout.isTTY === true ? 'pretty' : 'json') : setting.parse(raw)),
  };
}

/** An on/off switch: 1/true/yes or 0/false/no (unset = off). */
export function flag(name: string, description: string): Setting<boolean> {
  return {
    name,
    description,
    defaultText: '0',
    parse(raw) {
      const v = (raw ?? '').trim().toLowerCase();
      if (v === '' || v === '0' || v === 'false' || v === 'no') return false;
      if (v === '1' || v === 'true' || v === 'yes') return true;
      return fail(name, `expected 1 or 0, got "${raw}"`);
    },
  };
}
