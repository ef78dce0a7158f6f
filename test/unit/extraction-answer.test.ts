import { describe, expect, it } from 'vitest';
import { MAX_ANSWER_CHARS, readDecisions, readFacts } from '../../enclave/chat/extraction-answer.js';

const refused = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    expect(err).toMatchObject({ code: 'model_bad_extraction', status: 502 });
    return (err as Error).message;
  }
  throw new Error('not refused');
};

describe('the model\'s extraction answers, read as untrusted input', () => {
  it('facts: the exact shape, or one ```json fence around it', () => {
    expect(readFacts('{"facts": ["  I live in Porto "]}')).toEqual(['I live in Porto']);
    expect(readFacts('```json\n{"facts": []}\n```')).toEqual([]);
    expect(refused(() => readFacts('Here you go: {"facts": []}'))).toMatch(/not JSON/);
    expect(refused(() => readFacts('["I live in Porto"]'))).toMatch(/not a JSON object/);
    expect(refused(() => readFacts('{"facts": ["", "x"]}'))).toMatch(/each fact/);
    expect(refused(() => readFacts(null))).toMatch(/no text/);
    expect(refused(() => readFacts(`{"facts": ["${'x'.repeat(MAX_ANSWER_CHARS)}"]}`))).toMatch(/longer than/);
  });

  it('decisions: only shown ids, each once, at most one add and one change per fact', () => {
    const shown = new Set(['0', '1', '2']);
    expect(readDecisions('{"actions": [{"event": "UPDATE", "id": "1", "text": "b", "old_memory": "ignored"}, {"event": "ADD", "text": "c"}]}', shown, 2))
      .toEqual([{ event: 'UPDATE', id: '1', text: 'b' }, { event: 'ADD', text: 'c' }]);
    expect(readDecisions('{"actions": [{"event": "NONE", "id": "0"}, {"event": "NONE", "id": "2"}]}', shown, 1)).toHaveLength(2);
    expect(refused(() => readDecisions('{"actions": [{"event": "DELETE", "id": 0}]}', shown, 1))).toMatch(/not one of the memories/);
    expect(refused(() => readDecisions('{"actions": [{"event": "DELETE", "id": "mem_0123"}]}', shown, 1))).toMatch(/not one of the memories/);
    expect(refused(() => readDecisions('{"actions": [{"event": "DELETE", "id": "0"}, {"event": "DELETE", "id": "1"}]}', shown, 1))).toMatch(/at most one per fact/);
    expect(refused(() => readDecisions('{"actions": [{"event": "DELETE", "id": "0"}, {"event": "UPDATE", "id": "0", "text": "x"}]}', shown, 2))).toMatch(/named twice/);
    expect(refused(() => readDecisions('{"actions": [{"event": "ADD", "text": "a"}, {"event": "ADD", "text": "b"}]}', shown, 1))).toMatch(/adds 2 memories from 1 facts/);
    expect(refused(() => readDecisions('{"actions": {"event": "ADD"}}', shown, 1))).toMatch(/not a list/);
    expect(refused(() => readDecisions('{"actions": [{"event": "delete", "id": "0"}]}', shown, 1))).toMatch(/none of ADD/);
  });
});
