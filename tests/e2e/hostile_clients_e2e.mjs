// End-to-end test of one worker against bad input and hostile clients, on loopback:
//  1. the bad-input battery: hundreds of malformed requests over every generation and token
//     route (not JSON, wrong types and huge or negative values in every field, invalid UTF-8 in
//     every field, deep nesting, unknown fields, oversized bodies) and malformed HTTP: each is
//     answered with a 4xx in its route's error shape (or accepted), never a 5xx or a dropped
//     connection;
//  2. slowloris headers and a body trickled byte by byte are cut at --idle-timeout while other
//     clients are served;
//  3. a client that never reads its stream holds up nobody, and its sequence ends when it goes;
//  4. 10,000 connections opened and dropped (some mid-request) leave no descriptor behind;
//  5. requests cancelled while queued or decoding free their sequences;
//  6. no prompt text reaches the worker's log: every prompt above carries a marker, never logged.
//
// node tests/e2e/hostile_clients_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (tokenizer missing).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { parseArgs, runE2e, sleep, start } from './cluster_util.mjs';

const args = parseArgs();
const work = mkdtempSync(join(tmpdir(), 'flashserve-hostile-e2e-'));
const IDLE_S = 2;
const MAX_BODY = 256 * 1024;

const MARKER = 'zqxmarker7731';  // in every prompt; must never appear in the log
const user = [{ role: 'user', content: `hi ${MARKER}` }];
const ROUTES = [
  { path: '/v1/chat/completions', anthropic: false, body: { model: 'tiny', messages: user, max_tokens: 1 },
    fields: ['model', 'messages', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'temperature',
      'top_p', 'top_k', 'min_p', 'presence_penalty', 'frequency_penalty', 'repetition_penalty', 'stop', 'seed', 'n',
      'logprobs', 'top_logprobs', 'logit_bias', 'tools', 'tool_choice', 'parallel_tool_calls', 'response_format',
      'thinking', 'reasoning_effort', 'stop_token_ids', 'ignore_eos', 'cache_ttl', 'guided_json', 'guided_regex',
      'user', 'metadata'] },
  { path: '/v1/completions', anthropic: false, body: { model: 'tiny', prompt: `hi ${MARKER}`, max_tokens: 1 },
    fields: ['model', 'prompt', 'stream', 'max_tokens', 'temperature', 'top_p', 'stop', 'seed', 'n', 'logprobs',
      'logit_bias', 'echo', 'suffix', 'best_of', 'guided_choice', 'regex'] },
  { path: '/v1/messages', anthropic: true, body: { model: 'tiny', max_tokens: 1, messages: user },
    fields: ['model', 'max_tokens', 'messages', 'system', 'stop_sequences', 'stream', 'temperature', 'top_p', 'top_k',
      'tools', 'tool_choice', 'thinking', 'output_config', 'context_management', 'metadata'] },
  { path: '/v1/messages/count_tokens', anthropic: true, body: { model: 'tiny', messages: user },
    fields: ['model', 'messages', 'system', 'tools', 'thinking'] },
  { path: '/v1/responses', anthropic: false, body: { model: 'tiny', input: `hi ${MARKER}`, max_output_tokens: 1 },
    fields: ['model', 'input', 'instructions', 'tools', 'tool_choice', 'parallel_tool_calls', 'text', 'reasoning',
      'max_output_tokens', 'temperature', 'top_p', 'top_logprobs', 'include', 'stream', 'store', 'truncation',
      'previous_response_id', 'background', 'conversation', 'prompt'] },
  { path: '/tokenize', anthropic: false, body: { model: 'tiny', prompt: `hi ${MARKER}` }, fields: ['model', 'prompt', 'messages'] },
  { path: '/detokenize', anthropic: false, body: { model: 'tiny', tokens: [1, 2] }, fields: ['model', 'tokens'] },
];
const WRONG = ['x', -1, 1e300, {}, [[[[]]]], true, 'x'.repeat(5000)];

