import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { badRequest, type ApiError } from './errors.js';

/**
 * Turns the first schema violation into a clear 400. Used for fastify's validation
 * errors in the proxy and for the enclave's own re-validation, so both sides word
 * their refusals the same way.
 */
export function schemaError(errors: ErrorObject[] | null | undefined, where: 'body' | 'querystring' | 'params'): ApiError {
  // A value that matches none of several forms: unless one form failed on a limit (too long,
  // empty), the first form's complaint would mislead ("expected string" for a filter that may
  // also be a number or {"$in": [...]}), so say what the schema allows, in its own words.
  const limit = errors?.find((x) => !SHAPE_KEYWORDS.has(x.keyword));
  const choice = errors?.filter((x) => x.keyword === 'anyOf' && describedBy(x)).sort((a, b) => a.instancePath.length - b.instancePath.length)[0];
  const e = choice ? (limit ?? choice) : errors?.[0];
  if (!e) return badRequest(`invalid request ${where}`);
  const path = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
  switch (e.keyword) {
    case 'anyOf':
      return badRequest(`invalid value for '${path || where}': ${describedBy(e)}`, path || null, 'invalid_value');
    case 'minProperties': {
      const names = Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {});
      return names.length > 0 && e.params.limit === 1
        ? badRequest(`nothing to do: ${path ? `'${path}'` : `the request ${where}`} must have at least one of ${names.map((n) => `'${n}'`).join(', ')}`, path || null, 'invalid_value')
        : badRequest(`'${path || where}' must have at least ${e.params.limit} keys`, path || null, 'invalid_value');
    }
    case 'required': {
      const field = String(e.params.missingProperty);
      return badRequest(`missing required parameter: '${path ? `${path}.` : ''}${field}'`, path ? `${path}.${field}` : field, 'missing_required_parameter');
    }
    case 'additionalProperties': {
      const field = String(e.params.additionalProperty);
      return badRequest(`unrecognized parameter: '${path ? `${path}.` : ''}${field}'`, path ? `${path}.${field}` : field, 'unknown_parameter');
    }
    case 'type':
      return path
        ? badRequest(`invalid type for '${path}': expected ${String(e.params.type).replace(/,/g, ' or ')}`, path, 'invalid_type')
        : badRequest(`request ${where} must be a JSON ${e.params.type}`, null, 'invalid_type');
    case 'maxLength':
      return badRequest(`'${path}' is too long: at most ${e.params.limit} characters`, path, 'string_above_max_length');
    case 'minLength':
      return badRequest(`'${path}' must not be empty`, path, 'empty_string');
    case 'pattern': {
      // Schemas say in their `description` what a pattern demands, in words.
      const rule = (e.parentSchema as { description?: string } | undefined)?.description ?? 'has an invalid format';
      return badRequest(`'${path}' ${rule}`, path, 'invalid_value');
    }
    case 'minimum':
    case 'maximum':
      return badRequest(`'${path}' must be ${e.keyword === 'minimum' ? 'at least' : 'at most'} ${e.params.limit}`, path, 'out_of_range');
    case 'enum':
      return badRequest(`'${path}' must be one of: ${(e.params.allowedValues as unknown[]).join(', ')}`, path, 'invalid_value');
    case 'minItems':
      return e.params.limit === 1
        ? badRequest(`'${path}' must not be empty`, path, 'empty_array')
        : badRequest(`'${path}' must have at least ${e.params.limit} items`, path, 'array_below_min_length');
    case 'maxItems':
      return badRequest(`'${path}' has too many items: at most ${e.params.limit}`, path, 'array_above_max_length');
    case 'maxProperties':
      return badRequest(`'${path}' has too many keys: at most ${e.params.limit}`, path, 'too_many_keys');
    default:
      return badRequest(`invalid '${path || where}': ${e.message ?? 'does not match the schema'}`, path || null);
  }
}

/** Keywords that say a value has the wrong shape, rather than breaking a limit of the right one. */
const SHAPE_KEYWORDS = new Set(['type', 'anyOf', 'oneOf', 'required', 'additionalProperties', 'enum', 'const']);

/** What a schema says it accepts, in words (its `description`), when it says so. */
function describedBy(e: ErrorObject): string | undefined {
  return (e.parentSchema as { description?: string } | undefined)?.description;
}

export type HttpPart = 'body' | 'querystring' | 'params' | 'headers';

// Bodies are JSON and must carry the right types ("content": 5 is an error, not "5");
// query strings and path parameters are text, so numbers in them are coerced.
// The schemas are the service's own, so they are checked against the JSON-schema meta-schema
// by test/unit/schema-meta.test.ts rather than at every start (compiling the meta-schema cost a
// process ~0.15 s of CPU per instance).
const options = { useDefaults: true, removeAdditional: false, allErrors: false, strict: false, verbose: true, validateSchema: false } as const;
const strict = new Ajv({ ...options, coerceTypes: false });
const coercing = new Ajv({ ...options, coerceTypes: true });

/**
 * A validator for one part of a request; fastify's validator compiler in the proxy calls this
 * too. The schema is compiled at its first use, so a start does not compile every route's
 * schemas (~0.3 s of the proxy's CPU) for the few routes a process may serve.
 */
export function compileSchema(schema: object, part: HttpPart | string): ValidateFunction {
  const ajv = part === 'body' ? strict : coercing;
  let compiled: ValidateFunction | undefined;
  const compile = () => (compiled ??= ajv.compile(schema));
  const validate = ((value: unknown, context?: Parameters<ValidateFunction>[1]) => {
    const check = compile();
    const valid = check(value, context);
    validate.errors = check.errors;
    return valid;
  }) as ValidateFunction;
  // fastify passes the request as the value's parent (so ajv may replace a root value) only to
  // a validator with a schemaEnv: give it the compiled one's when it asks, at the first request.
  Object.defineProperty(validate, 'schemaEnv', { get: () => compile().schemaEnv });
  return validate;
}

/** Compiles a schema into a function that returns the typed value or throws an ApiError. */
export function validator<T>(schema: object, part: 'body' | 'querystring' | 'params'): (value: unknown) => T {
  const validate = compileSchema(schema, part);
  return (value: unknown): T => {
    if (!validate(value)) throw schemaError(validate.errors, part);
    return value as T;
  };
}
