// End-to-end test of the persistent KV store across a restart: starts `flashserve serve` with
// --kv-dir on a tiny generated model, sends a long prompt, restarts the server on the same
// directory (reading it with --kv-direct-io), sends the prompt again, and checks that the second
// request reports >= 90% cached prompt tokens (all from the disk tier), produces the same greedy
// output, and reaches its first token much sooner.
//
// node tests/e2e/kv_restart_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (tokenizer missing).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
if (!args.tokenizer || !existsSync(args.tokenizer)) {
  console.log(`SKIP: tokenizer not found at ${args.tokenizer} (run ./scripts/setup.sh)`);
  process.exit(77);
}
const work = mkdtempSync(join(tmpdir(), 'flashserve-kv-e2e-'));

function startServer(extra = []) {
  return new Promise((resolve, reject) => {
    const proc = spawn(args.flashserve, ['serve', '--model', join(work, 'model'), '--served-model-name', 'kv',
      '--host', '127.0.0.1', '--port', '0', '--threads', '2', '--kv-dir', join(work, 'kv'),
      '--kv-disk-bytes', String(1 << 30), '--kv-dram-bytes', String(256 << 20), ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 120000);
    const onData = (d) => {
      out += d;
      const m = out.match(/on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve({ proc, base: m[1] }); }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}):\n${out}`)); });
  });
}

function stopServer(proc) {
  proc.removeAllListeners('exit');
  const exited = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
  proc.kill('SIGTERM');
  return Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 15000))]);
}

// Streams one greedy completion of `prompt` (token ids); returns text, usage and TTFT.
async function complete(base, prompt) {
  const t0 = performance.now();
  const res = await fetch(`${base}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'kv', prompt, max_tokens: 8, temperature: 0, stream: true,
      stream_options: { include_usage: true } }),
  });
  assert.equal(res.status, 200);
  let text = '', usage = null, ttft = null, buffer = '';
  for await (const chunk of res.body) {
    buffer += Buffer.from(chunk).toString('utf8');
    let nl;
    while ((nl = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, nl).replace(/^data: /, '');
      buffer = buffer.slice(nl + 2);
      if (event === '[DONE]') continue;
      const j = JSON.parse(event);
      if (j.choices?.length && j.choices[0].text) {
        if (ttft === null) ttft = performance.now() - t0;
        text += j.choices[0].text;
      }
      if (j.usage) usage = j.usage;
    }
  }
  return { text, usage, ttft: ttft ?? performance.now() - t0 };
}

let failed = false;
try {
  const r = spawnSync(args.flashserve, ['make-model', '--preset', 'tiny', '--out', join(work, 'model'),
    '--tokenizer', args.tokenizer, '--threads', '2'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`make-model failed: ${r.stderr}`);
  // 2100 token ids: the cacheable prefix ends at the last block boundary (2048 tokens, 97.5%).
  let seed = 7;
  const prompt = Array.from({ length: 2100 }, () => 1000 + ((seed = (seed * 1103515245 + 12345) % 2147483648) % 90000));

  let s = await startServer();
  const cold = await complete(s.base, prompt);
  assert.equal(await stopServer(s.proc), 0, 'clean exit after the first request');
  s = await startServer(['--kv-direct-io']);  // the restore reads through the direct-I/O batches
  const warm = await complete(s.base, prompt);
  const metrics = await (await fetch(`${s.base}/metrics`)).text();
  assert.equal(await stopServer(s.proc), 0, 'clean exit after the second request');

  console.log(`cold: ttft ${cold.ttft.toFixed(0)} ms, usage ${JSON.stringify(cold.usage)}`);
  console.log(`warm: ttft ${warm.ttft.toFixed(0)} ms, usage ${JSON.stringify(warm.usage)}`);
  assert.equal(cold.usage.prompt_cache_hit_tokens, 0);
  assert.equal(warm.usage.prompt_tokens, 2100);
  assert.ok(warm.usage.prompt_cache_hit_tokens >= 0.9 * 2100, 'at least 90% of the prompt is cached');
  assert.equal(warm.usage.prompt_tokens_details.cached_tokens_by_tier.disk, warm.usage.prompt_cache_hit_tokens);
  assert.equal(warm.usage.prompt_cache_hit_tokens + warm.usage.prompt_cache_miss_tokens, 2100);
  assert.equal(warm.text, cold.text, 'same greedy output after the restart');
  assert.ok(warm.ttft < 0.5 * cold.ttft, 'the cached request reaches its first token much sooner');
  assert.match(metrics, /flashserve_kv_hits_total\{tier="disk"\} [1-9]/);
  console.log('PASS kv restart');
} catch (e) {
  failed = true;
  console.log(`FAIL kv restart: ${e.stack || e}`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
