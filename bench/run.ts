/**
 * `npm run bench`: runs each benchmark in turn and prints its figures. Add a benchmark by
 * adding a line to the list.
 */
const benches: Array<[name: string, load: () => Promise<{ run(): Promise<void> }>]> = [
  ['memory: embedding single vs batched, query latency as a tenant grows', () => import('./memory.js')],
  ['chat: the two-process hop, memory augmentation, streamed chunk relay, offline responder', () => import('./chat.js')],
  ['storage: durable memory writes (group commit vs one fsync per write), snapshot and recovery', () => import('./storage.js')],
];

for (const [name, load] of benches) {
  process.stdout.write(`\n## ${name}\n\n`);
  await (await load()).run();
}
