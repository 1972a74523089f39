// One worker under 1,000 concurrent streaming requests, on loopback (a test and a benchmark):
//  - every stream either completes with the tokens its prompt gives alone (greedy), or is
//    refused with a clean 429/503 carrying Retry-After; refused clients retry after it, so in
//    the end every one completes;
//  - a fresh request (its first token or its 429) and /health answer within stated bounds while
//    the load runs: /health within 1 s, a fresh request within twice the time the most the
//    worker admits (--max-waiting + --max-running) takes to drain, + 2 s;
//  - peak resident memory stays within a stated budget over the idle worker's;
//  - afterwards nothing leaked, read from /metrics: open descriptors, sequence state and KV pins
//    are back where they were before the load, no sequence is running or waiting.
// Prints a table for docs/benchmarks.md ("Load"). --streams N changes the load (default 1000).
//
// node tests/e2e/load_streams_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (tokenizer missing).
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { parseArgs, runE2e, sleep, start } from './cluster_util.mjs';

const args = parseArgs();
const STREAMS = Number(args.streams ?? 1000);
const MAX_RUNNING = 32;   // the worker's default batch
const MAX_WAITING = 200;  // the rest is refused at first
const MAX_TOKENS = 8;
const PROMPTS = 8;
// The stated bounds (docs/benchmarks.md, "Load").
const RSS_BUDGET_BYTES = 256 * 1024 * 1024;  // peak resident over the idle worker's
// A new request's first token or 429, at any point: within twice the time the most the worker
// holds (--max-waiting + --max-running requests) takes to finish at the rate measured, + 2 s.
const freshBoundS = (completedPerS) => 2 * (MAX_WAITING + MAX_RUNNING) / completedPerS + 2;
const HEALTH_MAX_S = 1;

// 1,000 sockets need more descriptors than a default soft limit of 1,024: run again under the
// hard limit when that is higher.
const soft = Number(spawnSync('bash', ['-c', 'ulimit -n'], { encoding: 'utf8' }).stdout);
if (soft < STREAMS + 512 && !process.env.FLASHSERVE_LOAD_REEXEC) {
  const r = spawnSync('bash', ['-c', 'ulimit -n "$(ulimit -Hn)" && exec "$0" "$@"', process.execPath, ...process.argv.slice(1)],
    { stdio: 'inherit', env: { ...process.env, FLASHSERVE_LOAD_REEXEC: '1' } });
  process.exit(r.status ?? 1);
}
if (soft < STREAMS + 512 && Number(spawnSync('bash', ['-c', 'ulimit -n'], { encoding: 'utf8' }).stdout) < STREAMS + 512) {
  console.log(`SKIP: ${STREAMS} streams need ${STREAMS + 512} descriptors; the limit here is ${soft} (ulimit -Hn too)`);
  process.exit(77);
}

const work = mkdtempSync(join(tmpdir(), 'flashserve-load-e2e-'));
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
let server;

function prompt(i) { return `Load test prompt number ${i % PROMPTS}: tell me something about the number ${i % PROMPTS}.`; }

