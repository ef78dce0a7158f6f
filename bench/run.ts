import { memoryBench } from './memory.js';

/** `npm run bench`: every benchmark in turn; each prints its own figures. */
const benches: Array<[string, () => Promise<void>]> = [['memory', memoryBench]];

for (const [name, run] of benches) {
  console.log(`\n== ${name}`);
  await run();
}
