// The web console: plain DOM code, no framework, nothing fetched from another origin
// (the proxy's Content-Security-Policy allows none). Every value from the service (a
// memory, a model's answer) is shown with textContent, never parsed as HTML.

import { currentPins, restorePins } from './pins.js';
// The sdk's attestation verifier, bundled from sdk/attestation at build time: no copy of it here.
import { checkAttestationAnswer, toHex } from './verifier.js';

const $ = (id) => document.getElementById(id);
const KEY_STORAGE = 'agent-console-api-key';

// The API key lives in this page's memory unless the user asks to keep it.
const remembered = localStorage.getItem(KEY_STORAGE);
if (remembered) {
  $('api-key').value = remembered;
  $('remember-key').checked = true;
}
const rememberKey = () => {
  if ($('remember-key').checked && $('api-key').value) localStorage.setItem(KEY_STORAGE, $('api-key').value);
  else localStorage.removeItem(KEY_STORAGE);
};
$('remember-key').addEventListener('change', rememberKey);
$('api-key').addEventListener('input', rememberKey);

const tenant = () => $('tenant').value.trim();

function headers(extra = {}) {
  const h = { ...extra };
  const key = $('api-key').value.trim();
  if (key) h.authorization = `Bearer ${key}`;
  return h;
}

function showError(message) {
  $('status').textContent = message;
}

