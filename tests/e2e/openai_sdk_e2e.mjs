// End-to-end test of `flashserve serve` with the official OpenAI SDK (npm `openai`): generates a
// tiny random-weight model, starts the real binary on 127.0.0.1 (a free port), and checks chat
// (plain, streamed, tools, thinking, n, logprobs, seeds, stop), text completions, models, usage
// and prefix-cache accounting, metrics, every error status over raw HTTP, 429 under a burst,
// cancellation on disconnect, a clean SIGTERM exit, and the embedded default (no --model).
//
// node tests/e2e/openai_sdk_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (SDK or tokenizer missing).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';

const SKIP = 77;
const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));

let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch {
  console.log('SKIP: the npm package "openai" is not installed (run ./scripts/setup.sh)');
  process.exit(SKIP);
}
if (!args.tokenizer || !existsSync(args.tokenizer)) {
  console.log(`SKIP: tokenizer not found at ${args.tokenizer} (run ./scripts/setup.sh)`);
  process.exit(SKIP);
}
if (!args.flashserve || !existsSync(args.flashserve)) {
  console.error(`error: flashserve binary not found at ${args.flashserve}`);
  process.exit(1);
}

const MODEL = 'e2e-tiny';
const MAX_BODY = 65536;
const work = mkdtempSync(join(tmpdir(), 'flashserve-e2e-'));
let server;

function log(...m) { console.log(...m); }

function makeModel() {
  const t0 = Date.now();
  const r = spawnSync(args.flashserve, ['make-model', '--preset', 'tiny', '--out', join(work, 'model'),
    '--tokenizer', args.tokenizer, '--threads', '2'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`make-model failed: ${r.stderr}`);
  log(`# model generated in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

// Starts `flashserve serve <args>`; resolves with the process, its base URL and its output so
// far, once the banner appears.
function startServer(serveArgs, env = process.env) {
  return new Promise((resolve, reject) => {
    const proc = spawn(args.flashserve, ['serve', '--host', '127.0.0.1', '--port', '0', '--threads', '2', ...serveArgs],
      { stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 120000);
    const onData = (d) => {
      out += d;
      const m = out.match(/on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve({ proc, base: m[1], output: () => out }); }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}):\n${out}`)); });
  });
}

// Sends SIGTERM; resolves with the exit code (or 'timeout').
function stopServer(proc) {
  proc.removeAllListeners('exit');
  const exited = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
  proc.kill('SIGTERM');
  return Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 10000))]);
}

