/** Loaders of the evaluation data committed in bench/eval/. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { repoRoot } from '../../common/paths.js';

export const EVAL_DIR = join(repoRoot, 'bench', 'eval');

export type QuestionKind = 'paraphrase' | 'name' | 'number' | 'preference' | 'multi-fact';

export interface RetrievalSet {
  description: string;
  tenants: {
    tenant_id: string;
    about: string;
    memories: { id: string; content: string }[];
    questions: { query: string; relevant: string[]; kind: QuestionKind }[];
  }[];
}

export interface SimilarityPair {
  score: number;
  a: string;
  b: string;
}

export async function loadRetrievalSet(file = join(EVAL_DIR, 'retrieval-set.json')): Promise<RetrievalSet> {
  return JSON.parse(await readFile(file, 'utf8')) as RetrievalSet;
}

/** Reads `score<TAB>sentence<TAB>sentence` lines; lines starting with # are comments. */
export async function loadSimilarityPairs(name: 'dev' | 'test'): Promise<SimilarityPair[]> {
  const text = await readFile(join(EVAL_DIR, `similarity-${name}.tsv`), 'utf8');
  return text
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('#'))
    .map((line, i) => {
      const [score, a, b] = line.split('\t');
      if (b === undefined || Number.isNaN(Number(score))) throw new Error(`similarity-${name}.tsv: bad pair ${i + 1}: ${line}`);
      return { score: Number(score), a, b };
    });
}
