// End-to-end test of tenants and keys in the metering store, with the real CLI, a worker and a
// router on loopback:
//  1. keys made by `flashserve key create` work on a running worker without a restart; no key
//     or a wrong key is a 401; a revoked key stops working within the refresh interval;
//  2. tenants are cache namespaces: B never hits A's cached prompt, until an operator gives B
//     A's namespace on purpose (`tenant set --namespace`), live;
//  3. the router reads the same store: it refuses a missing or revoked key itself, and passes a
//     tenant's 429 with its rate-limit headers on.
//
// node tests/e2e/tenants_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (tokenizer missing).
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { parseArgs, runE2e, sleep, start, stop, waitHealthy } from './cluster_util.mjs';

const args = parseArgs();
const work = mkdtempSync(join(tmpdir(), 'flashserve-tenants-e2e-'));
const db = join(work, 'meter.db');

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
    '--api-key', 'sk-router-polls']);
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
  console.log('tenants e2e: pass');
});