const results = [];
async function test(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    results.push(true);
    log(`ok - ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    results.push(false);
    log(`not ok - ${name}: ${e.stack || e}`);
  }
}

function checkUsage(u) {
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  assert.equal(u.prompt_cache_hit_tokens + u.prompt_cache_miss_tokens, u.prompt_tokens);
  assert.equal(u.prompt_tokens_details.cached_tokens, u.prompt_cache_hit_tokens);
  assert.ok(u.completion_tokens >= 1);
}

const user = (content) => [{ role: 'user', content }];

async function main() {
  makeModel();
  let base;
  ({ proc: server, base } = await startServer(['--model', join(work, 'model'), '--served-model-name', MODEL,
    '--max-running', '4', '--max-waiting', '2', '--max-body-bytes', String(MAX_BODY), '--max-context', '2048']));
  log(`# server at ${base}`);
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
  const raw = (path, init = {}) => fetch(base + path, init);

  await test('models list', async () => {
    const models = [];
    for await (const m of client.models.list()) models.push(m);
    assert.deepEqual(models.map((m) => m.id), [MODEL]);
    assert.equal((await client.models.retrieve(MODEL)).id, MODEL);
  });

  await test('chat, not streamed (thinking on by default)', async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: user('Hello'), max_tokens: 8 });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.model, MODEL);
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.reasoning_content, 'string');
    assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
    checkUsage(r.usage);
    assert.ok(r.usage.completion_tokens <= 8);
  });

  await test('chat, streamed with include_usage (SDK stream helper validates the protocol)', async () => {
    const stream = client.chat.completions.stream({ model: MODEL, messages: user('Hi'), max_tokens: 6,
      stream_options: { include_usage: true }, thinking: { type: 'disabled' } });
    const chunks = [];
    stream.on('chunk', (c) => chunks.push(c));
    const final = await stream.finalChatCompletion();
    assert.ok(chunks.length >= 2);
    const last = chunks[chunks.length - 1];
    assert.deepEqual(last.choices, []);
    checkUsage(last.usage);
    for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    assert.equal(final.choices[0].message.content ?? '', text);
    assert.ok(final.choices[0].finish_reason);
  });

  await test('raw stream iteration ends with a finish_reason', async () => {
    const stream = await client.chat.completions.create({ model: MODEL, messages: user('Yo'), max_tokens: 4, stream: true });
    let finish = null;
    let role = null;
    for await (const c of stream) {
      role ??= c.choices[0]?.delta?.role ?? null;
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(role, 'assistant');
    assert.ok(['stop', 'length', 'tool_calls'].includes(finish));
  });

  await test('tools and tool_choice are accepted; any tool call is well formed', async () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
    const r = await client.chat.completions.create({ model: MODEL, messages: user('Weather in Paris?'), tools,
      tool_choice: 'auto', max_tokens: 8, thinking: { type: 'disabled' } });
    checkUsage(r.usage);
    for (const call of r.choices[0].message.tool_calls ?? []) {
      assert.equal(call.type, 'function');
      assert.ok(call.id && call.function.name);
      JSON.parse(call.function.arguments);
    }
    const follow = await client.chat.completions.create({ model: MODEL, max_tokens: 4, tools, messages: [
      ...user('Weather in Paris?'),
      { role: 'assistant', content: '', reasoning_content: 'use the tool', tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' }] });
    checkUsage(follow.usage);
  });

  await test('same seed gives the same text; n choices', async () => {
    const ask = (seed) => client.chat.completions.create({ model: MODEL, messages: user('Tell me a story'),
      max_tokens: 10, temperature: 1.0, seed });
    const [a, b] = [await ask(7), await ask(7)];
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    assert.equal(a.choices[0].message.reasoning_content, b.choices[0].message.reasoning_content);
    const n = await client.chat.completions.create({ model: MODEL, messages: user('Two'), max_tokens: 4, n: 2, seed: 3 });
    assert.deepEqual(n.choices.map((c) => c.index), [0, 1]);
    checkUsage(n.usage);
  });

  await test('logprobs with alternatives', async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: user('Hi'), max_tokens: 4,
      logprobs: true, top_logprobs: 2, thinking: { type: 'disabled' } });
    const entries = r.choices[0].logprobs.content;
    assert.ok(entries.length >= 1 && entries.length <= r.usage.completion_tokens);
    for (const e of entries) {
      assert.ok(e.logprob <= 0);
      assert.equal(e.top_logprobs.length, 2);
      assert.ok(Array.isArray(e.bytes));
    }
  });

  await test('a repeated long prompt hits the prefix cache', async () => {
    const long = Array.from({ length: 120 }, (_, i) => `word${i}`).join(' ');
    const first = await client.chat.completions.create({ model: MODEL, messages: user(long), max_tokens: 2 });
    checkUsage(first.usage);
    assert.ok(first.usage.prompt_tokens > 128, `prompt only ${first.usage.prompt_tokens} tokens`);  // > one block
    const second = await client.chat.completions.create({ model: MODEL, messages: user(long), max_tokens: 2 });
    checkUsage(second.usage);
    assert.ok(second.usage.prompt_cache_hit_tokens > 0, JSON.stringify(second.usage));
    assert.equal(second.usage.prompt_tokens, first.usage.prompt_tokens);
  });

  await test('text completions and a stop string', async () => {
    const greedy = { model: MODEL, prompt: 'The quick brown fox', max_tokens: 12, temperature: 0 };
    const r = await client.completions.create(greedy);
    assert.equal(r.object, 'text_completion');
    checkUsage(r.usage);
    const text = r.choices[0].text;
    assert.ok(text.length >= 4, `text ${JSON.stringify(text)}`);
    const stop = [...text].slice(2, 4).join('');
    const cut = await client.completions.create({ ...greedy, stop: [stop] });
    assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
    assert.equal(cut.choices[0].finish_reason, 'stop');
  });

  await test('errors: malformed JSON, unknown model, invalid UTF-8, oversized body, routes, context', async () => {
    const post = (body, path = '/v1/chat/completions') =>
      raw(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    const expectError = async (res, status, code) => {
      assert.equal(res.status, status);
      const e = (await res.json()).error;
      assert.equal(typeof e.message, 'string');
      assert.ok('type' in e && 'param' in e && 'code' in e);
      if (code) assert.equal(e.code, code);
    };
    await expectError(await post('{"model": '), 400, 'invalid_json');
    await expectError(await post(JSON.stringify({ model: MODEL, messages: 'hi' })), 400);
    await expectError(await post(JSON.stringify({ model: MODEL })), 400);
    await expectError(await post(JSON.stringify({ model: MODEL, messages: user('x'), max_tokens: 0 })), 400);
    const bad = Buffer.concat([Buffer.from(`{"model": "${MODEL}", "messages": [{"role": "user", "content": "`),
      Buffer.from([0xc3, 0x28]), Buffer.from('"}]}')]);
    await expectError(await post(bad), 400, 'invalid_utf8');
    await expectError(await post(JSON.stringify({ model: MODEL, messages: user('x'.repeat(MAX_BODY)) })), 413,
      'request_too_large');
    await expectError(await post(JSON.stringify({ model: MODEL, messages: user('go '.repeat(3000)) })), 400,
      'context_length_exceeded');
    await expectError(await raw('/v1/nothing'), 404);
    await expectError(await raw('/v1/chat/completions'), 405);
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages: user('x') }),
      (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
    await assert.rejects(client.chat.completions.create({ model: MODEL, messages: user('x'), temperature: 'hot' }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
    const health = await raw('/health');
    assert.equal(health.status, 200);
  });

  await test('a burst beyond the queue gets 429 with Retry-After, and the rest succeed', async () => {
    const body = JSON.stringify({ model: MODEL, messages: user('burst'), max_tokens: 24 });
    const all = await Promise.all(Array.from({ length: 12 }, () =>
      raw('/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body })));
    const statuses = all.map((r) => r.status);
    assert.ok(statuses.includes(429), `statuses ${statuses}`);
    assert.ok(statuses.includes(200), `statuses ${statuses}`);
    for (const r of all) {
      assert.ok([200, 429].includes(r.status));
      if (r.status === 429) assert.ok(r.headers.get('retry-after'));
      await r.text();
    }
  });

  await test('a client that disconnects mid-stream has its request cancelled', async () => {
    const metric = async (name) => {
      const text = await (await raw('/metrics')).text();
      const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
      return m ? Number(m[1]) : NaN;
    };
    const abort = new AbortController();
    const res = await raw('/v1/chat/completions', { method: 'POST', signal: abort.signal,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: user('long'), max_tokens: 2000, stream: true, ignore_eos: true }) });
    const reader = res.body.getReader();
    await reader.read();
    await reader.read();
    const waitFor = async (value) => {  // engine statistics are published after each step
      const t0 = Date.now();
      while (Date.now() - t0 < 10000 && (await metric('flashserve_running_sequences')) !== value)
        await new Promise((r) => setTimeout(r, 20));
      return metric('flashserve_running_sequences');
    };
    assert.equal(await waitFor(1), 1);
    abort.abort();
    assert.equal(await waitFor(0), 0);
    const text = await (await raw('/metrics')).text();
    assert.match(text, /flashserve_http_requests_total\{route="\/v1\/chat\/completions",status="200"\} \d+/);
    assert.match(text, /flashserve_time_to_first_token_seconds_count \d+/);
  });

  await test('SIGTERM stops the server with exit code 0', async () => {
    // Every thread but the one in sigwait blocks SIGINT/SIGTERM: a thread that did not would
    // take a signal sent just after the banner and the process would die of it (Linux /proc).
    const tasks = `/proc/${server.pid}/task`;
    if (existsSync(tasks)) {
      const unblocked = readdirSync(tasks).filter((t) => {
        const mask = BigInt('0x' + readFileSync(`${tasks}/${t}/status`, 'utf8').match(/SigBlk:\s*([0-9a-f]+)/)[1]);
        return (mask & 0x4002n) !== 0x4002n;
      });
      assert.equal(unblocked.length, 1, `threads not blocking SIGTERM: ${unblocked}`);
    }
    assert.equal(await stopServer(server), 0);
    server = null;
  });

  await test('no --model: the demo model is generated once into XDG_CACHE_HOME and served', async () => {
    const cache = join(work, 'cache');
    const env = { ...process.env, XDG_CACHE_HOME: cache };
    const first = await startServer(['--tokenizer', args.tokenizer], env);
    server = first.proc;
    assert.match(first.output(), /first start: generating the demo model/);
    const demo = new OpenAI({ baseURL: `${first.base}/v1`, apiKey: 'unused', maxRetries: 0 });
    const r = await demo.chat.completions.create({ model: 'deepseek-v4-demo', messages: user('Hello'), max_tokens: 4 });
    checkUsage(r.usage);
    assert.equal(await stopServer(server), 0);
    assert.ok(existsSync(join(cache, 'flashserve', 'demo-tiny-v41-1m-e2', 'config.json')));
    // No temporary left; the repacked weights (where this CPU repacks any) in one packed file.
    const entries = readdirSync(join(cache, 'flashserve')).sort();
    const packed = entries.includes('packed');
    assert.deepEqual(entries.filter((e) => e !== 'packed'), ['demo-tiny-v41-1m-e2', 'reasoning-seal.key']);
    if (packed) {
      const files = readdirSync(join(cache, 'flashserve', 'packed'));
      assert.equal(files.length, 1, `packed: ${files}`);
      assert.match(files[0], /^demo-tiny-v41-1m-e2-[0-9a-f]{16}\.fspack$/);
      assert.match(first.output(), /packing .*once for this checkpoint/);
    }
    const second = await startServer(['--tokenizer', args.tokenizer], env);
    server = second.proc;
    assert.doesNotMatch(second.output(), /first start/);
    if (packed) assert.match(second.output(), /packed weights mapped from|packed weights .* read into 2 MiB pages/);
    if (packed) assert.doesNotMatch(second.output(), /packing /);
    assert.equal(await stopServer(server), 0);
    server = null;
  });
}

try {
  await main();
} catch (e) {
  results.push(false);
  log(`not ok - setup: ${e.stack || e}`);
} finally {
  if (server) server.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
}
const failed = results.filter((r) => !r).length;
log(`# ${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
