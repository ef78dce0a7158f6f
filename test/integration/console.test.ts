import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import nacl from 'tweetnacl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedNsm } from '../../enclave/attestation/simulated-nsm.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { AWS_NITRO_ROOT_G1_PEM } from '../../protocol/attestation/aws-root.js';
import { decodeCoseSign1, decodeNitroDocument } from '../../protocol/cose.js';
import { ed25519SpkiDer } from '../../protocol/public-key.js';
import { encodeUserData } from '../../protocol/user-data.js';
import { ensureChromium } from '../helpers/chromium.js';
import { signedManifest } from '../helpers/manifests.js';
import { request } from '../helpers/http.js';
import { issueKey } from '../helpers/processes.js';
import { startService, type RunningService } from '../helpers/service.js';

// What the page.evaluate callbacks below touch, run in the browser: typed here, without the DOM library for the whole project.
declare const document: { getElementById(id: string): unknown; querySelectorAll(selector: string): { length: number } };
declare const window: unknown;
declare const localStorage: Storage;
interface Storage { getItem(key: string): string | null; [key: string]: unknown }
interface HTMLTextAreaElement { value: string }
interface HTMLOptionElement { value: string }

const artifacts = resolve(import.meta.dirname, '../../test-artifacts');
const TENANT = 'console-demo';
/** The operator key the service binds, so that a test can sign a release manifest for it. */
const operator = nacl.sign.keyPair();
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');

let svc: RunningService;
let browser: Browser;
let page: Page;
/** Whatever the page logs as an error, CSP refusals included. */
const pageErrors: string[] = [];