// One streaming chat request. Resolves with { status, retryAfter, text, finish, firstByteS, firstTokenS }.
function stream(i, maxTokens = MAX_TOKENS) {
  const body = JSON.stringify({ model: 'tiny', stream: true, max_tokens: maxTokens, temperature: 0,
    messages: [{ role: 'user', content: prompt(i) }] });
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.base}/v1/chat/completions`, { method: 'POST', agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      const out = { status: res.statusCode, retryAfter: res.headers['retry-after'], text: '', finish: null,
        firstByteS: (performance.now() - t0) / 1000, firstTokenS: null, done: false, raw: '' };
      let pending = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        out.raw += d;
        if (res.statusCode !== 200) return;
        pending += d;
        let at;
        while ((at = pending.indexOf('\n\n')) >= 0) {
          const frame = pending.slice(0, at);
          pending = pending.slice(at + 2);
          if (!frame.startsWith('data: ')) continue;
          if (frame === 'data: [DONE]') { out.done = true; continue; }
          const chunk = JSON.parse(frame.slice(6));
          const choice = chunk.choices?.[0];
          // The first chunk that carries output (text, or the end of a choice whose token is not text).
          if ((choice?.delta?.content || choice?.finish_reason) && out.firstTokenS === null) {
            out.firstTokenS = (performance.now() - t0) / 1000;
          }
          out.text += choice?.delta?.content ?? '';
          if (choice?.finish_reason) out.finish = choice.finish_reason;
        }
      });
      res.on('end', () => resolve(out));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(120000, () => req.destroy(new Error(`stream ${i}: no answer in 120 s`)));
    req.end(body);
  });
}

async function metrics() {
  const text = await (await fetch(`${server.base}/metrics`)).text();
  const out = {};
  for (const line of text.split('\n')) {
    const m = line.match(/^([a-z_]+(?:\{[^}]*\})?) (\S+)$/);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

function percentile(values, p) {
  const s = [...values].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN;
}

// A stream until it completes: after a 429/503 it waits Retry-After and tries again.
async function client(i, tally) {
  for (let attempt = 0; ; ++attempt) {
    const r = await stream(i);
    if (r.status === 200) {
      assert.ok(r.done && r.finish, `stream ${i}: ended without [DONE] and a finish_reason: ${r.raw.slice(-300)}`);
      return r;
    }
    assert.ok(r.status === 429 || r.status === 503, `stream ${i}: status ${r.status}: ${r.raw.slice(0, 300)}`);
    const wait = Number(r.retryAfter);
    assert.ok(Number.isInteger(wait) && wait >= 1 && wait <= 60, `stream ${i}: ${r.status} with Retry-After ${r.retryAfter}`);
    assert.ok(JSON.parse(r.raw).error?.message, `stream ${i}: ${r.status} without an error body`);
    ++tally[r.status];
    assert.ok(attempt < 200, `stream ${i}: refused 200 times`);
    await sleep(wait * 1000 * (0.5 + Math.random()));  // spread the retries over the window
  }
}

// While `running()`, a fresh request every second and /health every 250 ms.
async function probes(running, tally) {
  const fresh = [], health = [];
  const freshLoop = (async () => {
    for (let n = 0; running(); ++n) {
      const r = await stream(100000 + n, 1);
      assert.ok([200, 429, 503].includes(r.status), `fresh request: ${r.status}`);
      if (r.status !== 200) ++tally[r.status];
      fresh.push(r.status === 200 ? r.firstTokenS : r.firstByteS);
      await sleep(1000);
    }
  })();
  const healthLoop = (async () => {
    while (running()) {
      const t0 = performance.now();
      const res = await fetch(`${server.base}/health`);
      assert.equal(res.status, 200);
      await res.text();
      health.push((performance.now() - t0) / 1000);
      await sleep(250);
    }
  })();
  await Promise.all([freshLoop, healthLoop]);
  return { fresh, health };
}

async function waitIdle(baseline) {
  let m;
  for (let i = 0; i < 200; ++i) {
    m = await metrics();
    if (m.flashserve_running_sequences === 0 && m.flashserve_waiting_sequences === 0
        && m.process_open_fds <= baseline.process_open_fds) return m;
    await sleep(100);
  }
  return m;
}

await runE2e(work, async (ctx) => {
  const mk = spawnSync(args.flashserve, ['make-model', '--preset', 'tiny-v41', '--out', join(work, 'model'),
    '--tokenizer', args.tokenizer, '--threads', '2'], { encoding: 'utf8' });
  if (mk.status !== 0) throw new Error(`make-model failed: ${mk.stderr}`);
  server = ctx.server = await start(args.flashserve, ['serve', '--model', join(work, 'model'), '--served-model-name',
    'tiny', '--host', '127.0.0.1', '--port', '0', '--threads', '2', '--max-running', String(MAX_RUNNING),
    '--max-waiting', String(MAX_WAITING)]);

  // Each prompt alone: the tokens every stream of it must give under load.
  const expected = [];
  for (let p = 0; p < PROMPTS; ++p) {
    const r = await stream(p);
    assert.equal(r.status, 200);
    expected.push(r.text);
  }
  await sleep(300);
  const idle = await waitIdle(await metrics());

  const tally = { 429: 0, 503: 0 };
  let finished = false;
  const t0 = performance.now();
  let probeError = null;
  const probing = probes(() => !finished, tally).catch((e) => { probeError = e; return { fresh: [], health: [] }; });
  const results = await Promise.all(Array.from({ length: STREAMS }, (_, i) => client(i, tally)));
  finished = true;
  const seconds = (performance.now() - t0) / 1000;
  const { fresh, health } = await probing;
  if (probeError) throw probeError;
  const after = await waitIdle(idle);

  const wrong = results.filter((r, i) => r.text !== expected[i % PROMPTS]).length;
  const ttft = results.map((r) => r.firstTokenS).filter((v) => v !== null);
  const peakOver = after.process_peak_resident_memory_bytes - idle.process_resident_memory_bytes;
  const bound = freshBoundS(STREAMS / seconds);
  const rows = [
    ['streams (max_tokens)', `${STREAMS} (${MAX_TOKENS})`],
    ['completed / refusals (429, 503)', `${results.length} / ${tally[429]}, ${tally[503]} (--max-running ${MAX_RUNNING}, --max-waiting ${MAX_WAITING})`],
    ['wall time, generated tokens/s', `${seconds.toFixed(1)} s, ${(STREAMS * MAX_TOKENS / seconds).toFixed(0)}`],
    ['first token p50 / p99 (admitted streams)', `${percentile(ttft, 0.5).toFixed(2)} / ${percentile(ttft, 0.99).toFixed(2)} s`],
    ['fresh request: first token or 429, p50 / max (bound)', `${percentile(fresh, 0.5).toFixed(2)} / ${Math.max(...fresh).toFixed(2)} s (${bound.toFixed(1)} s)`],
    ['/health p99 / max (bound)', `${percentile(health, 0.99).toFixed(3)} / ${Math.max(...health).toFixed(3)} s (${HEALTH_MAX_S} s)`],
    ['peak RSS over idle (budget)', `${(peakOver / 2 ** 20).toFixed(0)} MiB of ${RSS_BUDGET_BYTES / 2 ** 20} MiB (idle ${(idle.process_resident_memory_bytes / 2 ** 20).toFixed(0)} MiB)`],
    ['open descriptors idle / after', `${idle.process_open_fds} / ${after.process_open_fds}`],
    ['state pool bytes idle / after', `${idle.flashserve_state_pool_bytes} / ${after.flashserve_state_pool_bytes}`],
    ['KV pins after, requests rejected (metric)', `${after['flashserve_kv_pinned_objects{tier="memory"}']}, ${after.flashserve_requests_rejected_total}`],
  ];
  console.log('| load: one worker, tiny-v41, 2 threads | |\n|---|---|');
  for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);

  assert.equal(wrong, 0, `${wrong} streams gave other tokens than their prompt alone`);
  assert.ok(tally[429] + tally[503] > 0, 'the queue bound refused some streams at first');
  assert.equal(after.flashserve_requests_rejected_total - idle.flashserve_requests_rejected_total, tally[429],
    'every 429 counted');
  assert.ok(fresh.length >= 2 && Math.max(...fresh) <= bound, `fresh requests: ${fresh}`);
  assert.ok(Math.max(...health) <= HEALTH_MAX_S, `/health: ${Math.max(...health)} s`);
  assert.ok(peakOver <= RSS_BUDGET_BYTES, `peak RSS ${peakOver} bytes over idle`);
  assert.equal(after.flashserve_running_sequences, 0);
  assert.equal(after.flashserve_waiting_sequences, 0);
  assert.ok(after.process_open_fds <= idle.process_open_fds, 'descriptors leaked');
  assert.equal(after.flashserve_state_pool_bytes, idle.flashserve_state_pool_bytes, 'sequence state leaked');
  assert.equal(after['flashserve_kv_pinned_objects{tier="memory"}'], 0, 'KV objects left pinned');
});
