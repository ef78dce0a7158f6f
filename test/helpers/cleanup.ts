import { afterAll } from 'vitest';
import { endLeftovers } from './children.js';

// After each test file (setup file of vitest.config.ts): a process still running here was
// left by a test that timed out or forgot to stop it (children.ts says why it matters).
afterAll(async () => {
  const left = await endLeftovers();
  if (left.length > 0) console.warn(`ended ${left.length} process(es) a test left running: ${left.join(', ')}`);
});
