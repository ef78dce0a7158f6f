import { describe, expect, it } from 'vitest';
import { ApiError } from '../../common/errors.js';
import { addMemorySchema, listOrQueryMemorySchema, type ListOrQueryMemoryInput } from '../../common/schemas.js';
import { validator } from '../../common/validation.js';
import { parseJsonBody, parseTarget } from '../../enclave/api/request.js';

const validAdd = validator(addMemorySchema, 'body');
const validQuery = validator<ListOrQueryMemoryInput>(listOrQueryMemorySchema, 'querystring');

function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error('expected a refusal');
}

describe('shared schemas', () => {
  it('accepts a valid memory with metadata', () => {
    expect(validAdd({ content: 'x', tenant_id: 'a.b-c_d:e@f', metadata: { source: 's', n: 1, ok: true, none: null } })).toBeTruthy();
  });

  it('does not coerce body types (5 is not "5")', () => {
    expect(refusal(() => validAdd({ content: 5, tenant_id: 't' })).toBody().error).toMatchObject({ param: 'content', code: 'invalid_type' });
  });

  it('refuses nested metadata values and too many keys', () => {
    expect(refusal(() => validAdd({ content: 'x', tenant_id: 't', metadata: { deep: { a: 1 } } })).status).toBe(400);
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, i]));
    expect(refusal(() => validAdd({ content: 'x', tenant_id: 't', metadata: many })).code).toBe('too_many_keys');
  });

  it('coerces query-string numbers and applies the top_k default', () => {
    expect(validQuery({ query: 'q', tenant_id: 't', top_k: '7' }).top_k).toBe(7);
    // No default here: without a query the request is a list (limit, after); the route applies top_k's default of 5.
    expect(validQuery({ query: 'q', tenant_id: 't' }).top_k).toBeUndefined();
    expect(refusal(() => validQuery({ query: 'q', tenant_id: 't', top_k: '1e9' })).code).toBe('out_of_range');
  });
});

describe('enclave request parsing', () => {
  it('reads the path and query from the raw target', () => {
    expect(parseTarget('/v1/memory?query=a%20b&tenant_id=t&top_k=3')).toEqual({ path: '/v1/memory', query: { query: 'a b', tenant_id: 't', top_k: '3' } });
  });

  it('refuses targets that are not paths', () => {
    expect(refusal(() => parseTarget('http://evil.example/v1/memory')).status).toBe(400);
    expect(refusal(() => parseTarget('')).status).toBe(400);
  });

  it('refuses empty and non-JSON bodies', () => {
    expect(refusal(() => parseJsonBody(new Uint8Array())).code).toBe('missing_body');
    expect(refusal(() => parseJsonBody(Buffer.from('{nope'))).code).toBe('invalid_json');
    expect(parseJsonBody(Buffer.from('{"a":1}'))).toEqual({ a: 1 });
  });
});
