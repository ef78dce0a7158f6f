import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AWS_NITRO_ROOT_G1_PEM } from '../../sdk/attestation/aws-root.js';
import { ensureChromium } from '../helpers/chromium.js';
import { request } from '../helpers/http.js';
import { issueKey } from '../helpers/processes.js';
import { startService, type RunningService } from '../helpers/service.js';

const artifacts = resolve(import.meta.dirname, '../../test-artifacts');
const TENANT = 'console-demo';

let svc: RunningService;
let browser: Browser;
let page: Page;
/** Whatever the page logs as an error, CSP refusals included. */
const pageErrors: string[] = [];

beforeAll(async () => {
  const executablePath = ensureChromium();
  svc = await startService();
  // --no-sandbox: CI runs the tests as root, where Chromium's sandbox cannot start.
  browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  page.on('console', (msg) => { if (msg.type() === 'error') pageErrors.push(msg.text()); });
  page.on('pageerror', (err) => pageErrors.push(err.message));
}, 300_000);
afterAll(async () => {
  await browser?.close();
  await svc?.stop();
});

describe('the console at GET /', () => {
  it('is served under a strict Content-Security-Policy, with no inline script', async () => {
    const res = await fetch(`${svc.baseUrl}/`);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toContain('unsafe');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await res.text();
    // Every script has a src on this origin; no inline handlers.
    for (const tag of html.match(/<script\b[^>]*>/g) ?? []) expect(tag).toMatch(/src="\/console\/[a-z-]+\.js"/);
    expect(html).not.toMatch(/<script\b[^>]*>(?!<\/script>)/);
    expect(html).not.toMatch(/\son[a-z]+=/i);
    expect(html).not.toMatch(/https?:\/\//);
    const js = await fetch(`${svc.baseUrl}/console/console.js`);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect((await fetch(`${svc.baseUrl}/console/..%2Fapp.js`)).status).toBe(404);
  });

  it('verifies the attestation in the browser against the pinned root, and fails against another root', async () => {
    await page.goto(svc.baseUrl);
    // The AWS root is a valid certificate, but not this document's root.
    await page.fill('#root-pem', AWS_NITRO_ROOT_G1_PEM);
    await page.click('#verify');
    await page.waitForSelector('#verdict[data-verdict]');
    expect(await page.getAttribute('#verdict', 'data-verdict')).toBe('failed');
    expect(await page.textContent('#checks')).toContain('certificate chain: the document\'s chain does not start at the pinned root');

    await page.click('#load-simulated-root');
    await page.waitForFunction(() => (document.getElementById('root-pem') as HTMLTextAreaElement).value.includes('BEGIN CERTIFICATE') && !(document.getElementById('root-pem') as HTMLTextAreaElement).value.includes('MIICETCCAZag'));
    expect(await page.inputValue('#root-pem')).toBe(readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8'));
    await page.click('#verify');
    await page.waitForSelector('#verdict[data-verdict="verified"], #verdict[data-verdict="failed"]');
    expect(await page.getAttribute('#verdict', 'data-verdict'), await page.textContent('#checks') ?? '').toBe('verified');
    const checks = await page.$$eval('#checks li', (items) => items.map((li) => `${li.className} ${li.textContent}`));
    expect(checks.map((c) => c.split(':')[0])).toEqual(['ok structure', 'ok signature', 'ok certificate chain', 'ok certificate validity', 'ok nonce', 'ok key binding']);
    expect(await page.textContent('#pcrs')).toMatch(/PCR0[0-9a-f]{96}/);
    const attestation = (await request(svc.baseUrl, 'GET', '/v1/attestation')).body;
    expect(await page.textContent('#keys')).toContain(attestation.tee_public_key);
  });

  it('refuses an altered document and a replayed one (its nonce is not the page\'s)', async () => {
    const verdictAfter = async (alter: (answer: any) => Promise<any>) => {
      await page.route('**/v1/attestation?*', async (route) => {
        const original = await route.fetch();
        await route.fulfill({ response: original, json: await alter(await original.json()) });
      });
      await page.click('#verify');
      await page.waitForSelector('#verdict[data-verdict="verified"], #verdict[data-verdict="failed"]');
      await page.unrouteAll();
      return { verdict: await page.getAttribute('#verdict', 'data-verdict'), checks: await page.$$eval('#checks li.bad', (items) => items.map((li) => li.textContent)) };
    };
    // The last byte of a COSE_Sign1 is the signature's.
    const flipped = await verdictAfter(async (answer) => {
      const doc = Buffer.from(answer.code_attestation, 'base64');
      doc[doc.length - 1] ^= 1;
      return { ...answer, code_attestation: doc.toString('base64') };
    });
    expect(flipped.verdict).toBe('failed');
    expect(flipped.checks).toEqual([expect.stringMatching(/^signature: /)]);
    // A genuine document made for another nonce: a replay.
    const replayed = await verdictAfter(async () => (await request(svc.baseUrl, 'GET', `/v1/attestation?nonce=${'ab'.repeat(32)}`)).body);
    expect(replayed.verdict).toBe('failed');
    expect(replayed.checks).toEqual([expect.stringMatching(/^nonce: /)]);
  });

  it('adds a memory, finds it by meaning, chats with it streamed, and deletes it', async () => {
    await page.fill('#tenant', TENANT);
    await page.fill('#memory-content', 'My cat is called Miso and she loves sardines');
    await page.click('#add-memory');
    await page.waitForSelector('#memory-list li:has-text("Miso")');

    await page.fill('#search-query', 'what food does my cat like');
    await page.click('#search');
    await page.waitForSelector('#search-results li:has-text("sardines")');

    await page.fill('#chat-input', 'What is my cat called?');
    await page.click('#chat-send');
    await page.waitForSelector('#chat-status[data-state]');
    expect(await page.getAttribute('#chat-status', 'data-state')).toBe('done');
    expect(await page.textContent('#chat-output')).toContain('My cat is called Miso');

    // The screenshot shows the page as a user sees it: verified (the test before left a refused replay).
    await page.click('#verify');
    await page.waitForSelector('#verdict[data-verdict="verified"]');
    mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: join(artifacts, 'console.png'), fullPage: true });

    await page.click('#memory-list li:has-text("Miso") button');
    await page.waitForFunction(() => document.querySelectorAll('#memory-list li').length === 0);
    const left = await request(svc.baseUrl, 'GET', `/v1/memory?tenant_id=${TENANT}`);
    expect(left.body.data).toEqual([]);
  });

  it('keeps the API key out of localStorage unless asked, and raised no page errors', async () => {
    await page.fill('#api-key', 'sk-console-test');
    expect(await page.evaluate(() => Object.keys(localStorage))).toEqual([]);
    await page.check('#remember-key');
    expect(await page.evaluate(() => localStorage.getItem('agent-console-api-key'))).toBe('sk-console-test');
    await page.uncheck('#remember-key');
    expect(await page.evaluate(() => Object.keys(localStorage))).toEqual([]);
    await page.fill('#api-key', '');
    // A CSP refusal or a script error would show here ("Refused to …").
    expect(pageErrors.filter((e) => !/the server responded with a status of 4\d\d/.test(e))).toEqual([]);
  });
});

