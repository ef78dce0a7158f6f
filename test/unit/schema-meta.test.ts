import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { chatHeadersSchema } from '../../common/chat-schema.js';
import { apiRoutes } from '../../common/routes.js';
import { addMemorySchema, sealedRequestHeadSchema } from '../../common/schemas.js';
import { compileSchema, type HttpPart } from '../../common/validation.js';
import { memoryTools } from '../../gateway/mcp.js';

/**
 * Every schema the proxy, the enclave and the gateway validate requests with. They compile
 * without the meta-schema check and at their first use (common/validation.ts), so a schema
 * that is not valid JSON schema is caught here rather than at a start or a first request.
 */
const schemas: [name: string, schema: object, part: HttpPart][] = [
  ...Object.entries(apiRoutes).flatMap(([name, route]) =>
    (Object.entries(route.schema) as [HttpPart, object | undefined][])
      .filter((entry): entry is [HttpPart, object] => entry[1] !== undefined)
      .map(([part, schema]): [string, object, HttpPart] => [`${name} ${part}`, schema, part])),
  ['chat headers (enclave)', chatHeadersSchema, 'params'],
  ['sealed request head (enclave)', sealedRequestHeadSchema, 'body'],
  ['add memory (enclave import and chat tools)', addMemorySchema, 'body'],
  ...memoryTools.map(({ name, inputSchema }): [string, object, HttpPart] => [`gateway tool ${name}`, inputSchema, 'body']),
];

describe("the service's request schemas", () => {
  it('are valid JSON schemas (draft-07 meta-schema)', () => {
    const ajv = new Ajv({ strict: false });
    const invalid = schemas.filter(([, schema]) => !ajv.validateSchema(schema)).map(([name]) => name);
    expect(schemas.length).toBeGreaterThan(40);
    expect(invalid).toEqual([]);
  });

  it('compile, at their first use', () => {
    for (const [name, schema, part] of schemas) expect(() => compileSchema(schema, part)({}), name).not.toThrow();
  });

  it('a schema that is not one is refused by the first check', () => {
    const ajv = new Ajv({ strict: false });
    expect(ajv.validateSchema({ type: 'object', properties: { n: { type: 'integr' } } })).toBe(false);
  });
});