beforeAll(async () => {
  const executablePath = ensureChromium();
  svc = await startService({ OPERATOR_PUBKEY: b64(operator.publicKey) });
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

/** The PCRs the running service attests, read in Node (as an operator would from a build they trust). */
async function servicePcrs(): Promise<Map<number, Uint8Array>> {
  const answer = (await request(svc.baseUrl, 'GET', '/v1/attestation')).body;
  return decodeNitroDocument(decodeCoseSign1(Buffer.from(answer.code_attestation, 'base64')).payload).pcrs;
}

const pcrLine = (index: number, value: Uint8Array) => `${index}=${Buffer.from(value).toString('hex')}`;

/**
 * The host's forgery: it holds the simulated CA's intermediate key (a file in DATA_DIR), so
 * it signs a document of its own, for the page's nonce, binding keys it made, with the PCRs
 * it chooses. Against the simulated root every signature and the chain verify.
 */
async function forgedAnswer(nonceHex: string, pcrs: Map<number, Uint8Array>) {
  const [signing, box, hostOperator] = [nacl.sign.keyPair(), nacl.box.keyPair(), nacl.sign.keyPair()];
  const document = await new SimulatedNsm({ blobs: new FsBlobStore(svc.dataDir) }).attest({
    pcrs,
    publicKey: ed25519SpkiDer(signing.publicKey),
    userData: encodeUserData({ operatorKey: hostOperator.publicKey, boxPublicKey: box.publicKey }),
    nonce: Buffer.from(nonceHex, 'hex'),
  });
  return {
    code_attestation: b64(document), tee_name: 'simulated',
    tee_public_key: b64(signing.publicKey), operator_pubkey: b64(hostOperator.publicKey), tee_box_public_key: b64(box.publicKey),
  };
}

/** Clicks verify with the host's answer replaced by `forge(nonce)`; returns the verdict and the failed checks. */
async function verdictWithForgery(forge: (nonceHex: string) => Promise<unknown>) {
  await page.route('**/v1/attestation?*', async (route) => {
    const nonce = new URL(route.request().url()).searchParams.get('nonce') ?? '';
    await route.fulfill({ json: await forge(nonce) });
  });
  await page.click('#verify');
  await page.waitForSelector('#verdict[data-verdict]');
  await page.unrouteAll();
  return verdictOnPage();
}

async function verdictOnPage() {
  return {
    verdict: await page.getAttribute('#verdict', 'data-verdict'),
    text: await page.textContent('#verdict'),
    failed: await page.$$eval('#checks li.bad', (items) => items.map((li) => li.textContent ?? '')),
  };
}

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

  it('says plainly that a page served by the host proves nothing against it, and that the simulated root proves nothing', async () => {
    await page.goto(svc.baseUrl);
    expect(await page.textContent('#host-warning')).toContain('A page served by the host proves nothing against that host');
    expect(await page.textContent('#attestation')).toContain('The simulated root proves nothing at all');
  });

  it('without a pinned PCR or manifest, says it cannot verify, though the document is genuine', async () => {
    await page.click('#load-simulated-root');
    await page.waitForFunction(() => (document.getElementById('root-pem') as HTMLTextAreaElement).value.includes('BEGIN CERTIFICATE'));
    expect(await page.inputValue('#root-pem')).toBe(readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8'));
    await page.click('#verify');
    await page.waitForSelector('#verdict[data-verdict]');
    const { verdict, text, failed } = await verdictOnPage();
    expect(verdict).toBe('unpinned');
    expect(text).toMatch(/^cannot verify: nothing pins which code to expect/);
    expect(failed).toEqual([expect.stringMatching(/^pinned PCRs: nothing pins which code this is/)]);
  });

  it('verifies the real service with its PCR0 pinned, against the pinned root, and fails against another root', async () => {
    await page.fill('#pin-pcrs', pcrLine(0, (await servicePcrs()).get(0)!));
    await page.click('#verify');
    await page.waitForSelector('#verdict[data-verdict]');
    expect(await page.getAttribute('#verdict', 'data-verdict'), await page.textContent('#checks') ?? '').toBe('verified');
    const checks = await page.$$eval('#checks li', (items) => items.map((li) => `${li.className} ${li.textContent}`));
    // The sdk's checks, by the sdk's names: the page runs the sdk's verifier.
    expect(checks.map((c) => c.split(':')[0])).toEqual([
      'ok structure', 'ok signature', 'ok certificate chain', 'ok certificate validity', 'ok document age', 'ok debug mode',
      'ok nonce', 'ok PCR0', 'ok public key', 'ok operator key', 'ok box key',
    ]);
    expect(await page.textContent('#pcrs')).toMatch(/PCR0[0-9a-f]{96}/);
    const attestation = (await request(svc.baseUrl, 'GET', '/v1/attestation')).body;
    expect(await page.textContent('#keys')).toContain(attestation.tee_public_key);

    // The AWS root is a valid certificate, but not this document's root.
    const simulatedRoot = await page.inputValue('#root-pem');
    await page.fill('#root-pem', AWS_NITRO_ROOT_G1_PEM);
    await page.click('#verify');
    await page.waitForSelector('#verdict[data-verdict]');
    const other = await verdictOnPage();
    expect(other.verdict).toBe('failed');
    expect(other.failed).toEqual([expect.stringMatching(/^certificate chain: chain does not end at the pinned root/)]);
    await page.fill('#root-pem', simulatedRoot);
  });

  it('remembers the pins in localStorage across a reload', async () => {
    const pinned = await page.inputValue('#pin-pcrs');
    await page.reload();
    expect(await page.inputValue('#pin-pcrs')).toBe(pinned);
    await page.click('#load-simulated-root');
    await page.waitForFunction(() => (document.getElementById('root-pem') as HTMLTextAreaElement).value.includes('BEGIN CERTIFICATE'));
  });

  it('refuses a document the host signed itself with PCR0, PCR1, PCR2 = 0…0 and its own keys (debug mode), pinned or not', async () => {
    const zeros = new Map(Array.from({ length: 16 }, (_, i) => [i, new Uint8Array(48)]));
    const pinnedForgery = await verdictWithForgery((nonce) => forgedAnswer(nonce, zeros));
    expect(pinnedForgery.verdict).toBe('failed');
    expect(pinnedForgery.failed.map((c) => c.split(':')[0])).toEqual(['debug mode', 'PCR0']);
    expect(pinnedForgery.failed[0]).toContain('the enclave runs in debug mode, where the host can read its memory');
    mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: join(artifacts, 'console-forged.png') });

    // The attack of issue 31 item 6: before, with no pin, this showed VERIFIED.
    const pins = await page.inputValue('#pin-pcrs');
    await page.fill('#pin-pcrs', '');
    const unpinnedForgery = await verdictWithForgery((nonce) => forgedAnswer(nonce, zeros));
    expect(unpinnedForgery.verdict).toBe('unpinned');
    expect(unpinnedForgery.failed.map((c) => c.split(':')[0])).toEqual(['pinned PCRs', 'debug mode']);
    await page.fill('#pin-pcrs', pins);
  });

  it('refuses a forged document with measured PCRs other than the pinned ones', async () => {
    const other = new Map([...(await servicePcrs())].map(([i, v]) => [i, i === 0 ? new Uint8Array(48).fill(7) : v]));
    const forged = await verdictWithForgery((nonce) => forgedAnswer(nonce, other));
    expect(forged.verdict).toBe('failed');
    expect(forged.failed.map((c) => c.split(':')[0])).toEqual(['PCR0']);
  });

  it('pins a release manifest signed by the operator key the user gives, and refuses one signed by another key', async () => {
    const pcrs = await servicePcrs();
    const manifest = signedManifest({ signer: operator, pcrs: { 0: pcrs.get(0)!, 1: pcrs.get(1)!, 2: pcrs.get(2)! } });
    const pins = await page.inputValue('#pin-pcrs');
    await page.fill('#pin-pcrs', '');
    await page.fill('#pin-manifest', JSON.stringify(manifest));
    await page.fill('#pin-operator-key', b64(operator.publicKey));
    await page.click('#verify');
    await page.waitForSelector('#verdict[data-verdict]');
    expect(await page.getAttribute('#verdict', 'data-verdict'), await page.textContent('#checks') ?? '').toBe('verified');
    expect(await page.textContent('#checks li:first-child')).toMatch(/^manifest: release v-test \(simulated\) signed by the pinned operator key; pins PCR0, PCR1, PCR2$/);

    const stranger = nacl.sign.keyPair();
    await page.fill('#pin-manifest', JSON.stringify(signedManifest({ signer: stranger, pcrs: { 0: pcrs.get(0)!, 1: pcrs.get(1)!, 2: pcrs.get(2)! } })));
    await page.click('#verify');
    await page.waitForSelector('#verdict[data-verdict]');
    const refused = await verdictOnPage();
    expect(refused.verdict).toBe('failed');
    expect(refused.failed).toEqual([expect.stringMatching(/^manifest: the manifest names operator key .*, not the pinned /)]);
    await page.fill('#pin-manifest', '');
    await page.fill('#pin-operator-key', '');
    await page.fill('#pin-pcrs', pins);
  });

  it('refuses an altered document and a replayed one (its nonce is not the page\'s)', async () => {
    const verdictAfter = async (alter: (answer: any) => Promise<any>) => {
      await page.route('**/v1/attestation?*', async (route) => {
        const original = await route.fetch();
        await route.fulfill({ response: original, json: await alter(await original.json()) });
      });
      await page.click('#verify');
      await page.waitForSelector('#verdict[data-verdict]');
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

  it('offers only chat models, lists a tenant\'s memories as soon as it is named, and has an icon', async () => {
    await page.waitForSelector('#model option', { state: 'attached' });
    const offered = await page.$$eval('#model option', (options) => options.map((o) => (o as HTMLOptionElement).value));
    const health = (await request(svc.baseUrl, 'GET', '/healthz')).body;
    expect(offered).toContain('local-memory');
    expect(offered).not.toContain(health.enclave.embedding_model);
    // A tenant that already holds memories: they show without pressing Refresh.
    await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'console-listed', content: 'The heron nests by the mill pond' });
    await page.fill('#tenant', 'console-listed');
    await page.dispatchEvent('#tenant', 'change');
    await page.waitForSelector('#memory-list li:has-text("heron")');
    const icon = await page.getAttribute('link[rel="icon"]', 'href');
    const res = await fetch(new URL(icon!, svc.baseUrl));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/svg+xml');
    expect(await res.text()).toMatch(/^<svg /);
  });

  it('shows a memory holding hostile HTML as text: nothing in it runs or becomes an element', async () => {
    const hostile = '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script><b id="injected">bold</b> heron';
    await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'console-hostile', content: hostile });
    await page.fill('#tenant', 'console-hostile');
    await page.dispatchEvent('#tenant', 'change');
    await page.waitForSelector('#memory-list li:has-text("heron")');
    await page.fill('#search-query', 'heron');
    await page.click('#search');
    await page.waitForSelector('#search-results li:has-text("heron")');
    await page.fill('#chat-input', 'Tell me about the heron');
    await page.click('#chat-send');
    await page.waitForSelector('#chat-status[data-state]');
    // The markup is there, character for character, as text in the list, the results and the chat.
    expect(await page.textContent('#memory-list li .content')).toBe(hostile);
    expect(await page.textContent('#search-results li .content')).toBe(hostile);
    expect(await page.textContent('#chat-output')).toContain('<img src=x onerror=');
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.$$('#injected, main img, main script')).toEqual([]);
  });

  it('adds a memory, finds it by meaning, chats with it streamed, and deletes it', async () => {
    await page.fill('#tenant', TENANT);
    await page.dispatchEvent('#tenant', 'change');
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
    await page.waitForSelector('#verdict[data-verdict]');
    expect(await page.getAttribute('#verdict', 'data-verdict'), await page.textContent('#checks') ?? '').toBe('verified');
    mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: join(artifacts, 'console.png'), fullPage: true });

    await page.click('#memory-list li:has-text("Miso") button');
    await page.waitForFunction(() => document.querySelectorAll('#memory-list li').length === 0);
    const left = await request(svc.baseUrl, 'GET', `/v1/memory?tenant_id=${TENANT}`);
    expect(left.body.data).toEqual([]);
  });

  it('keeps the API key out of localStorage unless asked, and raised no page errors', async () => {
    // The pins are kept (public values); nothing else is.
    const kept = () => page.evaluate(() => Object.keys(localStorage).filter((key) => !key.startsWith('agent-console-pin-')));
    await page.fill('#api-key', 'sk-console-test');
    expect(await kept()).toEqual([]);
    await page.check('#remember-key');
    expect(await page.evaluate(() => localStorage.getItem('agent-console-api-key'))).toBe('sk-console-test');
    await page.uncheck('#remember-key');
    expect(await kept()).toEqual([]);
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