describe('GET /openapi.json and /docs', () => {
  it('serves the document generated from the route table and a readable page of it', async () => {
    const doc = (await request(svc.baseUrl, 'GET', '/openapi.json')).body;
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.paths['/v1/memory/{id}']).toHaveProperty('delete');
    const res = await fetch(`${svc.baseUrl}/docs`);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await res.text();
    for (const path of Object.keys(doc.paths)) expect(html).toContain(`<code>${path}</code>`);
    expect(html).not.toMatch(/<script/);
  });
});

describe('the console with API keys on', () => {
  let keyed: RunningService;
  let dir: string;
  let key: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agent-console-keys-'));
    key = issueKey(join(dir, 'keys.json'), ['keyed-tenant']);
    keyed = await startService({ API_KEYS_FILE: join(dir, 'keys.json') });
  });
  afterAll(async () => {
    await keyed?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('says a key is needed, then works with the key sent as a Bearer token', async () => {
    const keyedPage = await browser.newPage();
    try {
      await keyedPage.goto(keyed.baseUrl);
      await keyedPage.waitForSelector('#status:has-text("missing_api_key")');
      await keyedPage.fill('#tenant', 'keyed-tenant');
      await keyedPage.fill('#api-key', key);
      await keyedPage.dispatchEvent('#api-key', 'change');
      await keyedPage.waitForSelector('#model option', { state: 'attached' });
      await keyedPage.fill('#memory-content', 'The keyed console remembers the heron');
      await keyedPage.click('#add-memory');
      await keyedPage.waitForSelector('#memory-list li:has-text("heron")');
      // Another tenant than the key holds: refused, and the page says so.
      await keyedPage.fill('#tenant', 'not-my-tenant');
      await keyedPage.click('#refresh-list');
      await keyedPage.waitForSelector('#status:has-text("tenant_not_allowed")');
      expect(await keyedPage.evaluate(() => Object.keys(localStorage))).toEqual([]);
      const listed = await request(keyed.baseUrl, 'GET', '/v1/memory?tenant_id=keyed-tenant', undefined, { authorization: `Bearer ${key}` });
      expect(listed.body.data.map((m: any) => m.content)).toEqual(['The keyed console remembers the heron']);
    } finally {
      await keyedPage.close();
    }
  });
});
