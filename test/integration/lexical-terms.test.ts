import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mulberry32 } from '../../scripts/lib/mulberry32.js';
import { expectError, request } from '../helpers/http.js';
import { issueKey } from '../helpers/processes.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Issue 31, item 2: one key adding memories of random words (each word a new term for the
 * lexical index, none of it counted by MAX_STORED_BYTES) stalled the enclave, then exhausted
 * its heap, and every restart replayed the log into the same death. With the default limits
 * the tenant is refused with 409 term_limit_reached after MAX_TERMS_PER_TENANT (200,000)
 * distinct words, a few dozen memories in, far from the 2,048-memory move to the inverted
 * index and its heap; another key's tenant is served throughout; a restart recovers what
 * was accepted.
 */
let svc: RunningService;
let dir: string;
let attacker: string;
let victim: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-terms-'));
  const keys = join(dir, 'keys.json');
  attacker = issueKey(keys, ['random-words']);
  victim = issueKey(keys, ['alice']);
  svc = await startService({ API_KEYS_FILE: keys });
});
afterAll(async () => {
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const random = mulberry32(2070);
/** About 30 KiB of words no memory holds (3,400 distinct: under MAX_TERMS_PER_MEMORY, 4,096). */
const randomWords = () => Array.from({ length: 3400 }, () => Array.from({ length: 7 + Math.floor(random() * 3) }, () => String.fromCharCode(97 + Math.floor(random() * 26))).join('')).join(' ');
const call = (key: string, method: string, path: string, body?: unknown) => request(svc.baseUrl, method, path, body, { authorization: `Bearer ${key}` });

/** Its own budget: some 15 s alone, several times that with both cores busy (it waits on events, not time). */
const UNDER_LOAD = 180_000;

describe('a tenant adding memories of random words', () => {
  it('is refused with 409 term_limit_reached well before danger, another tenant is served meanwhile, and a restart recovers', async () => {
    const note = await call(victim, 'POST', '/v1/memory', { tenant_id: 'alice', content: 'Alice keeps the spare key under the blue flowerpot' });
    expect(note.status).toBe(200);

    const accepted: string[] = [];
    let refused;
    for (let i = 0; i < 200 && !refused; i++) {
      const res = await call(attacker, 'POST', '/v1/memory', { tenant_id: 'random-words', content: randomWords() });
      if (res.status === 200) accepted.push(res.body.id);
      else refused = res;
      // The other tenant is served between every two of the attacker's adds.
      const found = await call(victim, 'GET', '/v1/memory?tenant_id=alice&query=where%20is%20the%20spare%20key&top_k=1');
      expect(found.status, found.text).toBe(200);
      expect(found.body.data[0].id).toBe(note.body.id);
    }
    expect(refused).toBeDefined();
    const error = expectError(refused!, 409, 'term_limit_reached');
    expect(error.param).toBe('tenant_id');
    expect(error.message).toMatch(/maximum of 200,000/);
    // 200,000 words of about 3,400 a memory: refused near the 59th, far from 2,048 memories.
    expect(accepted.length).toBeGreaterThan(50);
    expect(accepted.length).toBeLessThan(62);
    // A memory of words the tenant holds is still taken; new words for the other tenant too.
    expect((await call(victim, 'POST', '/v1/memory', { tenant_id: 'alice', content: 'Bob waters the ferns on Thursdays' })).status).toBe(200);

    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    expect(svc.output()).toMatch(/memories recovered/);
    expect(svc.output()).not.toMatch(/failed to apply at recovery/);
    for (const id of [accepted[0], accepted[accepted.length - 1]]) {
      expect((await call(attacker, 'GET', `/v1/memory/${id}?tenant_id=random-words`)).status).toBe(200);
    }
    const listed = await call(attacker, 'GET', '/v1/memory?tenant_id=random-words&limit=100');
    expect(listed.body.data).toHaveLength(accepted.length);
    const ferns = await call(victim, 'GET', '/v1/memory?tenant_id=alice&query=ferns&top_k=1');
    expect(ferns.body.data[0].content).toBe('Bob waters the ferns on Thursdays');
    // The limit holds after the restart; deleting memories makes room (their words are freed).
    expectError(await call(attacker, 'POST', '/v1/memory', { tenant_id: 'random-words', content: randomWords() }), 409, 'term_limit_reached');
    for (const id of accepted.slice(0, 2)) expect((await call(attacker, 'DELETE', `/v1/memory/${id}?tenant_id=random-words`)).status).toBe(200);
    expect((await call(attacker, 'POST', '/v1/memory', { tenant_id: 'random-words', content: randomWords() })).status).toBe(200);
  }, UNDER_LOAD);
});
