import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../common/paths.js';

// import-x/no-cycle skips type-only imports (no option turns that off), and a type-only cycle
// still ties two layers together: this walks every import, `import type` included.
// The compiled sources: tsconfig.json's folders, so a new top-level folder is walked too.
const SOURCE_ROOTS = (JSON.parse(readFileSync(join(repoRoot, 'tsconfig.json'), 'utf8')) as { include: string[] }).include;
const GENERATED = join(repoRoot, 'common', 'generated');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (path === GENERATED) return [];
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.ts$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Each source file's relative imports (static, type-only, re-exports and dynamic), resolved to source files. */
export function importGraph(files: readonly string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const targets = importedFiles
      .map(({ fileName }) => fileName)
      .filter((specifier) => specifier.startsWith('.'))
      .map((specifier) => resolve(dirname(file), specifier).replace(/\.js$/, '.ts'))
      .filter((target) => known.has(target));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** The graph's cycles: every strongly connected set of more than one file (or a file importing itself). */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  // Tarjan's algorithm, iterative so a deep chain of imports cannot overflow the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  let next = 0;
  for (const root of graph.keys()) {
    if (index.has(root)) continue;
    const work: Array<{ node: string; edge: number }> = [{ node: root, edge: 0 }];
    index.set(root, next); low.set(root, next++); stack.push(root); onStack.add(root);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const edges = graph.get(frame.node) ?? [];
      if (frame.edge < edges.length) {
        const to = edges[frame.edge++];
        if (!index.has(to)) {
          index.set(to, next); low.set(to, next++); stack.push(to); onStack.add(to);
          work.push({ node: to, edge: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.node)!));
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        if (component.length > 1 || edges.includes(frame.node)) cycles.push(component.sort());
      }
    }
  }
  return cycles;
}

describe('imports', () => {
  it('form no cycle, type-only imports counted', () => {
    const files = SOURCE_ROOTS.flatMap((root) => sourceFiles(join(repoRoot, root)));
    expect(files.length).toBeGreaterThan(100);
    const cycles = importCycles(importGraph(files)).map((cycle) => cycle.map((file) => relative(repoRoot, file)));
    expect(cycles, 'files that import each other, directly or through others').toEqual([]);
  });

  it('finds every cycle of a graph, and only those', () => {
    const graph = new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]]);
    expect(importCycles(graph)).toEqual([['a', 'b', 'c']]);
    expect(importCycles(new Map([['a', ['a']]]))).toEqual([['a']]);
    expect(importCycles(new Map([['a', ['b']], ['b', []]]))).toEqual([]);
  });
});