/** fetch + JSON, turning the service's OpenAI-shaped errors into one readable line. */
async function api(method, path, body) {
  showError('');
  const res = await fetch(path, {
    method,
    headers: headers(body === undefined ? {} : { 'content-type': 'application/json' }),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json().catch(() => undefined);
  if (!res.ok) {
    const message = json?.error ? `${json.error.code ?? res.status}: ${json.error.message}` : `HTTP ${res.status}`;
    showError(`${method} ${path.split('?')[0]} failed — ${message}`);
    throw new Error(message);
  }
  return json;
}

const el = (tag, text, className) => {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
};

// 1. Attestation

$('root-file').addEventListener('change', async () => {
  const file = $('root-file').files[0];
  if (file) $('root-pem').value = await file.text();
});

$('load-simulated-root').addEventListener('click', async () => {
  showError('');
  const res = await fetch('/console/simulated-root.pem');
  if (!res.ok) {
    showError('this proxy offers no simulated root (the enclave is not simulated): paste the root you trust');
    return;
  }
  $('root-pem').value = await res.text();
});

restorePins();

/** The verdict line: verified, not verified, or cannot verify (nothing pinned which code to expect). */
function showVerdict(result, answer) {
  const verdict = $('verdict');
  const [state, text] = result.ok ? ['verified', `verified: the ${answer.tee_name} enclave runs the pinned code, checked against the pinned root`]
    : !result.pinned ? ['unpinned', 'cannot verify: nothing pins which code to expect. Give the PCRs of a build you trust, or a signed release manifest and the operator key']
      : ['failed', 'NOT verified'];
  verdict.textContent = text;
  verdict.className = `verdict ${result.ok ? 'ok' : 'bad'}`;
  verdict.dataset.verdict = state;
}

function showDocument(document, answer) {
  const keys = $('keys');
  keys.replaceChildren();
  for (const [name, value] of [
    ['tee_name', answer.tee_name],
    ['tee_public_key (Ed25519, signs every answer)', answer.tee_public_key],
    ['tee_box_public_key (X25519, for sealed requests)', answer.tee_box_public_key],
    ['operator_pubkey', answer.operator_pubkey],
    ['module', `${document.moduleId}, ${document.timestamp.toISOString()}`],
    ['signing certificate', document.certificate.subject],
  ]) keys.append(el('dt', name), el('dd', value));
  // PCR0–2 always (all zero means debug mode); the others only when something was measured.
  const shown = Object.entries(document.pcrs).filter(([index, hex]) => Number(index) <= 2 || /[^0]/.test(hex));
  $('pcrs').querySelector('tbody').replaceChildren(...shown.map(([index, hex]) => {
    const tr = el('tr');
    tr.append(el('td', `PCR${index}`), el('td', hex));
    return tr;
  }));
  $('attestation-details').hidden = false;
}

$('verify').addEventListener('click', async () => {
  const verdict = $('verdict');
  verdict.className = 'verdict';
  verdict.textContent = 'checking…';
  delete verdict.dataset.verdict;
  $('checks').replaceChildren();
  $('attestation-details').hidden = true;
  // A fresh nonce: the document must echo it, proof it was made for this request.
  const nonce = crypto.getRandomValues(new Uint8Array(32));
  let result;
  let answer;
  try {
    answer = await api('GET', `/v1/attestation?nonce=${toHex(nonce)}`);
    result = await checkAttestationAnswer(answer, { nonce, rootPem: $('root-pem').value.trim(), pins: currentPins() });
  } catch (err) {
    result = { ok: false, pinned: true, checks: [{ name: 'document', ok: false, detail: err.message }] };
  }
  showVerdict(result, answer);
  for (const c of result.checks) $('checks').append(el('li', `${c.name}: ${c.detail}`, c.ok ? 'ok' : 'bad'));
  if (result.document) showDocument(result.document, answer);
});

// 2. Memories

function memoryItem(memory, onDeleted) {
  const li = el('li');
  li.dataset.id = memory.id;
  li.append(el('span', memory.content, 'content'), ' ');
  // created_at is unix seconds, as OpenAI's objects have it.
  const meta = [memory.id, new Date(memory.created_at * 1000).toLocaleString()];
  if (typeof memory.score === 'number') meta.push(`score ${memory.score.toFixed(3)}`);
  li.append(el('span', meta.join(' · '), 'meta'), ' ');
  const remove = el('button', 'Delete', 'secondary');
  remove.type = 'button';
  remove.addEventListener('click', async () => {
    await api('DELETE', `/v1/memory/${encodeURIComponent(memory.id)}?tenant_id=${encodeURIComponent(tenant())}`);
    onDeleted();
  });
  li.append(remove);
  return li;
}

let lastId = null;
async function listMemories(append = false) {
  const after = append && lastId ? `&after=${encodeURIComponent(lastId)}` : '';
  const page = await api('GET', `/v1/memory?tenant_id=${encodeURIComponent(tenant())}&limit=20${after}`);
  const items = page.data.map((m) => memoryItem(m, () => { void listMemories(); $('search-results').querySelector(`[data-id="${CSS.escape(m.id)}"]`)?.remove(); }));
  if (append) $('memory-list').append(...items);
  else $('memory-list').replaceChildren(...items);
  lastId = page.last_id;
  $('more').hidden = !page.has_more;
}

$('add-memory').addEventListener('click', async () => {
  const content = $('memory-content').value;
  if (!content.trim()) return;
  await api('POST', '/v1/memory', { content, tenant_id: tenant() });
  $('memory-content').value = '';
  await listMemories();
});
$('refresh-list').addEventListener('click', () => void listMemories());
$('more').addEventListener('click', () => void listMemories(true));

$('search').addEventListener('click', async () => {
  const query = $('search-query').value;
  if (!query.trim()) return;
  const found = await api('POST', '/v1/memory/search', { query, tenant_id: tenant(), top_k: 5 });
  $('search-results').replaceChildren(...found.data.map((m) => memoryItem(m, () => { void listMemories(); void $('search').click(); })));
  if (found.data.length === 0) $('search-results').append(el('li', 'nothing found', 'muted'));
});

// 3. Chat, streamed: Server-Sent Events read from fetch's body (EventSource cannot POST).

async function loadModels() {
  try {
    // /v1/models lists the embedding model too; /healthz names it, so chat offers only the others.
    const [models, health] = await Promise.all([api('GET', '/v1/models'), fetch('/healthz').then((r) => r.json()).catch(() => undefined)]);
    const chatModels = models.data.filter((m) => m.id !== health?.enclave?.embedding_model);
    $('model').replaceChildren(...chatModels.map((m) => { const o = el('option', m.id); o.value = m.id; return o; }));
  } catch {
    // Shown in the status line already (e.g. a key is needed); chat can still be tried.
  }
}

$('chat-send').addEventListener('click', async () => {
  const message = $('chat-input').value;
  if (!message.trim()) return;
  const output = $('chat-output');
  const status = $('chat-status');
  output.textContent = '';
  status.textContent = 'streaming…';
  delete status.dataset.state;
  showError('');
  const res = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers: headers({ 'content-type': 'application/json', organization_id: tenant() }),
    body: JSON.stringify({ model: $('model').value || 'local-memory', stream: true, messages: [{ role: 'user', content: message }] }),
  });
  if (!res.ok || !res.body) {
    const json = await res.json().catch(() => undefined);
    status.textContent = '';
    showError(`chat failed — ${json?.error ? `${json.error.code}: ${json.error.message}` : `HTTP ${res.status}`}`);
    return;
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let signed = false;
  let done = false;
  for (;;) {
    const { value, done: ended } = await reader.read();
    if (ended) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const chunk = JSON.parse(data);
        if (chunk.type === 'tee.signature') signed = true;
        else if (chunk.error) showError(`the stream ended with an error — ${chunk.error.code}: ${chunk.error.message}`);
        else output.textContent += chunk.choices?.[0]?.delta?.content ?? '';
      }
    }
  }
  status.textContent = done && signed ? 'complete; the stream ended with the enclave\'s signature event' : 'the stream ended early';
  status.dataset.state = done && signed ? 'done' : 'broken';
  // The model may have stored a memory (add_memory): show the list as it is now.
  void listMemories().catch(() => {});
});

// The list is the tenant's: another tenant, another list.
$('tenant').addEventListener('change', () => { lastId = null; void listMemories().catch(() => {}); });
// With keys on, the models and the list need the key: load them again once it is entered.
$('api-key').addEventListener('change', () => { void loadModels(); void listMemories().catch(() => {}); });
void loadModels();
void listMemories().catch(() => {});
