// Structured outputs end to end on the demo model (random weights: the grammar does all the
// work): every schema of bench/data/grammar_schemas.jsonl through response_format, each sampled
// output that ends parses as JSON and validates with ajv (an independent validator, formats
// included) and unsupported schemas are 400s naming the keyword's path; regexes checked with
// node's RegExp; EBNF grammars checked by a parser written here; the OpenAI SDK's
// chat.completions.parse() with a zod schema; streaming; Responses text.format; forced and
// strict tool calls (OpenAI and Anthropic SDKs); refusals.
// A bias toward closing quotes keeps random-weight strings short (masks come first, so validity
// is still the grammar's alone).
//
// node tests/e2e/structured_outputs_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json> [--samples N]
// Exit 0 = pass, 1 = fail, 77 = skipped (packages or tokenizer missing).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { parseArgs, runE2e, start } from './cluster_util.mjs';

let Ajv, addFormats, OpenAI, zodResponseFormat, z;
try {
  Ajv = (await import('ajv/dist/2020.js')).default;  // draft 2020-12 (prefixItems)
  addFormats = (await import('ajv-formats')).default;
  OpenAI = (await import('openai')).default;
  ({ zodResponseFormat } = await import('openai/helpers/zod'));
  ({ z } = await import('zod'));
} catch (e) {
  console.log(`SKIP: ajv / openai / zod are not installed (run ./scripts/setup.sh): ${e.message}`);
  process.exit(77);
}
const args = parseArgs();
const SAMPLES = Number(process.argv.includes('--samples') ? process.argv[process.argv.indexOf('--samples') + 1] : 2);
const MODEL = 'deepseek-v4-demo';
const here = dirname(fileURLToPath(import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'flashserve-structured-'));

// Token ids whose text holds a double quote (byte-level BPE keeps '"' as itself).
const vocab = JSON.parse(readFileSync(args.tokenizer, 'utf8')).model.vocab;
const QUOTE_BIAS = Object.fromEntries(Object.entries(vocab).filter(([t]) => t.includes('"')).map(([, id]) => [id, 8]));