function nested(depth) { return '['.repeat(depth) + ']'.repeat(depth); }

// One request; resolves with { status, body } (body parsed when JSON). A dropped connection or
// a 20 s wait throws.
async function send(route, raw, headers = {}) {
  const res = await fetch(`${server.base}${route.path}`, { method: 'POST',
    headers: { 'content-type': 'application/json', ...headers }, body: raw, signal: AbortSignal.timeout(20000) });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body, text };
}

// A 4xx in the route's own error shape; a 2xx is an input the route accepts.
function checkAnswer(route, what, r) {
  assert.ok(r.status < 500, `${route.path} ${what}: ${r.status} ${r.text.slice(0, 300)}`);
  if (r.status < 400) return false;
  const e = r.body?.error;
  assert.ok(e && typeof e.message === 'string' && e.message.length > 0 && typeof e.type === 'string',
    `${route.path} ${what}: no error object: ${r.text.slice(0, 300)}`);
  if (route.anthropic) assert.equal(r.body.type, 'error', `${route.path} ${what}: Anthropic's error shape`);
  return true;
}

async function badInputBattery() {
  let refused = 0, total = 0;
  const tally = async (route, what, raw, headers, expect = null) => {
    ++total;
    let r;
    try {
      r = await send(route, raw, headers);
    } catch (e) {
      throw new Error(`${route.path} ${what}: no answer (${e.message})`);
    }
    if (checkAnswer(route, what, r)) ++refused;
    if (expect) {
      assert.equal(r.status, expect.status, `${route.path} ${what}: ${r.text.slice(0, 200)}`);
      if (expect.code) assert.equal(r.body.error.code ?? r.body.error.type, expect.code, `${route.path} ${what}`);
    }
  };
  for (const route of ROUTES) {
    const bad = { status: 400 };
    await tally(route, 'not JSON', '{"model": "tiny", ', {}, bad);
    await tally(route, 'a JSON array', '[1, 2, 3]', {}, bad);
    await tally(route, 'empty body', '', {}, bad);
    await tally(route, 'deep nesting', `{"model": "tiny", "messages": ${nested(100000)}}`, {}, bad);
    await tally(route, 'unknown field', JSON.stringify({ ...route.body, no_such_field: 1 }), {}, bad);
    // Over --max-body-bytes inside a known field: refused by size, before any parsing.
    const big = route.path.includes('tokenize') ? { ...route.body, prompt: 'x'.repeat(MAX_BODY) }
      : { ...route.body, model: 'x'.repeat(MAX_BODY) };
    await tally(route, 'oversized body', JSON.stringify(big), {}, { status: 413, code: 'request_too_large' });
    await tally(route, 'wrong content type', JSON.stringify(route.body), { 'content-type': 'text/plain' });
    for (const field of route.fields) {
      for (const value of WRONG) await tally(route, `${field}=${JSON.stringify(value).slice(0, 20)}`,
        JSON.stringify({ ...route.body, [field]: value }));
      // Invalid UTF-8 inside the field's string value.
      const [left, right] = JSON.stringify({ ...route.body, [field]: 'A\u0001MARK\u0001B' }).split('\\u0001MARK\\u0001');
      await tally(route, `${field} invalid UTF-8`, Buffer.concat([Buffer.from(left), Buffer.from([0xff, 0xfe]), Buffer.from(right)]),
        {}, { status: 400, code: route.anthropic ? 'invalid_request_error' : 'invalid_utf8' });
    }
  }
  console.log(`bad-input battery: ${total} requests, ${refused} refused with a 4xx, none a 5xx`);
  // Today 711 of 793 are refused; a type check that stops refusing shows here.
  assert.equal(total, 793);
  assert.ok(refused >= 705, `refusals (${refused}) fell: a check stopped refusing bad values`);
}

