// End-to-end test of tenants and keys in the metering store, with the real CLI, a worker and a
// router on loopback:
//  1. keys made by `flashserve key create` work on a running worker without a restart; no key
//     or a wrong key is a 401; a revoked key stops working within the refresh interval;
//  2. tenants are cache namespaces: B never hits A's cached prompt, until an operator gives B
//     A's namespace on purpose (`tenant set --namespace`), live;
//  3. the router reads the same store: it refuses a missing or revoked key itself, and passes a
//     tenant's 429 with its rate-limit headers on;
//  4. with two workers behind it, the router holds each tenant to its limits for the whole fleet:
//     requests per minute and concurrent requests counted at the router (spread over both
//     workers, each of which alone would have let more through), output tokens per minute summed
//     from both workers' ledger records, input tokens per minute of Messages and Responses
//     requests counted at the router exactly as the workers count them; without the router the
//     two workers still share a tenant's requests per minute through the ledger.
//  5. the workers and the router export the live economics: output tokens/s, utilization, cost
//     per million output tokens at that load and break-even utilization, from their prices.
// With --postgres 1 the store is a fresh database on the test PostgreSQL server.
//
// node tests/e2e/tenants_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (tokenizer missing).
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { meterStore, parseArgs, runE2e, sleep, start, stop, waitHealthy } from './cluster_util.mjs';

const args = parseArgs();
const work = mkdtempSync(join(tmpdir(), 'flashserve-tenants-e2e-'));
const db = meterStore(args, work, 'tenants_e2e');

// Runs `flashserve ARGS --meter-db DB` and returns its stdout (throws on failure).
function cli(...cmd) {
  const r = spawnSync(args.flashserve, [...cmd, '--meter-db', db], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`flashserve ${cmd.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}
const createKey = (tenant) => JSON.parse(cli('key', 'create', '--tenant', tenant, '--json'));

async function chat(server, key, text) {
  const headers = { 'content-type': 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${server.base}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({
    model: 'tiny', messages: [{ role: 'user', content: text }], max_tokens: 2, temperature: 0,
    thinking: { type: 'disabled' } }) });
  const body = await res.json();
  return { status: res.status, body, cached: body.usage?.prompt_tokens_details?.cached_tokens };
}

// Retries `probe` until it returns true, for up to `ms`.
async function eventually(what, probe, ms = 5000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await probe()) return;
    await sleep(50);
  }
  throw new Error(`not within ${ms} ms: ${what}`);
}

// One request through the router: status, the worker that served it, output tokens, the
// router's limit headers.
async function viaRouter(router, key, { session, maxTokens = 1, stream = false, ignoreEos = false }) {
  const res = await fetch(`${router.base}/v1/chat/completions`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-session-id': session },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: `fleet ${session}` }],
      max_tokens: maxTokens, temperature: 0, stream, ignore_eos: ignoreEos, thinking: { type: 'disabled' } }) });
  const text = await res.text();  // a stream: read to its end
  let output = 0;
  if (!stream && res.status === 200) output = JSON.parse(text).usage.completion_tokens;
  return { status: res.status, worker: res.headers.get('x-flashserve-worker'), output, text,
    limit: res.headers.get('x-flashserve-limit'), remaining: res.headers.get('x-ratelimit-remaining-requests') };
}

// Waits until every server in `servers` accepts `key` (each reloads the store on its own).
async function keyEverywhere(key, servers) {
  for (const server of servers)
    await eventually(`a new key reaches ${server.base}`, async () =>
      (await fetch(`${server.base}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status === 200);
}

