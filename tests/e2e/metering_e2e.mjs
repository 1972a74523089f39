// End-to-end test of the usage ledger on a real worker on loopback:
//  1. reconciliation: random requests in four dialects (Chat streaming and not, Completions,
//     Messages, Responses), many of them cache hits, each priced by hand from the usage object the
//     client received; `flashserve usage` and GET /admin/usage give the same totals, to the token
//     and the micro-unit;
//  2. cancelled streams are recorded apart (their own tenant), and bill nothing beyond what reached
//     the client;
//  3. the admin route: an admin key passes, a tenant key and no key are 401;
//  4. limits set live: requests per minute answered with 429, Retry-After and OpenAI's
//     x-ratelimit-* headers (Anthropic's anthropic-ratelimit-* on Messages); a monthly budget;
//  5. a worker killed mid-stream leaves the request in the ledger with the tokens it delivered.
//
// node tests/e2e/metering_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (tokenizer missing).
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { meterStore, parseArgs, runE2e, sleep, start } from './cluster_util.mjs';
import { post, priceMicros, randomRequest, seeded, topic } from './usage_util.mjs';

const args = parseArgs();
const work = mkdtempSync(join(tmpdir(), 'flashserve-metering-e2e-'));
const db = meterStore(args, work, 'metering_e2e');
const ADMIN = 'adm-secret-0001';
// Per million tokens: $0.27 uncached, $0.07 cached, $1.10 output, in micro-dollars.
const RATES = { input: 270000n, cached: 70000n, output: 1100000n };