// Raw bytes on a fresh connection; resolves with the status of the first response line (0 when
// the server closed without answering) once the server closes or `ms` pass.
function rawExchange(bytes, ms = 5000) {
  return new Promise((resolve) => {
    const socket = net.connect(Number(new URL(server.base).port), '127.0.0.1');
    let data = '';
    const done = () => { socket.destroy(); const m = data.match(/^HTTP\/1\.1 (\d{3})/); resolve(m ? Number(m[1]) : 0); };
    const timer = setTimeout(done, ms);
    socket.on('data', (d) => { data += d.toString('latin1'); });
    socket.on('close', () => { clearTimeout(timer); done(); });
    socket.on('error', () => {});
    socket.write(bytes);
  });
}

async function malformedHttp() {
  const json = JSON.stringify({ model: 'tiny', messages: user, max_tokens: 1 });
  const cases = [
    [400, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n${json}`],
    [400, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n`],
    [400, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!`],
    [400, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n`],
    [431, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(128 * 1024)}\r\n\r\n`],
    [400, `GARBAGE\r\n\r\n`],
    [400, `POST /v1/chat/completions HTTP/9.9\r\nHost: x\r\n\r\n`],
    [413, `POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: ${MAX_BODY + 10}\r\n\r\n`],
  ];
  const got = [];
  for (const [, c] of cases) got.push(await rawExchange(c));
  assert.deepEqual(got, cases.map(([status]) => status), 'malformed HTTP: 400, or 431 / 413 for sizes');
}

async function chatOk(what, maxMs, target = server) {
  const t0 = Date.now();
  const res = await fetch(`${target.base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', messages: user, max_tokens: 2, thinking: { type: 'disabled' } }),
    signal: AbortSignal.timeout(20000) });
  assert.equal(res.status, 200, what);
  await res.text();
  assert.ok(Date.now() - t0 < maxMs, `${what}: ${Date.now() - t0} ms`);
}

// Connections that send a request's start and then drip bytes: closed by the server once
// --idle-timeout has passed without a complete request. A worker of its own with a 2 s timeout
// (the others keep the default, so no kept-alive connection of this test's client is cut under it).
async function slowClients(slow) {
  const port = Number(new URL(slow.base).port);
  const dripping = Array.from({ length: 40 }, (_, i) => new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const t0 = Date.now();
    const head = i % 2 === 0 ? 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: '
      : 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{';
    socket.on('error', () => {});
    socket.write(head);
    const drip = setInterval(() => socket.write('a'), 200);
    socket.on('close', () => { clearInterval(drip); resolve(Date.now() - t0); });
    setTimeout(() => { clearInterval(drip); socket.destroy(); resolve(Infinity); }, (IDLE_S + 8) * 1000);
  }));
  await sleep(300);
  await chatOk('served while 40 clients drip', 5000, slow);
  const lasted = await Promise.all(dripping);
  assert.ok(lasted.every((ms) => ms < (IDLE_S + 3) * 1000), `dripping clients cut at the idle timeout: ${lasted}`);
}

