/**
 * Chat completions benchmark: what the two-process hop and memory augmentation add to a
 * model call, whether streamed chunks are relayed as they arrive (not buffered), and how
 * fast the offline responder answers. Prints figures; asserts nothing.
 *
 *   npm run bench (or, alone: npm run build && node -e "import('./dist/bench/chat.js').then((m) => m.run())")
 *
 * The model is a loopback HTTP server in this process (it answers at once), so the
 * figures are the service's own cost, not a model's.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startService as startBuiltService } from '../scripts/lib/run-service.js';

const now = () => performance.timeOrigin + performance.now();
const STREAM_CHUNKS = 20;
const CHUNK_GAP_MS = 20;

function percentiles(values: number[]): string {
  const s = [...values].sort((a, b) => a - b);
  const at = (p: number) => s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
  return `p50 ${at(50).toFixed(2)} ms, p95 ${at(95).toFixed(2)} ms, max ${s[s.length - 1].toFixed(2)} ms (n=${s.length})`;
}

/** The loopback model: answers at once; streams STREAM_CHUNKS chunks CHUNK_GAP_MS apart, each carrying its send time. */
async function startModel(): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => { raw += d; });
    req.on('end', () => {
      const body = JSON.parse(raw);
      const base = { id: 'chatcmpl-bench', created: 1, model: body.model };
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let i = 0;
      const tick = () => {
        if (i++ === STREAM_CHUNKS) {
          res.end(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`);
          return;
        }
        res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: `${now()};` }, finish_reason: null }] })}\n\n`);
        setTimeout(tick, CHUNK_GAP_MS);
      };
      tick();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

/** Both processes on loopback (scripts/lib/run-service.ts), with a data folder of their own. */
async function startService(env: NodeJS.ProcessEnv): Promise<{ url: string; stop(): Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-chat-'));
  const svc = await startBuiltService({ LOG_LEVEL: 'warn', DATA_DIR: dataDir, ...env }, join(dataDir, 'service.log'));
  return {
    url: svc.baseUrl,
    async stop() {
      await svc.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

const chatBody = (model: string, stream = false) =>
  JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'what did I say about the garden and the tomatoes?' }] });

async function timeRequests(n: number, send: () => Promise<Response>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const res = await send();
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`status ${res.status}`);
    times.push(performance.now() - t);
  }
  return times;
}

export async function run(): Promise<void> {
  const model = await startModel();
  const svc = await startService({ MODEL_BASE_URL: model.url, CHAT_TOOL_ROUNDS: '0', RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0' });
  const headers = { 'content-type': 'application/json' };
  const post = (url: string, body: string, extra: Record<string, string> = {}) =>
    fetch(url, { method: 'POST', headers: { ...headers, ...extra }, body });

  try {
    // A tenant with 1,000 memories, to measure retrieval as part of a chat call.
    for (let i = 0; i < 1000; i++) {
      await post(`${svc.url}/v1/memory`, JSON.stringify({ tenant_id: 'bench', content: `note ${i}: the garden needs water, tomatoes number ${i % 37}, and a reminder about item ${i}` }));
    }
    const warm = 50;
    await timeRequests(warm, () => post(`${model.url}/chat/completions`, chatBody('m')));
    await timeRequests(warm, () => post(`${svc.url}/v1/chat/completions`, chatBody('m')));

    const n = 300;
    console.log('non-streamed completion, sequential:');
    const row = (label: string, times: number[]) => console.log(`  ${label.padEnd(44)} ${percentiles(times)}`);
    row('model directly', await timeRequests(n, () => post(`${model.url}/chat/completions`, chatBody('m'))));
    row('via proxy + enclave, no tenant', await timeRequests(n, () => post(`${svc.url}/v1/chat/completions`, chatBody('m'))));
    row('via proxy + enclave, tenant of 1,000 memories', await timeRequests(n, () => post(`${svc.url}/v1/chat/completions`, chatBody('m'), { organization_id: 'bench' })));
    row('offline responder (local-memory), same tenant', await timeRequests(n, () => post(`${svc.url}/v1/chat/completions`, chatBody('local-memory'), { organization_id: 'bench' })));

    // Streaming: how long after the model wrote a chunk the client has it.
    const delays: number[] = [];
    for (let s = 0; s < 10; s++) {
      const res = await post(`${svc.url}/v1/chat/completions`, chatBody('m', true), { organization_id: 'bench' });
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        const arrived = now();
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const line = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!line.startsWith('data: {')) continue;
          const content = JSON.parse(line.slice(6)).choices[0]?.delta?.content as string | undefined;
          if (content?.endsWith(';')) delays.push(arrived - Number(content.slice(0, -1)));
        }
      }
    }
    console.log(`streamed chunks (${STREAM_CHUNKS} per answer, ${CHUNK_GAP_MS} ms apart at the model), model write → client read:`);
    console.log(`  ${percentiles(delays)}`);

    // Offline responder throughput with 8 clients at once.
    const total = 2000;
    let sent = 0;
    const started = performance.now();
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (sent < total) {
        sent++;
        const res = await post(`${svc.url}/v1/chat/completions`, chatBody('local-memory'), { organization_id: 'bench' });
        await res.arrayBuffer();
      }
    }));
    const seconds = (performance.now() - started) / 1000;
    console.log(`offline responder, 8 concurrent clients: ${(total / seconds).toFixed(0)} completions/s (${total} in ${seconds.toFixed(2)} s)`);
  } finally {
    await svc.stop();
    model.server.close();
  }
}
