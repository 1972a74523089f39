// End-to-end test of `flashserve router` over real `flashserve serve` workers on loopback:
//  1. cache-aware routing sends turn N+1 of a conversation to the worker holding turn N, and its
//     hit rate beats round-robin on the same multi-turn workload;
//  2. resync: a worker restarted on its --kv-dir (new event epoch) and a worker whose event ring
//     overflows (gap) are resynced from snapshots, and the restarted worker's disk blocks hit;
//  3. load shedding: 429 + Retry-After when every worker is saturated; API keys at the router;
//  4. failures: a killed worker's requests are retried on the other one, and a stream whose
//     worker dies mid-way ends with an error event (never a hang);
//  1b. the Messages and Responses dialects through the router, read as the workers read them:
//     multi-turn sessions stay with their cached prefix and hit it;
//  5. DeepSeek-V4.1 workers: the router hashes prompts in the format the workers report (v41),
//     so it predicts their cached blocks and keeps conversations in place.
//
// node tests/e2e/router_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (tokenizer missing).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { parseArgs, procs, sleep, start as startCmd, stop, waitHealthy, workersView } from './cluster_util.mjs';

const args = parseArgs();
const work = mkdtempSync(join(tmpdir(), 'flashserve-router-e2e-'));
const start = (cmdArgs) => startCmd(args.flashserve, cmdArgs);

function worker(name, port = '0', extra = [], model = 'model') {
  return start(['serve', '--model', join(work, model), '--served-model-name', 'tiny', '--host', '127.0.0.1',
    '--port', port, '--threads', '1', '--kv-dir', join(work, `kv-${name}`), '--kv-disk-bytes', String(1 << 30), ...extra]);
}

function router(workers, extra = []) {
  return start(['router', '--tokenizer', args.tokenizer, '--host', '127.0.0.1', '--port', '0', '--poll-interval', '0.05',
    ...workers.flatMap((w) => ['--worker', w.base]), ...extra]);
}

function chatBody(messages, extra = {}) {
  return JSON.stringify({ model: 'tiny', messages, max_tokens: 4, temperature: 0, thinking: { type: 'disabled' }, ...extra });
}

