// The usage ledger reconciled over 1,000 random requests on a small fleet (a router over two
// workers sharing a KV-store tier, each with a small memory tier and its own disk tier), sent 8
// at a time, through the router or straight to a worker:
//  - completed requests in six dialect forms for two tenants: the ledger's totals per tenant
//    equal the sums of the usage objects the clients received, to the token and the micro-unit,
//    and the cached tokens split by tier add up to what the clients were told was cached;
//  - errors (an unknown model, a bad parameter) leave no record and bill nothing;
//  - streams cancelled by the client after their first event, and requests whose client hung up
//    before the answer, on a third tenant: one record each, never billed below what reached the
//    client nor above what was asked for;
//  - `flashserve usage` agrees with GET /admin/usage on a worker and on the router.
//
// node tests/e2e/ledger_reconcile_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
//   [--postgres 1] [--requests N]
// Exit 0 = pass, 1 = fail, 77 = skipped (tokenizer missing, or --postgres without a server).
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { meterStore, parseArgs, runE2e, sleep, start, waitHealthy } from './cluster_util.mjs';
import { post, priceMicros, randomRequest, seeded, topic } from './usage_util.mjs';

const args = parseArgs();
const work = mkdtempSync(join(tmpdir(), 'flashserve-ledger-e2e-'));
const db = meterStore(args, work, 'ledger_e2e');
const TOTAL = Number(args.requests ?? 1000);
const ADMIN = 'adm-ledger-0001';
const RATES = { input: 270000n, cached: 70000n, output: 1100000n };  // micro-units per million tokens