async function fleetLimits(router, servers) {
  // Requests per minute: 8 at once over two workers, 4 pass (each worker alone would pass 4).
  cli('tenant', 'add', 'gamma', '--rpm', '4');
  const g = createKey('gamma');
  await keyEverywhere(g.key, servers);
  const burst = await Promise.all(Array.from({ length: 8 }, (_, i) => viaRouter(router, g.key, { session: `g${i}` })));
  const passed = burst.filter((r) => r.status === 200);
  assert.equal(passed.length, 4, `4 of 8 pass the fleet's rpm: ${burst.map((r) => r.status)}`);
  assert.equal(new Set(passed.map((r) => r.worker)).size, 2, 'the admitted requests ran on both workers');
  for (const r of burst.filter((x) => x.status !== 200)) {
    assert.equal(r.status, 429);
    assert.equal(r.limit, 'tenant');
    assert.equal(r.worker, null, 'refused at the router, not by a worker');
    assert.match(r.text, /requests per minute/);
  }
  assert.ok(passed.every((r) => ['0', '1', '2', '3'].includes(r.remaining)), 'the router\'s fleet-wide figures');

  // Concurrent requests: 2 at a time for the fleet, however many workers.
  cli('tenant', 'add', 'delta', '--concurrency', '2');
  const d = createKey('delta');
  await keyEverywhere(d.key, servers);
  // Two long streams, each held open (not read past its first event) while three more arrive.
  const held = await Promise.all([0, 1].map(async (i) => {
    const res = await fetch(`${router.base}/v1/chat/completions`, { method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${d.key}`, 'x-session-id': `d${i}` },
      body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: `fleet d${i}` }], max_tokens: 400,
        stream: true, ignore_eos: true }) });
    const reader = res.body.getReader();
    await reader.read();  // admitted and streaming
    return { status: res.status, worker: res.headers.get('x-flashserve-worker'), reader };
  }));
  assert.deepEqual(held.map((h) => h.status), [200, 200]);
  assert.equal(new Set(held.map((h) => h.worker)).size, 2, 'the two streams run on different workers');
  const more = await Promise.all([2, 3, 4].map((i) => viaRouter(router, d.key, { session: `d${i}` })));
  for (const r of more) {
    assert.equal(r.status, 429, 'a third concurrent request is refused even with a worker free');
    assert.match(r.text, /concurrent requests/);
  }
  for (const h of held) while (!(await h.reader.read()).done);  // the streams end; their places free
  assert.equal((await viaRouter(router, d.key, { session: 'd5' })).status, 200, 'a place is free again');

  // Output tokens per minute: the sum over both workers' ledger records.
  cli('tenant', 'add', 'omega', '--output-tpm', '40');
  const o = createKey('omega');
  await keyEverywhere(o.key, servers);
  const perWorker = new Map();
  let refused = null;
  for (let i = 0; i < 40 && !refused; ++i) {
    const r = await viaRouter(router, o.key, { session: `o${i}`, maxTokens: 6, ignoreEos: true });
    if (r.status === 200) perWorker.set(r.worker, (perWorker.get(r.worker) ?? 0) + r.output);
    else refused = r;
    await sleep(250);  // the ledger's lag (flush + the router's read) stays within a few requests
  }
  assert.ok(refused, 'the fleet\'s output per minute is enforced');
  assert.equal(refused.status, 429);
  assert.match(refused.text, /output tokens per minute/);
  const total = [...perWorker.values()].reduce((a, b) => a + b, 0);
  assert.equal(perWorker.size, 2, 'both workers produced output');
  assert.ok(total >= 40, `refused once the fleet made ${total} >= 40 tokens`);
  assert.ok([...perWorker.values()].every((n) => n < 40), `no single worker reached the limit: ${[...perWorker.values()]}`);
}

// One Messages or Responses request through the router: status, the worker, the prompt tokens
// it billed (uncached + cached), the router's input-token figure and the refusal text.
async function viaDialect(router, key, session, messages) {
  const res = await fetch(`${router.base}/v1/${messages ? 'messages' : 'responses'}`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-session-id': session },
    body: JSON.stringify(messages
      ? { model: 'tiny', max_tokens: 1, system: 'Be brief.', messages: [{ role: 'user', content: `input ${session}` }] }
      : { model: 'tiny', max_output_tokens: 1, instructions: 'Be brief.', input: `input ${session}` }) });
  const text = await res.text();
  let input = 0;
  if (res.status === 200) {
    const usage = JSON.parse(text).usage;
    input = messages ? usage.input_tokens + usage.cache_read_input_tokens : usage.input_tokens;
  }
  const remaining = res.headers.get(messages ? 'anthropic-ratelimit-input-tokens-remaining' : 'x-ratelimit-remaining-tokens');
  return { status: res.status, worker: res.headers.get('x-flashserve-worker'), input, text,
    remaining: remaining === null ? null : Number(remaining) };
}

// Input tokens per minute of the dialects the router reads with the workers' own parsers: each
// prompt is counted at admission exactly as the worker bills it, for the whole fleet.
async function fleetInputTokens(router, servers) {
  const limit = 120;
  cli('tenant', 'add', 'iota', '--input-tpm', String(limit));
  const k = createKey('iota');
  await keyEverywhere(k.key, servers);
  const perWorker = new Map();
  let used = 0;
  let refused = null;
  for (let i = 0; i < 40 && !refused; ++i) {
    const r = await viaDialect(router, k.key, `i${i}`, i % 2 === 0);
    if (r.status !== 200) {
      refused = r;
      break;
    }
    used += r.input;
    perWorker.set(r.worker, (perWorker.get(r.worker) ?? 0) + r.input);
    assert.ok(r.input > 0);
    assert.equal(r.remaining, limit - used, `the router counted request ${i} as its worker billed it`);
  }
  assert.ok(refused, 'the fleet\'s input per minute is enforced');
  assert.equal(refused.status, 429);
  assert.equal(refused.worker, null, 'refused at the router');
  assert.match(refused.text, /input tokens per minute/);
  assert.ok(used <= limit, `admitted ${used} <= ${limit} input tokens`);
  assert.equal(perWorker.size, 2, 'both workers served prompts');
  assert.ok([...perWorker.values()].every((n) => n < limit), `no single worker reached the limit: ${[...perWorker.values()]}`);
}

// Two workers without a router: each raises its per-minute counts to the fleet's from the ledger
// (written every 0.1 s, read every 0.1 s here), so 3 requests per minute hold across both.
async function workersShareLimits(w, w2) {
  cli('tenant', 'add', 'kappa', '--rpm', '3');
  const k = createKey('kappa');
  await keyEverywhere(k.key, [w, w2]);
  for (const server of [w, w2, w]) {
    assert.equal((await chat(server, k.key, 'shared')).status, 200);
    await sleep(600);  // the ledger's write and the other worker's read
  }
  const fourth = await chat(w2, k.key, 'shared');
  assert.equal(fourth.status, 429, 'the second worker, which saw one request itself, counts the fleet\'s three');
  assert.match(fourth.body.error.message, /requests per minute/);
}

// A worker priced at $3.60/h, compared with two API prices.
const WORKER_PRICES = ['--cost-per-hour', '3.6', '--api-output-price', '0.6,1.2'];

// The value of one /metrics line (`name` with its labels, exactly), or undefined.
async function gauge(server, name) {
  const text = await (await fetch(`${server.base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

async function liveEconomics(router, worker, key) {
  await gauge(worker, 'flashserve_output_tokens_per_second');  // both windows start here
  await gauge(router, 'flashserve_fleet_output_tokens_per_second');
  for (let i = 0; i < 4; ++i) assert.equal((await viaRouter(router, key, { session: `e${i}`, maxTokens: 8, ignoreEos: true })).status, 200);
  const rate = await gauge(worker, 'flashserve_output_tokens_per_second');
  const utilization = await gauge(worker, 'flashserve_utilization_ratio');
  assert.ok(rate > 0, `the worker measured its output rate (${rate})`);
  assert.ok(utilization > 0 && utilization <= 1, `utilization ${utilization}`);
  const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-6 * Math.abs(b), `${what}: ${a} vs ${b}`);
  // Read in one scrape: the figures of one observation agree with each other.
  const text = await (await fetch(`${worker.base}/metrics`)).text();
  const value = (name) => Number(text.split('\n').find((l) => l.startsWith(`${name} `)).slice(name.length + 1));
  const r = value('flashserve_output_tokens_per_second');
  const capacity = value('flashserve_capacity_output_tokens_per_second');
  close(value('flashserve_cost_per_million_output_tokens'), 3.6e6 / (3600 * r), 'cost per million at the load');
  close(value('flashserve_break_even_utilization_ratio{api_output_price="0.6"}'), 3.6e6 / (3600 * capacity * 0.6), 'break-even');
  close(value('flashserve_break_even_utilization_ratio{api_output_price="1.2"}'), 3.6e6 / (3600 * capacity * 1.2), 'break-even');
  assert.equal(value('flashserve_cost_per_hour'), 3.6);
  assert.ok(value('flashserve_engine_busy_seconds_total') > 0);

  // The router reads the workers' counters at its polls (every 50 ms; later on a loaded machine).
  await eventually('the fleet\'s output rate', async () => await gauge(router, 'flashserve_fleet_output_tokens_per_second') > 0);
  assert.equal(await gauge(router, 'flashserve_fleet_capacity_output_tokens_per_second'), 500);
  close(await gauge(router, 'flashserve_fleet_break_even_utilization_ratio{api_output_price="0.6"}'),
    7.2e6 / (3600 * 500 * 0.6), 'the fleet\'s break-even');
}

const prompt = (tag) => `Tenant isolation ${tag}: ` + Array.from({ length: 120 }, (_, i) => `w${(i * 7) % 53}`).join(' ');

await runE2e(work, async (ctx) => {
  const mk = spawnSync(args.flashserve, ['make-model', '--preset', 'tiny', '--out', join(work, 'model'),
    '--tokenizer', args.tokenizer, '--threads', '2'], { encoding: 'utf8' });
  if (mk.status !== 0) throw new Error(`make-model failed: ${mk.stderr}`);
  cli('tenant', 'add', 'acme', '--input-price', '0.15', '--output-price', '0.60');
  cli('tenant', 'add', 'beta');
  const a = createKey('acme');
  const b = createKey('beta');
  assert.match(a.key, /^fsk-[0-9a-f]{40}$/);
  assert.ok(!cli('key', 'list').includes(a.key), 'key list never shows a key');

  ctx.server = await start(args.flashserve, ['serve', '--model', join(work, 'model'), '--served-model-name', 'tiny',
    '--host', '127.0.0.1', '--port', '0', '--threads', '1', '--meter-db', db, '--meter-refresh', '0.1',
    '--meter-flush', '0.1', '--api-key', 'sk-router-polls', ...WORKER_PRICES]);
  const w = ctx.server;

  // 1. Keys from the store, live.
  assert.equal((await chat(w, null, 'hi')).status, 401);
  assert.equal((await chat(w, 'fsk-0000000000000000000000000000000000000000', 'hi')).status, 401);
  assert.equal((await chat(w, a.key, 'hi')).status, 200);
  const later = createKey('acme');
  await eventually('a key created after the start works', async () => (await chat(w, later.key, 'hi')).status === 200);
  cli('key', 'revoke', a.id);
  await eventually('a revoked key is refused', async () => (await chat(w, a.key, 'hi')).status === 401);
  assert.equal((await chat(w, later.key, 'hi')).status, 200, 'the tenant\'s other key still works');

  // 2. Tenants are cache namespaces.
  const first = await chat(w, later.key, prompt('one'));
  assert.equal(first.status, 200);
  const again = await chat(w, later.key, prompt('one'));
  assert.ok(again.cached > 0, `acme hits its own prompt (${again.cached})`);
  const other = await chat(w, b.key, prompt('one'));
  assert.equal(other.cached, 0, 'beta never sees acme\'s cached prompt');
  cli('tenant', 'set', 'beta', '--namespace', 'acme');
  await eventually('beta shares acme\'s namespace once told to', async () => (await chat(w, b.key, prompt('one'))).cached > 0);

  // 3. The router checks the same store.
  const router = await start(args.flashserve, ['router', '--tokenizer', args.tokenizer, '--host', '127.0.0.1',
    '--port', '0', '--poll-interval', '0.05', '--worker', w.base, '--meter-db', db, '--meter-refresh', '0.1',
    '--worker-key', 'sk-router-polls']);
  await waitHealthy(router, 1);
  assert.equal((await chat(router, null, 'hi')).status, 401);
  assert.equal((await chat(router, a.key, 'hi')).status, 401, 'revoked at the router too');
  assert.equal((await chat(router, later.key, 'hi')).status, 200);
  // A tenant's own limit: the router passes the 429 and its rate-limit headers on.
  cli('tenant', 'set', 'beta', '--rpm', '1');
  await eventually('beta is limited through the router', async () => {
    const r1 = await chat(router, b.key, 'hi');
    if (r1.status !== 429) return false;
    return true;
  }, 8000);
  const limited = await fetch(`${router.base}/v1/chat/completions`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${b.key}` },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }) });
  assert.equal(limited.status, 429);
  assert.equal(limited.headers.get('x-ratelimit-limit-requests'), '1');
  assert.equal(limited.headers.get('x-ratelimit-remaining-requests'), '0');
  assert.ok(Number(limited.headers.get('retry-after')) >= 1);
  cli('tenant', 'set', 'beta', '--rpm', '0');
  await eventually('beta unlimited again', async () => (await chat(router, b.key, 'hi')).status === 200);
  cli('tenant', 'remove', 'acme');
  await eventually('a removed tenant\'s keys are refused at the router',
    async () => (await chat(router, later.key, 'hi')).status === 401);
  assert.equal((await chat(router, b.key, 'hi')).status, 200);
  await stop(router);

  // 4. Limits for the whole fleet at a router over two workers.
  const w2 = await start(args.flashserve, ['serve', '--model', join(work, 'model'), '--served-model-name', 'tiny',
    '--host', '127.0.0.1', '--port', '0', '--threads', '1', '--meter-db', db, '--meter-refresh', '0.1',
    '--meter-flush', '0.1', '--api-key', 'sk-router-polls', ...WORKER_PRICES]);
  const fleet = await start(args.flashserve, ['router', '--tokenizer', args.tokenizer, '--host', '127.0.0.1',
    '--port', '0', '--poll-interval', '0.05', '--worker', w.base, '--worker', w2.base, '--policy', 'round-robin',
    '--meter-db', db, '--meter-refresh', '0.1', '--worker-key', 'sk-router-polls',
    '--cost-per-hour', '7.2', '--capacity-tokens-per-s', '500', '--api-output-price', '0.6']);
  await waitHealthy(fleet, 2);
  await fleetLimits(fleet, [fleet, w, w2]);
  await fleetInputTokens(fleet, [fleet, w, w2]);
  await workersShareLimits(w, w2);
  await liveEconomics(fleet, w2, b.key);
  await stop(fleet);
  await stop(w2);
  console.log('tenants e2e: pass');
});
