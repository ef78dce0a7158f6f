/**
 * What of a log line may leave the enclave for the host (issue 32, finding 5): closed-set
 * words and numbers by field name, a boot problem while nothing of a tenant has been
 * handled, and nothing else.
 */
import { describe, expect, it } from 'vitest';
import { redactForHost } from '../../enclave/observability/host-log-redaction.js';

const line = (fields: Record<string, unknown>) => JSON.stringify({ level: 30, time: 1, pid: 9, hostname: 'h', process: 'enclave', msg: 'handled', ...fields });
const redact = (fields: Record<string, unknown>, booting = false) => JSON.parse(redactForHost(line(fields), booting)!) as Record<string, unknown>;

describe('redactForHost', () => {
  it('keeps routes, codes, stages and numbers, and drops every other field, counting them', () => {
    expect(redact({ route: 'AddMemory', status: 200, ms: 3, stage: 'serving', reqId: 'r-1', tenant: 'acme', file: '/x/keys.json', query: 'q' })).toEqual({
      level: 30, time: 1, msg: 'handled', process: 'enclave', route: 'AddMemory', status: 200, ms: 3, stage: 'serving', redacted: 4,
    });
  });

  it('drops a word field whose value is not a short word (a free text smuggled into a closed-set name)', () => {
    expect(redact({ code: 'the tenant acme wrote this' })).toEqual({ level: 30, time: 1, msg: 'handled', process: 'enclave', redacted: 1 });
    expect(redact({ status: 'acme' })).toHaveProperty('redacted', 1);
  });

  it('passes a boot problem with quoted text cut out, and no problem once serving', () => {
    const problem = 'invalid API keys file:\n  entry 1 (sha256:ab): invalid tenant id "acme corp": 1–64 characters';
    expect(redact({ problem }, true).problem).toBe('invalid API keys file:\n  entry 1 (sha256:ab): invalid tenant id "…": 1–64 characters');
    expect(redact({ problem }, false)).not.toHaveProperty('problem');
    expect(redact({ err: { type: 'Error', message: 'KMS: AccessDeniedException' } }, true)).toMatchObject({ errType: 'Error', problem: 'KMS: AccessDeniedException' });
    expect(redact({ err: { type: 'Error', message: 'tenant acme' } }, false)).toEqual({ level: 30, time: 1, msg: 'handled', process: 'enclave', errType: 'Error', redacted: 1 });
  });

  it('lets nothing out of a line that is not JSON', () => {
    expect(redactForHost('acme: the sky is green', true)).toBeUndefined();
  });
});
