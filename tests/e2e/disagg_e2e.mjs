// End-to-end test of prefill/decode disaggregation: `flashserve router` over one
// `serve --role prefill` and one `serve --role decode` worker, against a single `serve` worker:
//  - with a seed, the tokens are the same disaggregated and on one worker;
//  - the state ships at every persist point of the prefill (a boundary each), not only at the end;
//  - the prefill worker's cache hits are the request's cached tokens (reported as prefill_worker);
//  - a structured-output constraint holds on the decode worker: the same constrained tokens;
//  - a client that leaves while its prompt is computed and shipped: both workers free what it
//    held (no sequence, state or pin left) and the decode worker generates nothing for it;
//  - a dead prefill worker costs the decode worker about a second, then it recomputes: the
//    request still succeeds with the same tokens;
//  - speculative decoding (on by default: the tiny preset has an MTP block, --preset tiny-dspark
//    DSpark stages instead; a fixed budget here,
//    as the adaptive one drafts little for random weights) gives the tokens of a worker started
//    with --speculative off, on one worker and disaggregated, and says so in the usage and
//    /metrics.
//
// node tests/e2e/disagg_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json> [--preset tiny-dspark]
// Exit 0 = pass, 1 = fail, 77 = skipped (tokenizer missing).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { metricValue, parseArgs, procs, sleep, start as startCmd, waitHealthy } from './cluster_util.mjs';

const args = parseArgs();
const work = mkdtempSync(join(tmpdir(), 'flashserve-disagg-e2e-'));
const start = (cmdArgs) => startCmd(args.flashserve, cmdArgs);

// The prefill worker persists every 2 blocks, so its state ships in pieces while prefill proceeds.
const worker = (role, extra = []) => start(['serve', '--model', join(work, 'model'), '--served-model-name', 'tiny', '--host', '127.0.0.1',
  '--port', '0', '--threads', '1', '--role', role, '--persist-every-blocks', '2', ...extra]);

const words = Array.from({ length: 400 }, (_, i) => `token${(i * 37) % 211}`).join(' ');
const body = JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: `Summarise: ${words}` }], max_tokens: 12,
  seed: 11, temperature: 0.9, thinking: { type: 'disabled' } });