async function metric(name) {
  const text = await (await fetch(`${server.base}/metrics`)).text();
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

async function settled(what) {
  for (let i = 0; i < 100; ++i) {
    if (await metric('flashserve_running_sequences') === 0 && await metric('flashserve_waiting_sequences') === 0) return;
    await sleep(100);
  }
  assert.fail(`${what}: sequences still held`);
}

// A client that asks for a long stream and never reads it.
async function neverReads() {
  const port = Number(new URL(server.base).port);
  const body = JSON.stringify({ model: 'tiny', messages: user, max_tokens: 3000, ignore_eos: true, stream: true,
    thinking: { type: 'disabled' } });
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.pause();
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  await sleep(500);
  await chatOk('served beside a client that never reads', 5000);
  socket.destroy();
  await settled('a stream whose client left');
}

function fdCount(pid) { return readdirSync(`/proc/${pid}/fd`).length; }

// 10,000 connections, 250 at a time: a third close at once, a third after a partial request,
// a third after a whole request without waiting for the answer.
async function churn() {
  const port = Number(new URL(server.base).port);
  const before = fdCount(server.proc.pid);
  const full = `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"prompt":"hi"}`;
  const one = (i) => new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      if (i % 3 === 1) socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Len');
      if (i % 3 === 2) socket.write(full);
      socket.destroy();
    });
    socket.on('error', () => {});
    socket.on('close', resolve);
  });
  for (let batch = 0; batch < 40; ++batch) await Promise.all(Array.from({ length: 250 }, (_, j) => one(batch * 250 + j)));
  await chatOk('served after 10,000 dropped connections', 5000);
  let after = fdCount(server.proc.pid);
  for (let i = 0; i < 50 && after > before + 4; ++i) { await sleep(100); after = fdCount(server.proc.pid); }
  console.log(`descriptors: ${before} before 10,000 dropped connections, ${after} after`);
  assert.ok(after <= before + 4, `no descriptor leaks: ${before} -> ${after}`);
}

// Streams cancelled while queued (--max-running 2 holds the rest back) and while decoding: their
// sequences end long before their 3,000 tokens.
async function cancellations() {
  const generatedBefore = await metric('flashserve_generated_tokens_total');
  const controllers = [];
  const streams = Array.from({ length: 12 }, (_, i) => {
    const c = new AbortController();
    controllers.push(c);
    return fetch(`${server.base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: `cancel ${i}` }], max_tokens: 3000,
        ignore_eos: true, stream: true, thinking: { type: 'disabled' } }), signal: c.signal })
      .then(async (res) => {
        assert.equal(res.status, 200);
        const reader = res.body.getReader();
        while (!(await reader.read()).done) { /* until aborted */ }
        throw new Error('a stream ended by itself before it was cancelled');
      })
      .catch((e) => { if (e.name !== 'AbortError') throw e; });
  });
  for (let i = 0; i < 100 && !(await metric('flashserve_running_sequences') === 2
                                && await metric('flashserve_waiting_sequences') === 10); ++i) await sleep(100);
  assert.equal(await metric('flashserve_waiting_sequences'), 10, 'ten requests are queued behind two');
  for (const c of controllers) c.abort();  // the ten queued and the two decoding
  await Promise.all(streams);
  await settled('cancelled streams');
  const generated = await metric('flashserve_generated_tokens_total') - generatedBefore;
  assert.ok(generated < 3000, `cancelled streams stopped early (${generated} tokens in all)`);
  await chatOk('served after the cancellations', 5000);
}

let server;
await runE2e(work, async (ctx) => {
  const mk = spawnSync(args.flashserve, ['make-model', '--preset', 'tiny', '--out', join(work, 'model'),
    '--tokenizer', args.tokenizer, '--threads', '2'], { encoding: 'utf8' });
  if (mk.status !== 0) throw new Error(`make-model failed: ${mk.stderr}`);
  server = ctx.server = await start(args.flashserve, ['serve', '--model', join(work, 'model'), '--served-model-name',
    'tiny', '--host', '127.0.0.1', '--port', '0', '--threads', '1',
    '--max-body-bytes', String(MAX_BODY), '--max-running', '2']);
  const slow = await start(args.flashserve, ['serve', '--model', join(work, 'model'), '--served-model-name', 'tiny',
    '--host', '127.0.0.1', '--port', '0', '--threads', '1', '--idle-timeout', String(IDLE_S)]);
  await badInputBattery();
  await malformedHttp();
  await chatOk('served after the battery', 5000);
  await slowClients(slow);
  await neverReads();
  await churn();
  await cancellations();
  assert.ok(!server.log().includes(MARKER), 'prompt text never reaches the log');
  console.log('hostile clients e2e: pass');
});
