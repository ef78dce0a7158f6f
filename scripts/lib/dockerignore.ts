/**
 * The .dockerignore rules as BuildKit applies them (moby/patternmatcher): patterns are
 * anchored at the context root, `*` and `?` stay within one path element, `**` spans any
 * number of them, a pattern that matches a directory matches everything under it, and the
 * last pattern that matches a path decides (`!` re-includes).
 */
export interface IgnoreRule {
  readonly exclusion: boolean;
  readonly pattern: string;
  readonly regex: RegExp;
  readonly depth: number;
}

export function parseDockerignore(text: string): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  for (const raw of text.split('\n')) {
    let line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const exclusion = line.startsWith('!');
    if (exclusion) line = line.slice(1).trim();
    const pattern = clean(line);
    if (pattern === '') continue;
    rules.push({ exclusion, pattern, regex: toRegex(pattern), depth: pattern.split('/').length });
  }
  return rules;
}

/** True when the build context holds `path` (relative, `/`-separated). */
export function included(rules: readonly IgnoreRule[], path: string): boolean {
  const parts = path.split('/');
  let excluded = false;
  for (const rule of rules) {
    let match = rule.regex.test(path);
    // A rule that names a parent directory covers what is inside it.
    if (!match && parts.length > rule.depth) match = rule.regex.test(parts.slice(0, rule.depth).join('/'));
    if (match) excluded = !rule.exclusion;
  }
  return !excluded;
}

/** Whether some `!` rule might re-include a path below `dir`, so the walk must enter it. */
export function mayIncludeBelow(rules: readonly IgnoreRule[], dir: string): boolean {
  return rules.some((rule) => rule.exclusion && (rule.pattern.startsWith(`${dir}/`) || /[*?[]/.test(rule.pattern.split('/')[0])));
}

function clean(pattern: string): string {
  const out: string[] = [];
  for (const part of pattern.replace(/^\/+/, '').split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') out.pop();
    else out.push(part);
  }
  return out.join('/');
}

function toRegex(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*' && pattern[i + 1] === '*') {
      i++;
      if (pattern[i + 1] === '/') {
        i++;
        source += '(?:.*/)?'; // `**/` also matches no directory at all
      } else {
        source += '.*';
      }
    } else if (c === '*') {
      source += '[^/]*';
    } else if (c === '?') {
      source += '[^/]';
    } else if (c === '\\' && i + 1 < pattern.length) {
      source += escape(pattern[++i]);
    } else {
      source += escape(c);
    }
  }
  return new RegExp(`^${source}$`);
}

function escape(c: string): string {
  return c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
}