function cli(...cmd) {
  const r = spawnSync(args.flashserve, [...cmd, '--meter-db', db], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`flashserve ${cmd.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

const sums = () => ({ requests: 0, input: 0, cached: 0, output: 0, cost: 0n });
const want = { acme: sums(), beta: sums() };
const cut = { sent: 0, received: 0, asked: 0, whole: 0 };  // gamma: cancelled or hung up
let errors = 0;

// A stream cancelled after its first event, or a plain request abandoned a few ms after it was
// sent (before its answer, mostly).
async function cutRequest(server, key, rand) {
  const max = 40 + rand(80);
  cut.sent += 1;
  cut.asked += max;
  const abort = new AbortController();
  const stream = rand(2) === 0;
  const body = { model: 'tiny', max_tokens: max, ignore_eos: true, stream, messages: [{ role: 'user', content: topic(rand(6)) }] };
  if (!stream) setTimeout(() => abort.abort(), 5 + rand(20));
  try {
    const res = await post(server, key, '/v1/chat/completions', body, {}, abort.signal);
    if (stream) {
      const { value } = await res.body.getReader().read();
      const text = new TextDecoder().decode(value ?? new Uint8Array());
      cut.received += (text.match(/"content":"[^"]/g) ?? []).length;  // tokens surely delivered
    } else {
      await res.text();
      cut.whole += 1;  // answered before the client hung up
    }
    abort.abort();
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
  }
}

async function badRequest(server, key, rand) {
  errors += 1;
  const body = rand(2) === 0
    ? { model: 'no-such-model', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }
    : { model: 'tiny', max_tokens: 2, temperature: 7, messages: [{ role: 'user', content: 'x' }] };
  const res = await post(server, key, '/v1/chat/completions', body);
  assert.ok(res.status === 400 || res.status === 404, `a bad request is a 4xx (${res.status})`);
  await res.text();
}

await runE2e(work, async (ctx) => {
  const mk = spawnSync(args.flashserve, ['make-model', '--preset', 'tiny', '--out', join(work, 'model'),
    '--tokenizer', args.tokenizer, '--threads', '2'], { encoding: 'utf8' });
  if (mk.status !== 0) throw new Error(`make-model failed: ${mk.stderr}`);
  for (const t of ['acme', 'beta', 'gamma'])
    cli('tenant', 'add', t, '--input-price', '0.27', '--cached-price', '0.07', '--output-price', '1.10');
  const keys = Object.fromEntries(['acme', 'beta', 'gamma'].map((t) => [t, JSON.parse(cli('key', 'create', '--tenant', t, '--json')).key]));
  // Tenants share one namespace here so the fleet's tiers serve all of them.
  for (const t of ['beta', 'gamma']) cli('tenant', 'set', t, '--namespace', 'acme');
  const worker = (i) => start(args.flashserve, ['serve', '--model', join(work, 'model'), '--served-model-name', 'tiny',
    '--host', '127.0.0.1', '--port', '0', '--threads', '1', '--meter-db', db, '--meter-flush', '0.2', '--admin-key', ADMIN,
    '--api-key', 'sk-polls', '--kv-dram-bytes', '3000000', '--kv-dir', join(work, `disk${i}`),
    '--kv-shared-dir', join(work, 'shared')]);
  const workers = [await worker(1), await worker(2)];
  ctx.server = workers[0];
  const router = await start(args.flashserve, ['router', '--tokenizer', args.tokenizer, '--host', '127.0.0.1',
    '--port', '0', '--poll-interval', '0.05', '--worker', workers[0].base, '--worker', workers[1].base,
    '--policy', 'round-robin', '--meter-db', db, '--worker-key', 'sk-polls', '--admin-key', ADMIN]);
  await waitHealthy(router, 2);

  const t0 = Date.now();
  let next = 0;
  const lane = async () => {
    while (next < TOTAL) {
      const rand = seeded(4242 + 7919 * next++);  // request i's choices, whatever the lanes' timing
      const pick = rand(100);
      const server = rand(2) === 0 ? router : workers[rand(2)];
      if (pick < 6) {
        await badRequest(server, keys.acme, rand);
      } else if (pick < 18) {
        await cutRequest(server, keys.gamma, rand);
      } else {
        const tenant = pick < 59 ? 'acme' : 'beta';
        const u = await randomRequest(server, keys[tenant], rand, 6);
        const w = want[tenant];
        w.requests += 1; w.input += u.input; w.cached += u.cached; w.output += u.output; w.cost += priceMicros(u, RATES);
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, lane));
  const seconds = (Date.now() - t0) / 1000;
  await sleep(1500);  // cancellations land; the ledgers flush

  const admin = async (query, server = workers[1], key = ADMIN) => {
    const res = await fetch(`${server.base}/admin/usage?${query}`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200);
    return (await res.json()).data;
  };
  const rows = Object.fromEntries((await admin('group_by=tenant')).map((r) => [r.group, r]));
  for (const tenant of ['acme', 'beta']) {
    const got = rows[tenant], w = want[tenant];
    assert.ok(got, `${tenant} has usage`);
    assert.equal(got.requests, w.requests, `${tenant}: one record per completed request, none for errors`);
    assert.equal(got.input_tokens, w.input, `${tenant}: input tokens`);
    assert.equal(got.input_tokens - got.input_uncached_tokens, w.cached, `${tenant}: cached tokens`);
    const tiers = got.cached_tokens;
    assert.equal(tiers.memory + tiers.disk + tiers.shared + (tiers.prefill ?? 0), w.cached, `${tenant}: tiers add up`);
    assert.equal(got.output_tokens, w.output, `${tenant}: output tokens`);
    assert.equal(BigInt(got.cost_micros), w.cost, `${tenant}: cost ${got.cost_micros} vs ${w.cost} by hand`);
  }
  const g = rows.gamma;
  assert.equal(g.requests, cut.sent, 'every cut request has one record');
  assert.ok(g.output_tokens >= cut.received, `cut requests bill at least what reached the client (${g.output_tokens} >= ${cut.received})`);
  assert.ok(g.output_tokens < cut.asked, `and less than was asked for (${g.output_tokens} < ${cut.asked})`);
  assert.deepEqual(JSON.parse(cli('usage', '--format', 'json', '--group-by', 'tenant')).data, await admin('group_by=tenant'),
    'the CLI and /admin/usage agree');
  assert.deepEqual(await admin('group_by=tenant', router), await admin('group_by=tenant'), 'the router\'s /admin/usage too');
  const asTenant = await fetch(`${router.base}/admin/usage`, { headers: { authorization: `Bearer ${keys.acme}` } });
  assert.equal(asTenant.status, 401, 'a tenant key never reaches the router\'s admin routes');
  const hits = ['memory', 'disk', 'shared'].map((t) => rows.acme.cached_tokens[t] + rows.beta.cached_tokens[t]);
  assert.ok(hits.filter((n) => n > 0).length >= 2, `hits came from several tiers (memory/disk/shared: ${hits})`);
  const done = want.acme.requests + want.beta.requests;
  console.log(`ledger reconcile e2e: pass (${TOTAL} requests in ${seconds.toFixed(1)} s: ${done} completed, ` +
    `${errors} errors, ${cut.sent} cut (${cut.whole} answered before the hang-up); cached by tier memory/disk/shared ${hits.join('/')}; ` +
    `${want.acme.output + want.beta.output} output tokens, ${Number(want.acme.cost + want.beta.cost) / 1e6} billed)`);
});
