import { describe, expect, it } from 'vitest';
import { chatCompletionSchema, chatHeadersSchema, type ChatCompletionInput } from '../../common/chat-schema.js';
import { ApiError } from '../../common/errors.js';
import { validator } from '../../common/validation.js';

const validChat = validator<ChatCompletionInput>(chatCompletionSchema, 'body');
const validHeaders = validator(chatHeadersSchema, 'params');

function refusal(fn: () => unknown) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return (err as ApiError).toBody().error;
  }
  throw new Error('expected a refusal');
}

const user = { role: 'user', content: 'hi' };

describe('chat completion schema', () => {
  it('accepts the OpenAI request with pass-through options', () => {
    const body = {
      model: 'gpt-4o-mini',
      messages: [{ role: 'system', content: 's' }, user, { role: 'assistant', content: 'a' }],
      temperature: 0.2, top_p: 1, max_tokens: 50, stop: ['x'], n: 2, seed: 7, user: 'u',
      response_format: { type: 'json_object' }, vendor_extension: { anything: true },
    };
    expect(validChat(structuredClone(body))).toEqual(body);
  });

  it('accepts tool messages and assistant tool calls with null content', () => {
    expect(() => validChat({
      model: 'm',
      messages: [
        user,
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: '{"ok":true}' },
      ],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      tool_choice: 'auto',
    })).not.toThrow();
  });

  it.each([
    ['missing model', { messages: [user] }, 'model', 'missing_required_parameter'],
    ['empty model', { model: '', messages: [user] }, 'model', 'empty_string'],
    ['numeric model', { model: 4, messages: [user] }, 'model', 'invalid_type'],
    ['missing messages', { model: 'm' }, 'messages', 'missing_required_parameter'],
    ['empty messages', { model: 'm', messages: [] }, 'messages', 'empty_array'],
    ['messages not an array', { model: 'm', messages: user }, 'messages', 'invalid_type'],
    ['unknown role', { model: 'm', messages: [{ role: 'wizard', content: 'x' }] }, 'messages.0.role', 'invalid_value'],
    ['missing role', { model: 'm', messages: [{ content: 'x' }] }, 'messages.0.role', 'missing_required_parameter'],
    ['numeric content', { model: 'm', messages: [{ role: 'user', content: 5 }] }, 'messages.0.content', 'invalid_type'],
    ['numeric content', { model: 'm', messages: [{ role: 'user', content: 7 }] }, 'messages.0.content', 'invalid_type'],
    ['a content part without a type', { model: 'm', messages: [{ role: 'user', content: [{ text: 'x' }] }] }, 'messages.0.content', 'invalid_type'],
    ['null user content', { model: 'm', messages: [{ role: 'user', content: null }] }, 'messages.0.content', 'invalid_type'],
    ['missing content', { model: 'm', messages: [{ role: 'user' }] }, 'messages.0.content', 'missing_required_parameter'],
    ['tool message without tool_call_id', { model: 'm', messages: [{ role: 'tool', content: 'x' }] }, 'messages.0.tool_call_id', 'missing_required_parameter'],
    ['stream not a boolean', { model: 'm', messages: [user], stream: 'yes' }, 'stream', 'invalid_type'],
    ['tools not an array', { model: 'm', messages: [user], tools: {} }, 'tools', 'invalid_type'],
    ['n out of range', { model: 'm', messages: [user], n: 0 }, 'n', 'out_of_range'],
  ])('refuses %s', (_name, body, param, code) => {
    expect(refusal(() => validChat(body))).toMatchObject({ param, code, type: 'invalid_request_error' });
  });
});

describe('chat tenant headers', () => {
  it('use the memory tenant pattern', () => {
    expect(() => validHeaders({ organization_id: 'org.a-1', 'openai-organization': 'x@y' })).not.toThrow();
    expect(refusal(() => validHeaders({ organization_id: 'a/b' }))).toMatchObject({ param: 'organization_id', code: 'invalid_value' });
    expect(refusal(() => validHeaders({ 'openai-organization': 'x'.repeat(129) })).param).toBe('openai-organization');
  });
});