// The client goes while the prefill worker computes and ships its prompt.
async function leaveDuringTransfer(router, prefill, decode) {
  const words = Array.from({ length: 3000 }, (_, i) => `w${(i * 7919) % 1009}`).join(' ');
  const leaving = JSON.stringify({ model: 'tiny', stream: true, max_tokens: 50, seed: 3, thinking: { type: 'disabled' },
    messages: [{ role: 'user', content: words }] });
  const generatedBefore = await metricValue(decode.base, 'flashserve_generated_tokens_total');
  const ac = new AbortController();
  const pending = fetch(`${router.base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: leaving, signal: ac.signal }).then((r) => r.text()).catch(() => 'aborted');
  let seen = false;
  for (let i = 0; i < 2000 && !seen; ++i) {
    seen = await metricValue(prefill.base, 'flashserve_running_sequences') > 0;
    if (!seen) await sleep(2);
  }
  assert.ok(seen, 'the prefill worker started the prompt');
  ac.abort();
  assert.equal(await pending, 'aborted', 'the client left before its stream ended');
  const idle = async (w) => await metricValue(w.base, 'flashserve_running_sequences') === 0
    && await metricValue(w.base, 'flashserve_waiting_sequences') === 0 && await metricValue(w.base, 'flashserve_state_pool_bytes') === 0
    && await metricValue(w.base, 'flashserve_kv_pinned_objects{tier="memory"}') === 0;
  let both = false;
  for (let i = 0; i < 100 && !both; ++i) {
    both = await idle(prefill) && await idle(decode);
    if (!both) await sleep(50);
  }
  const view = async (w) => Object.fromEntries(await Promise.all(['flashserve_running_sequences', 'flashserve_waiting_sequences',
    'flashserve_state_pool_bytes', 'flashserve_kv_pinned_objects{tier="memory"}'].map(async (n) => [n, await metricValue(w.base, n)])));
  assert.ok(both, `both workers freed the request that left: prefill ${JSON.stringify(await view(prefill))}, ` +
    `decode ${JSON.stringify(await view(decode))}`);
  assert.equal(await metricValue(decode.base, 'flashserve_generated_tokens_total'), generatedBefore,
    'the decode worker generated nothing for a client that left');
}

async function chat(base, text = body) {
  const t0 = performance.now();
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
  const j = await res.json();
  assert.equal(res.status, 200, JSON.stringify(j));
  return { text: j.choices[0].message.content, usage: j.usage, ms: performance.now() - t0 };
}

let failed = false;
try {
  const mk = spawnSync(args.flashserve, ['make-model', '--preset', args.preset ?? 'tiny', '--out', join(work, 'model'),
    '--tokenizer', args.tokenizer, '--threads', '2'], { encoding: 'utf8' });
  if (mk.status !== 0) throw new Error(`make-model failed: ${mk.stderr}`);
  const [prefill, decode, single, plain] = await Promise.all([worker('prefill'),
    worker('decode', ['--num-draft-tokens', '3', '--speculative-budget', 'fixed']),
    worker('both', ['--num-draft-tokens', '3', '--speculative-budget', 'fixed']), worker('both', ['--speculative', 'off'])]);
  const router = await start(['router', '--tokenizer', args.tokenizer, '--host', '127.0.0.1', '--port', '0',
    '--worker', prefill.base, '--worker', decode.base]);
  await waitHealthy(router, 2);

  const reference = await chat(single.base);
  const unspeculated = await chat(plain.base);
  assert.equal(reference.text, unspeculated.text, 'speculative decoding gives the tokens of --speculative off');
  assert.ok(reference.usage.speculative?.drafted > 0, `usage says what was drafted: ${JSON.stringify(reference.usage)}`);
  assert.equal(unspeculated.usage.speculative, undefined);
  assert.match(await (await fetch(`${single.base}/metrics`)).text(), /flashserve_speculative_draft_tokens_total [1-9]/);
  const first = await chat(router.base);
  const snapshot = await (await fetch(`${decode.base}/v1/kv/snapshot`)).json();
  const boundaries = snapshot.objects.filter((o) => o.kind === 'boundary').length;
  assert.ok(boundaries >= 3, `one boundary per persist point reached the decode worker (got ${boundaries})`);
  const second = await chat(router.base);
  console.log(`single: ${JSON.stringify(reference.text)}; disaggregated: ${JSON.stringify(first.text)} (${first.ms.toFixed(0)} ms), ` +
    `again: cached ${second.usage.prompt_cache_hit_tokens} (${second.ms.toFixed(0)} ms)`);
  assert.equal(first.text, reference.text, 'same tokens disaggregated as on one worker');
  assert.ok(first.usage.speculative?.drafted > 0, `the decode worker drafted: ${JSON.stringify(first.usage)}`);
  assert.equal(second.text, reference.text);
  assert.equal(first.usage.prompt_cache_hit_tokens, 0, 'cold on the prefill worker');
  assert.ok(second.usage.prompt_cache_hit_tokens >= 256, 'the prefill worker hit its cache the second time');
  assert.equal(second.usage.prompt_tokens_details.cached_tokens_by_tier.prefill_worker, second.usage.prompt_cache_hit_tokens);
  const metrics = await (await fetch(`${router.base}/metrics`)).text();
  assert.match(metrics, /flashserve_router_disaggregated_total 2/);

  const constrained = JSON.stringify({ ...JSON.parse(body), guided_regex: '[a-z]{3}-[0-9]{2}', max_tokens: 16 });
  const alone = await chat(single.base, constrained);
  assert.equal((await chat(plain.base, constrained)).text, alone.text, 'speculation under a constraint: the same tokens');
  const split = await chat(router.base, constrained);
  assert.match(split.text, /^[a-z]{3}-[0-9]{2}$/, `constrained output ${JSON.stringify(split.text)}`);
  assert.equal(split.text, alone.text, 'same constrained tokens disaggregated as on one worker');
  assert.match(await (await fetch(`${decode.base}/metrics`)).text(), /flashserve_kv_hits_total\{tier="memory"\} [1-9]/);

  await leaveDuringTransfer(router, prefill, decode);
  assert.equal((await chat(router.base)).text, reference.text, 'served after a client left mid-transfer');

  // The prefill worker dies: the decode worker waits ~1 s for a transfer that never comes, then
  // recomputes. (The router keeps pairing until its next poll marks the worker down; after that
  // it has no prefill worker and routes to the decode worker alone.)
  prefill.proc.kill('SIGKILL');
  const after = await chat(router.base);
  assert.equal(after.text, reference.text, 'recomputed on the decode worker: same tokens');
  console.log(`after the prefill worker died: ${after.ms.toFixed(0)} ms`);
  assert.ok(after.ms < 15000, 'no long timeout');
  console.log('PASS disaggregation e2e');
} catch (e) {
  failed = true;
  console.log(`FAIL disaggregation e2e: ${e.stack || e}`);
} finally {
  for (const p of procs) p.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