async function chat(r, messages) {
  const res = await fetch(`${r.base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: chatBody(messages) });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return { worker: res.headers.get('x-flashserve-worker'), usage: body.usage, reply: body.choices[0].message.content ?? '' };
}

// A distinct ~150-word user turn per (conversation, turn, tag).
function userText(tag, conv, turn) {
  const words = [];
  for (let i = 0; i < 150; ++i) words.push(`${tag}${conv}w${(i * 7 + turn * 13) % 97}`);
  return `Conversation ${tag}-${conv}, turn ${turn}: ${words.join(' ')}`;
}

// Runs `convs` conversations of `turns` turns, interleaved turn by turn; returns the hit rate and,
// per conversation, the worker of every turn.
async function multiTurn(r, tag, convs, turns, system = null) {
  const histories = Array.from({ length: convs }, () => (system ? [{ role: 'system', content: system }] : []));
  const placement = Array.from({ length: convs }, () => []);
  let hit = 0, total = 0;
  for (let t = 0; t < turns; ++t) {
    for (let c = 0; c < convs; ++c) {
      histories[c].push({ role: 'user', content: userText(tag, c, t) });
      const res = await chat(r, histories[c]);
      histories[c].push({ role: 'assistant', content: res.reply });
      placement[c].push(res.worker);
      hit += res.usage.prompt_cache_hit_tokens;
      total += res.usage.prompt_tokens;
    }
  }
  return { hitRate: hit / total, placement };
}

let failed = false;
try {
  const mk = spawnSync(args.flashserve, ['make-model', '--preset', 'tiny', '--out', join(work, 'model'),
    '--tokenizer', args.tokenizer, '--threads', '2'], { encoding: 'utf8' });
  if (mk.status !== 0) throw new Error(`make-model failed: ${mk.stderr}`);
  const w1 = await worker('a');
  let w2 = await worker('b', '0', ['--kv-events-capacity', '3']);
  const cacheAware = await router([w1, w2]);
  const roundRobin = await router([w1, w2], ['--policy', 'round-robin']);
  await waitHealthy(cacheAware, 2);
  await waitHealthy(roundRobin, 2);

  // 1. Multi-turn workload: cache-aware keeps each conversation on one worker.
  const ca = await multiTurn(cacheAware, 'ca', 3, 3);  // 3 conversations: round-robin cannot keep them in place by accident
  const rr = await multiTurn(roundRobin, 'rr', 3, 3);
  console.log(`hit rate: cache-aware ${(100 * ca.hitRate).toFixed(1)}%, round-robin ${(100 * rr.hitRate).toFixed(1)}%`);
  for (const p of ca.placement) assert.ok(p.every((w) => w === p[0]), `a conversation moved between workers: ${p}`);
  assert.equal(new Set(ca.placement.map((p) => p[0])).size, 2, 'conversations are spread over both workers');
  assert.ok(ca.hitRate > rr.hitRate + 0.1, 'cache-aware beats round-robin');
  const view = await workersView(cacheAware);
  assert.ok(view.find((w) => w.url === w2.base).kv_resyncs >= 2, 'the 3-event ring of worker b overflowed: resync');

  // 1b. Messages and Responses through the router, as Codex CLI and Claude Code send them (the
  // whole conversation every turn, a session key): the router reads both with the workers'
  // parsers, so a conversation's cached prefix keeps it on one worker and hits there.
  const reportedPrompt = async () => [...(await (await fetch(`${cacheAware.base}/metrics`)).text())
    .matchAll(/^flashserve_router_reported_prompt_tokens_total\{[^}]*\} (\S+)$/gm)].reduce((a, m) => a + Number(m[1]), 0);
  const reportedBefore = await reportedPrompt();
  let promptTokens = 0;
  let responsesHits = 0, messagesHits = 0;
  for (const session of ['s-1', 's-2', 's-3', 's-4']) {
    const placed = { responses: new Set(), messages: new Set() };
    const input = [], messages = [];
    for (let turn = 0; turn < 3; ++turn) {
      input.push({ role: 'user', content: userText(session, turn, 0) });
      const res = await fetch(`${cacheAware.base}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', input, max_output_tokens: 2, prompt_cache_key: session,
          reasoning: { effort: 'none' } }) });
      assert.equal(res.status, 200, await res.clone().text());
      const response = await res.json();
      assert.equal(response.object, 'response');
      promptTokens += response.usage.input_tokens;
      if (turn > 0) responsesHits += response.usage.input_tokens_details.cached_tokens;
      placed.responses.add(res.headers.get('x-flashserve-worker'));
      const said = response.output.filter((o) => o.type === 'message').flatMap((o) => o.content).map((c) => c.text).join('');
      input.push({ role: 'assistant', content: said || '.' });
      messages.push({ role: 'user', content: userText(session, turn, 1) });
      const msg = await fetch(`${cacheAware.base}/anthropic/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', max_tokens: 2, messages,
          metadata: { user_id: `{"session_id":"${session}"}` }, thinking: { type: 'disabled' } }) });
      assert.equal(msg.status, 200, await msg.clone().text());
      const message = await msg.json();
      assert.equal(message.type, 'message');
      promptTokens += message.usage.input_tokens + message.usage.cache_read_input_tokens;
      if (turn > 0) messagesHits += message.usage.cache_read_input_tokens;
      placed.messages.add(msg.headers.get('x-flashserve-worker'));
      messages.push({ role: 'assistant', content: message.content.map((b) => b.text ?? '').join('') || '.' });
    }
    for (const [dialect, workers] of Object.entries(placed))
      assert.equal(workers.size, 1, `${dialect} session ${session} moved between workers: ${[...workers]}`);
  }
  assert.ok(responsesHits > 0 && messagesHits > 0, `later turns hit their cached prefix: ${responsesHits}, ${messagesHits}`);
  // The router reads usage in every dialect (its cache-hit metrics cover Messages and Responses).
  assert.equal(await reportedPrompt() - reportedBefore, promptTokens);
  const bad = await fetch(`${cacheAware.base}/v1/messages`, { method: 'POST', body: JSON.stringify({ model: 'tiny', max_tokens: 2 }) });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).type, 'error');
  // Hosted tools the workers drop are named in the worker's header, which the router passes on,
  // streamed or not; errors raised before any route (unknown URL) keep Anthropic's shape there.
  for (const stream of [false, true]) {
    const hosted = await fetch(`${cacheAware.base}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', max_tokens: 2, stream, thinking: { type: 'disabled' },
        messages: [{ role: 'user', content: 'search' }], tools: [{ type: 'web_search_20250305', name: 'web_search' }] }) });
    assert.equal(hosted.status, 200, await hosted.clone().text());
    assert.equal(hosted.headers.get('x-flashserve-dropped-tools'), 'web_search', `stream=${stream}`);
    assert.ok(hosted.headers.get('x-flashserve-worker'), 'the router still names the worker');
    await hosted.text();
  }
  const nowhere = await fetch(`${cacheAware.base}/anthropic/v1/nothing`, { method: 'POST', body: '{}' });
  assert.equal(nowhere.status, 404);
  const nowhereBody = await nowhere.json();
  assert.equal(nowhereBody.type, 'error');
  assert.equal(nowhereBody.error.type, 'not_found_error');

  // 2. Restart worker b on the same port and directory: new epoch, resync, disk hits.
  const bConv = ca.placement.findIndex((p) => p[0] === w2.base);
  const port = new URL(w2.base).port;
  await stop(w2);
  w2 = await worker('b', port);
  await waitHealthy(cacheAware, 2);
  for (let i = 0; i < 100 && (await workersView(cacheAware)).find((w) => w.url === w2.base).kv_last_seq === 0; ++i) await sleep(50);
  const again = await chat(cacheAware, [{ role: 'user', content: userText('ca', bConv, 0) }]);
  assert.equal(again.worker, w2.base, 'the restarted worker still gets its conversation');
  assert.ok(again.usage.prompt_tokens_details.cached_tokens_by_tier.disk > 0, 'served from the disk tier after the restart');

  // 3. Load shedding: one queued token is already too many.
  const tight = await router([w1], ['--max-queued-prefill-tokens', '1']);
  await waitHealthy(tight, 1);
  const long = [{ role: 'user', content: userText('shed', 0, 0).repeat(4) }];
  const first = fetch(`${tight.base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody(long) });
  await sleep(20);
  const shed = await fetch(`${tight.base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody(long) });
  assert.equal(shed.status, 429);
  assert.ok(Number(shed.headers.get('retry-after')) >= 1, 'Retry-After is set');
  // Anthropic's clients see saturation as overload: 529 overloaded_error, which they back off on.
  const shedMessages = await fetch(`${tight.base}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', max_tokens: 2, messages: long }) });
  assert.equal(shedMessages.status, 529);
  assert.equal((await shedMessages.json()).error.type, 'overloaded_error');
  assert.ok(Number(shedMessages.headers.get('retry-after')) >= 1, 'Retry-After is set');
  assert.equal((await first).status, 200);
  const shedMetrics = await (await fetch(`${tight.base}/metrics`)).text();
  assert.match(shedMetrics, /flashserve_router_rejects_total\{status="429"\} 1/);
  assert.match(shedMetrics, /flashserve_router_rejects_total\{status="529"\} 1/);

  // API keys at the router: a request without one is refused there (401), one with it passes.
  const keyed = await router([w1], ['--api-key', 'secret-1:acme']);
  await waitHealthy(keyed, 1);
  const noKey = await fetch(`${keyed.base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: chatBody([{ role: 'user', content: 'hi' }]) });
  assert.equal(noKey.status, 401);
  const withKey = await fetch(`${keyed.base}/v1/chat/completions`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer secret-1' }, body: chatBody([{ role: 'user', content: 'hi' }]) });
  assert.equal(withKey.status, 200);
  // The router's HTTP front is the workers' route table: 401 on /v1/models without a key as on a
  // worker, 405 with Allow for a known path and another method, 404 naming the URL, and
  // per-route request metrics.
  assert.equal((await fetch(`${keyed.base}/v1/models`)).status, 401);
  const wrongMethod = await fetch(`${keyed.base}/v1/chat/completions`);
  assert.equal(wrongMethod.status, 405);
  assert.equal(wrongMethod.headers.get('allow'), 'POST');
  const unknown = await fetch(`${keyed.base}/v2/nothing`);
  assert.equal(unknown.status, 404);
  assert.equal((await unknown.json()).error.code, 'unknown_url');
  const routeMetrics = await (await fetch(`${keyed.base}/metrics`)).text();
  assert.match(routeMetrics, /flashserve_router_http_requests_total\{route="\/v1\/chat\/completions",status="401"\} 1/);
  assert.match(routeMetrics, /flashserve_router_http_requests_total\{route="\/v1\/chat\/completions",status="200"\} 1/);

  // 4a. A worker killed mid-stream: the client gets an error event and the end of the stream.
  const single = await router([w2]);
  await waitHealthy(single, 1);
  const t0 = performance.now();
  const res = await fetch(`${single.base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 4000, ignore_eos: true, stream: true }) });
  assert.equal(res.status, 200);
  let text = '', killed = false;
  for await (const chunk of res.body) {
    text += Buffer.from(chunk).toString('utf8');
    if (!killed && text.includes('"text"')) { killed = true; w2.proc.kill('SIGKILL'); }
  }
  assert.ok(killed, 'the stream started');
  assert.match(text, /"error"/, 'an error event ends the stream');
  assert.ok(performance.now() - t0 < 20000, 'no hang');

  // 4b. Requests that hit the dead worker before the router noticed are retried on the other.
  const results = await Promise.all([0, 1, 2, 3].map((i) => chat(cacheAware, [{ role: 'user', content: userText('retry', i, 0) }])));
  for (const r of results) assert.equal(r.worker, w1.base);

  // 5. V4.1 workers behind a router left on --encoding auto.
  const mk41 = spawnSync(args.flashserve, ['make-model', '--preset', 'tiny-v41', '--out', join(work, 'model-v41'),
    '--tokenizer', args.tokenizer, '--threads', '2'], { encoding: 'utf8' });
  if (mk41.status !== 0) throw new Error(`make-model tiny-v41 failed: ${mk41.stderr}`);
  const v41 = [await worker('v41a', '0', [], 'model-v41'), await worker('v41b', '0', [], 'model-v41')];
  const auto = await router(v41);
  await waitHealthy(auto, 2);
  // A system message: V4 and V4.1 render it differently (V4.1 puts <｜System｜> before it).
  const conv41 = await multiTurn(auto, 'v41', 2, 2, 'You are a terse assistant.');
  for (const p of conv41.placement) assert.ok(p.every((w) => w === p[0]), `a V4.1 conversation moved: ${p}`);
  const predicted = [...(await (await fetch(`${auto.base}/metrics`)).text())
    .matchAll(/flashserve_router_predicted_cached_tokens_total\{[^}]*\} (\d+)/g)].reduce((a, m) => a + Number(m[1]), 0);
  assert.ok(predicted > 0 && conv41.hitRate > 0.2, `the router predicted V4.1 cache hits (${predicted} tokens)`);
  // A worker of the same model encoding prompts another way is marked down, not routed to.
  let odd = await worker('v41odd', '0', ['--encoding', 'v4'], 'model-v41');
  const oddPort = new URL(odd.base).port;
  await stop(odd);
  const mixed = await router([v41[0], odd]);
  await waitHealthy(mixed, 1);  // v41a answered first: the router now expects v41 prompts
  odd = await worker('v41odd', oddPort, ['--encoding', 'v4'], 'model-v41');
  let oddView;
  for (let i = 0; i < 100; ++i) {
    oddView = (await workersView(mixed)).find((w) => w.url === odd.base);
    if (oddView.last_error.includes('encodes chat prompts')) break;
    await sleep(50);
  }
  assert.ok(!oddView.healthy && oddView.last_error.includes('encodes chat prompts as v4'), JSON.stringify(oddView));
  console.log('PASS router e2e');
} catch (e) {
  failed = true;
  console.log(`FAIL router e2e: ${e.stack || e}`);
} finally {
  for (const p of procs) p.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
