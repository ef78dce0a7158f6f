import { describe, expect, it } from 'vitest';
import { openFailureLevel } from '../../placement/controller.js';

describe('how a failed shard open is logged', () => {
  it('info the first time (a cluster starting), a warning the second, an error every fifth time in a row, quiet in between', () => {
    expect(Array.from({ length: 11 }, (_, i) => openFailureLevel(i + 1)))
      .toEqual(['info', 'warn', 'debug', 'debug', 'error', 'debug', 'debug', 'debug', 'debug', 'error', 'debug']);
  });
});