async function post(base, path, body) {
  const r = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

function chatBody(extra, n = SAMPLES, maxTokens = 160) {
  return { model: MODEL, messages: [{ role: 'user', content: 'Answer in the requested format.' }],
    thinking: { type: 'disabled' }, n: Math.min(n, 16), max_tokens: maxTokens, seed: 7, logit_bias: QUOTE_BIAS, ...extra };
}

// Runs `fn` over `items` with two requests in flight.
async function pool(items, fn) {
  let next = 0;
  const worker = async () => { while (next < items.length) { const i = next++; await fn(items[i], i); } };
  await Promise.all([worker(), worker()]);
}

async function schemas(base) {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  const set = readFileSync(join(here, '../../bench/data/grammar_schemas.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  let finished = 0, total = 0, refused = 0;
  await pool(set, async ({ name, schema }) => {
    const format = { response_format: { type: 'json_schema', json_schema: { name: 'out', schema, strict: true } } };
    const choices = [];
    for (let left = SAMPLES, part = 0; left > 0; left -= 8, part += 1) {  // at most 8 choices a request
      const r = await post(base, '/v1/chat/completions', { ...chatBody(format, Math.min(8, left)), seed: 7 + part });
      if (name.startsWith('unsupported_')) {
        assert.equal(r.status, 400, `${name}: ${JSON.stringify(r.body)}`);
        assert.match(r.body.error.param, /^response_format\.json_schema\.schema\.(properties\.\w+\.)?(uniqueItems|not|multipleOf)$/);
        refused += 1;
        return;
      }
      assert.equal(r.status, 200, `${name}: ${JSON.stringify(r.body).slice(0, 400)}`);
      choices.push(...r.body.choices);
    }
    const validate = ajv.compile(schema);
    for (const c of choices) {
      total += 1;
      if (c.finish_reason !== 'stop') { assert.equal(c.finish_reason, 'length'); continue; }
      finished += 1;
      let value;
      try { value = JSON.parse(c.message.content); } catch (e) { assert.fail(`${name}: not JSON: ${c.message.content}`); }
      assert.ok(validate(value), `${name}: ${JSON.stringify(validate.errors)}\n${c.message.content}`);
    }
  });
  assert.ok(finished >= total * 0.5, `only ${finished} of ${total} outputs finished`);
  console.log(`ok - ${set.length} schemas: ${finished} of ${total} sampled outputs finished, every one valid (ajv); ${refused} refused by path`);
}

async function regexes(base) {
  const patterns = ['[A-Z]{3}-\\d{4}', '(yes|no|maybe)', '-?\\d{1,6}(\\.\\d{1,3})?', '[a-z]{2,8}( [a-z]{2,8}){2}',
    '(ab|cd)*e', '[\\u4e00-\\u9fff]{2,4}', '\\w+@\\w+\\.(com|org)', '#[0-9a-f]{6}', '(\\d{1,3}\\.){3}\\d{1,3}', '[^\\s"]{1,12}!'];
  let n = 0;
  await pool(patterns, async (p) => {
    const r = await post(base, '/v1/chat/completions', chatBody({ guided_regex: p }, SAMPLES, 64));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const re = new RegExp(`^(?:${p})$`, 'u');
    for (const c of r.body.choices) {
      if (c.finish_reason !== 'stop') continue;
      assert.ok(re.test(c.message.content), `/${p}/ does not match ${JSON.stringify(c.message.content)}`);
      n += 1;
    }
  });
  console.log(`ok - ${patterns.length} regexes: ${n} finished outputs match (node RegExp)`);
}

// An independent recursive-descent check of the arithmetic grammar below.
function isArithmetic(s) {
  let i = 0;
  const num = () => { const st = i; while (/[0-9]/.test(s[i] ?? '')) i++; return i > st; };
  const term = () => (s[i] === '(' ? (i++, expr() && s[i++] === ')') : num());
  const expr = () => { if (!term()) return false; while (s[i] === '+' || s[i] === '*') { i++; if (!term()) return false; } return true; };
  return expr() && i === s.length;
}

async function ebnf(base) {
  const arithmetic = 'root ::= expr\nexpr ::= term ((\"+\" | \"*\") term)*\nterm ::= num | \"(\" expr \")\"\nnum ::= [0-9]{1,3}\n';
  const r = await post(base, '/v1/chat/completions', chatBody({ guided_grammar: arithmetic }, SAMPLES * 2, 64));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  let n = 0;
  for (const c of r.body.choices) {
    if (c.finish_reason !== 'stop') continue;
    assert.ok(isArithmetic(c.message.content), `not arithmetic: ${JSON.stringify(c.message.content)}`);
    n += 1;
  }
  const list = 'root ::= "[" item ("," item)* "]"\nitem ::= [a-z]+ | root\n';
  const l = await post(base, '/v1/completions', { model: MODEL, prompt: 'A list:', n: Math.min(SAMPLES, 16), max_tokens: 64, seed: 3, ebnf: list });
  assert.equal(l.status, 200, JSON.stringify(l.body));
  for (const c of l.body.choices) {
    if (c.finish_reason !== 'stop') continue;
    const s = c.text.replace(/[a-z]+/g, '"x"');
    assert.doesNotThrow(() => JSON.parse(s), `not a nested list: ${c.text}`);
    n += 1;
  }
  const bad = await post(base, '/v1/chat/completions', chatBody({ guided_grammar: 'root ::= "a"\nx ::= [b' }));
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.param, 'guided_grammar');
  assert.match(bad.body.error.message, /line 2/);
  console.log(`ok - EBNF: ${n} finished outputs parse (checked here), a broken grammar names its line`);
}

async function clients(base) {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local' });
  const Answer = z.object({ label: z.enum(['cat', 'dog']), count: z.number().int(), ok: z.boolean() });
  const parsed = await client.chat.completions.parse({ model: MODEL, messages: [{ role: 'user', content: 'Classify.' }],
    response_format: zodResponseFormat(Answer, 'answer'), max_tokens: 120, seed: 1, logit_bias: QUOTE_BIAS,
    thinking: { type: 'disabled' } });
  const p = parsed.choices[0].message.parsed;
  assert.ok(Answer.safeParse(p).success, JSON.stringify(p));
  console.log(`ok - OpenAI SDK chat.completions.parse with zod: ${JSON.stringify(p)}`);

  const schema = { type: 'object', properties: { items: { type: 'array', items: { type: 'integer' }, maxItems: 5 } }, required: ['items'] };
  const body = chatBody({ response_format: { type: 'json_schema', json_schema: { name: 's', schema } } }, 1, 120);
  const once = await post(base, '/v1/chat/completions', body);
  const stream = await client.chat.completions.create({ ...body, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, once.body.choices[0].message.content);
  assert.ok(Array.isArray(JSON.parse(text).items));
  console.log('ok - streamed constrained output equals the unstreamed one and parses');

  const resp = await post(base, '/v1/responses', { model: MODEL, input: 'Give JSON.', max_output_tokens: 120, reasoning: { effort: 'none' },
    text: { format: { type: 'json_schema', name: 's', schema, strict: true } } });
  assert.equal(resp.status, 200, JSON.stringify(resp.body));
  const out = resp.body.output.find((o) => o.type === 'message');
  if (resp.body.status === 'completed') assert.ok(Array.isArray(JSON.parse(out.content[0].text).items));

  const two = await post(base, '/v1/chat/completions', chatBody({ guided_regex: 'a', response_format: { type: 'json_object' } }));
  assert.equal(two.status, 400);
  assert.equal(two.body.error.param, 'response_format');
  console.log('ok - Responses text.format; two constraints in one request are a 400');
}

// Forced and strict tool calls: the DSML block comes back as tool calls whose arguments validate.
async function tools(base) {
  const ajv = new Ajv({ strict: false });
  // Raw DSML string values under a pattern and length bounds too.
  const parameters = { type: 'object', properties: { days: { type: 'integer', minimum: 1, maximum: 7 },
    unit: { enum: ['c', 'f'] }, detailed: { type: 'boolean' }, code: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{2,4}$' },
    note: { type: 'string', minLength: 1, maxLength: 12 } }, required: ['days', 'unit', 'code'], additionalProperties: false };
  const validate = ajv.compile(parameters);
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local' });
  const weather = { type: 'function', function: { name: 'get_weather', description: 'Forecast', parameters, strict: true } };
  const now = { type: 'function', function: { name: 'now', parameters: { type: 'object', properties: {} } } };
  let calls = 0;
  for (const [choice, parallel] of [['required', false], [{ type: 'function', function: { name: 'get_weather' } }, true]]) {
    const r = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Weather?' }],
      tools: [weather, now], tool_choice: choice, parallel_tool_calls: parallel, max_tokens: 200, n: 3, seed: 5,
      thinking: { type: 'disabled' } });
    for (const c of r.choices) {
      if (c.finish_reason === 'length') continue;
      assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
      const tc = c.message.tool_calls;
      assert.ok(tc.length >= 1 && (parallel || tc.length === 1), JSON.stringify(tc));
      for (const t of tc) {
        if (typeof choice === 'object') assert.equal(t.function.name, 'get_weather');
        if (t.function.name === 'get_weather') assert.ok(validate(JSON.parse(t.function.arguments)), t.function.arguments);
        calls += 1;
      }
    }
  }
  assert.ok(calls > 0, 'no forced call finished');
  const { default: Anthropic } = await import('@anthropic-ai/sdk');
  const claude = new Anthropic({ baseURL: base, apiKey: 'sk-local' });
  const m = await claude.messages.create({ model: MODEL, max_tokens: 200, messages: [{ role: 'user', content: 'Weather?' }],
    tools: [{ name: 'get_weather', input_schema: parameters, strict: true }],
    tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true } });
  if (m.stop_reason === 'tool_use') {
    const uses = m.content.filter((b) => b.type === 'tool_use');
    assert.equal(uses.length, 1);
    assert.ok(validate(uses[0].input), JSON.stringify(uses[0].input));
  }
  console.log(`ok - forced tool calls (OpenAI required / named, Anthropic tool): ${calls} calls, strict arguments valid (ajv, pattern and length bounds included)`);
}

await runE2e(work, async (ctx) => {
  ctx.server = await start(args.flashserve, ['serve', '--host', '127.0.0.1', '--port', '0', '--threads', '2'],
    { ...process.env, XDG_CACHE_HOME: `${work}/cache` });
  const base = ctx.server.base;
  for (const section of [regexes, ebnf, clients, tools, schemas]) {
    const t0 = Date.now();
    await section(base);
    console.log(`   (${section.name}: ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  }
});