function cli(...cmd) {
  const r = spawnSync(args.flashserve, [...cmd, '--meter-db', db], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`flashserve ${cmd.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

const rand = seeded(12345);
const price = (u) => priceMicros(u, RATES);

async function adminUsage(server, query, key = ADMIN) {
  return fetch(`${server.base}/admin/usage?${query}`, { headers: { authorization: `Bearer ${key}` } });
}

await runE2e(work, async (ctx) => {
  const mk = spawnSync(args.flashserve, ['make-model', '--preset', 'tiny', '--out', join(work, 'model'),
    '--tokenizer', args.tokenizer, '--threads', '2'], { encoding: 'utf8' });
  if (mk.status !== 0) throw new Error(`make-model failed: ${mk.stderr}`);
  for (const t of ['acme', 'beta', 'gamma', 'delta'])
    cli('tenant', 'add', t, '--input-price', '0.27', '--cached-price', '0.07', '--output-price', '1.10');
  const key = (t) => JSON.parse(cli('key', 'create', '--tenant', t, '--json')).key;
  const acme = key('acme'), beta = key('beta'), gamma = key('gamma'), delta = key('delta');
  const serveArgs = ['serve', '--model', join(work, 'model'), '--served-model-name', 'tiny', '--host', '127.0.0.1',
    '--port', '0', '--threads', '1', '--meter-db', db, '--meter-flush', '0.1', '--admin-key', ADMIN];
  ctx.server = await start(args.flashserve, serveArgs);
  const w = ctx.server;

  // 1. Reconciliation.
  const want = { requests: 0, input: 0, cached: 0, output: 0, cost: 0n };
  for (let i = 0; i < 60; ++i) {
    const u = await randomRequest(w, acme, rand);
    want.requests += 1; want.input += u.input; want.cached += u.cached; want.output += u.output; want.cost += price(u);
  }
  assert.ok(want.cached > 0, 'some requests were cache hits');

  // 2. Cancelled streams, on their own tenant.
  for (let i = 0; i < 3; ++i) {
    const abort = new AbortController();
    const res = await fetch(`${w.base}/v1/chat/completions`, { method: 'POST', signal: abort.signal,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${beta}` },
      body: JSON.stringify({ model: 'tiny', max_tokens: 4000, ignore_eos: true, stream: true,
        messages: [{ role: 'user', content: topic(i) }] }) });
    const reader = res.body.getReader();
    await reader.read();
    abort.abort();
  }
  await sleep(1000);  // the cancellations land and the ledger flushes

  const rows = async (query) => {
    const res = await adminUsage(w, query);
    assert.equal(res.status, 200);
    return (await res.json()).data;
  };
  const [a] = await rows('group_by=tenant&tenant=acme');
  assert.equal(a.requests, want.requests);
  assert.equal(a.input_tokens, want.input);
  assert.equal(a.input_tokens - a.input_uncached_tokens, want.cached);
  assert.equal(a.output_tokens, want.output);
  assert.equal(BigInt(a.cost_micros), want.cost, `cost ${a.cost_micros} vs ${want.cost} by hand`);
  const cliRows = JSON.parse(cli('usage', '--tenant', 'acme', '--format', 'json')).data;
  assert.deepEqual(cliRows, [a], 'the CLI and /admin/usage agree');
  const csv = cli('usage', '--format', 'csv', '--group-by', 'total').trim().split('\n');
  assert.equal(csv.length, 2);
  assert.equal(Number(csv[1].split(',')[2]), want.requests + 3, 'the total counts every request');

  const [b] = await rows('tenant=beta');
  assert.equal(b.requests, 3);
  assert.ok(b.output_tokens < 3 * 4000, `cancelled streams bill only what was delivered (${b.output_tokens})`);

  // 3. Admin routes: an admin key only.
  assert.equal((await adminUsage(w, '', acme)).status, 401, 'a tenant key never reaches /admin');
  assert.equal((await fetch(`${w.base}/admin/usage`)).status, 401);
  assert.equal((await adminUsage(w, 'group_by=week')).status, 400);

  // 4. Limits, set while the worker runs.
  cli('tenant', 'set', 'delta', '--rpm', '2');
  await sleep(2500);  // the worker's next look at the store (--meter-refresh 2 s by default)
  const chatOnce = () => post(w, delta, '/v1/chat/completions', { model: 'tiny', max_tokens: 1,
    messages: [{ role: 'user', content: 'hi' }] });
  const first = await chatOnce();
  assert.equal(first.status, 200);
  assert.equal(first.headers.get('x-ratelimit-limit-requests'), '2');
  assert.equal(first.headers.get('x-ratelimit-remaining-requests'), '1');
  const second = await post(w, delta, '/v1/messages', { model: 'tiny', max_tokens: 1,
    messages: [{ role: 'user', content: 'hi' }] }, { 'anthropic-version': '2023-06-01' });
  assert.equal(second.status, 200);
  assert.equal(second.headers.get('anthropic-ratelimit-requests-remaining'), '0');
  assert.match(second.headers.get('anthropic-ratelimit-requests-reset'), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  const third = await chatOnce();
  assert.equal(third.status, 429);
  assert.ok(Number(third.headers.get('retry-after')) >= 1);
  assert.equal(third.headers.get('x-ratelimit-remaining-requests'), '0');
  assert.match((await third.json()).error.message, /requests per minute/);
  assert.equal((await post(w, acme, '/v1/chat/completions', { model: 'tiny', max_tokens: 1,
    messages: [{ role: 'user', content: 'hi' }] })).status, 200, 'another tenant is not limited');
  cli('tenant', 'set', 'acme', '--monthly-budget', '0.000001');  // acme has spent more than that
  await sleep(2500);
  const broke = await post(w, acme, '/v1/chat/completions', { model: 'tiny', max_tokens: 1,
    messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(broke.status, 429);
  assert.match((await broke.json()).error.message, /monthly budget/);

  // 5. A worker killed mid-stream: the request stays, with what it delivered.
  const res = await fetch(`${w.base}/v1/chat/completions`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${gamma}` },
    body: JSON.stringify({ model: 'tiny', max_tokens: 3000, ignore_eos: true, stream: true,
      messages: [{ role: 'user', content: 'go on forever' }] }) });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  let chunks = 0;
  const until = Date.now() + 1500;
  while (Date.now() < until) { const { done } = await reader.read(); if (done) break; ++chunks; }
  assert.ok(chunks > 2, 'the stream was delivering');
  w.proc.kill('SIGKILL');
  await new Promise((r) => w.proc.once('exit', r));
  ctx.server = null;
  const [g] = JSON.parse(cli('usage', '--tenant', 'gamma', '--format', 'json')).data;
  assert.equal(g.requests, 1);
  assert.ok(g.output_tokens > 0, `the killed request kept its delivered tokens (${g.output_tokens})`);
  console.log(`metering e2e: pass (${want.requests} requests reconciled, ${want.output} output tokens, ` +
    `$${Number(want.cost) / 1e6}; killed stream kept ${g.output_tokens} tokens)`);
});
