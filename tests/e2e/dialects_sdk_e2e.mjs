// The Anthropic Messages and OpenAI Responses dialects with the official SDKs (npm
// `@anthropic-ai/sdk` and `openai`, pinned in tests/e2e/package.json) against `flashserve serve`
// on the demo model: create and stream (a greedy stream equals the whole response), thinking
// blocks and reasoning items handed back sealed, tool-call round trips, countTokens, usage sums
// (uncached + cached = prompt), the SDKs' error classes, Chat Completions with DeepSeek's
// effort names, text parts, budgets and seeds (streamed == whole for one seed), FIM completion
// and /tokenize, /detokenize.
//
// node tests/e2e/dialects_sdk_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (SDKs or tokenizer missing).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { officialSdks, parseArgs, runE2e, start } from './cluster_util.mjs';

const { Anthropic, OpenAI } = await officialSdks();
const args = parseArgs();
const MODEL = 'deepseek-v4-demo';
const work = mkdtempSync(join(tmpdir(), 'flashserve-dialects-'));
// Long enough to fill whole cache blocks (128 tokens), so repeats are served from the cache.
const LONG = Array.from({ length: 60 }, (_, i) => `Rule ${i}: answer briefly and politely.`).join('\n');

async function test(name, fn) {
  await fn();
  console.log(`ok - ${name}`);
}

async function messages(anthropic) {
  const ask = { model: MODEL, max_tokens: 96, system: LONG, messages: [{ role: 'user', content: 'Weather in Paris?' }],
    thinking: { type: 'enabled', budget_tokens: 8 }, temperature: 0 };
  let first;
  await test('Messages: create, a greedy stream equals it, usage sums to countTokens', async () => {
    first = await anthropic.messages.create(ask);
    assert.equal(first.type, 'message');
    assert.equal(first.content[0].type, 'thinking');
    assert.ok(first.content[0].signature.startsWith('fsr1.'));
    assert.ok(['end_turn', 'max_tokens'].includes(first.stop_reason));
    const streamed = await anthropic.messages.stream(ask).finalMessage();
    assert.deepEqual(streamed.content.map((b) => [b.type, b.text ?? b.thinking]), first.content.map((b) => [b.type, b.text ?? b.thinking]));
    assert.equal(streamed.stop_reason, first.stop_reason);
    assert.equal(streamed.usage.output_tokens, first.usage.output_tokens);
    const { input_tokens } = await anthropic.messages.countTokens({ model: MODEL, system: LONG, messages: ask.messages, thinking: ask.thinking });
    for (const u of [first.usage, streamed.usage]) assert.equal(u.input_tokens + u.cache_read_input_tokens, input_tokens);
    assert.ok(streamed.usage.cache_read_input_tokens > 0, 'the second identical prompt hits the prefix cache');
  });
  const tools = [{ name: 'get_weather', description: 'Weather of a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];
  await test('Messages: tool use round trip hands the sealed thinking block back', async () => {
    const history = [ask.messages[0],
      { role: 'assistant', content: [first.content[0], { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: 'sunny' }] }];
    const r = await anthropic.messages.create({ ...ask, tools, messages: history });
    assert.equal(r.type, 'message');
    const tampered = structuredClone(history);
    tampered[1].content[0].signature = 'EqoBCkYIBRgCKkD-from-another-provider';
    await assert.rejects(anthropic.messages.create({ ...ask, tools, messages: tampered }), (e) =>
      e instanceof Anthropic.BadRequestError && e.error.error.type === 'invalid_request_error' && /signature/.test(e.error.error.message));
  });
  await test('Messages: the SDK maps our errors to its classes', async () => {
    await assert.rejects(anthropic.messages.create({ ...ask, model: 'no-such-model' }), Anthropic.NotFoundError);
    await assert.rejects(anthropic.messages.create({ ...ask, tool_choice: { type: 'tool', name: 'no_such_tool' }, tools }),
      Anthropic.BadRequestError);
    const forced = await anthropic.messages.create({ ...ask, tool_choice: { type: 'any' }, tools });
    assert.ok(forced.stop_reason === 'tool_use' || forced.stop_reason === 'max_tokens', forced.stop_reason);
    const aliased = await anthropic.messages.create({ ...ask, model: 'claude-sonnet-4-5' });
    assert.equal(aliased.model, 'claude-sonnet-4-5');
  });
}

async function responses(openai) {
  const ask = { model: MODEL, instructions: LONG, input: 'Weather in Paris?', temperature: 0, max_output_tokens: 96,
    include: ['reasoning.encrypted_content'], reasoning: { summary: 'auto' }, store: false };
  let first;
  await test('Responses: create, a greedy stream equals it, usage sums', async () => {
    first = await openai.responses.create(ask);
    assert.equal(first.object, 'response');
    assert.equal(first.output[0].type, 'reasoning');
    assert.ok(first.output[0].encrypted_content.startsWith('fsr1.'));
    const stream = openai.responses.stream(ask);
    const streamed = await stream.finalResponse();
    assert.equal(streamed.output_text, first.output_text);
    assert.deepEqual(streamed.output.map((i) => i.type), first.output.map((i) => i.type));
    assert.equal(streamed.usage.output_tokens, first.usage.output_tokens);
    assert.ok(streamed.usage.input_tokens_details.cached_tokens > 0);
    assert.equal(streamed.usage.total_tokens, streamed.usage.input_tokens + streamed.usage.output_tokens);
    assert.ok(streamed.usage.output_tokens_details.reasoning_tokens > 0);
  });
  await test('Responses: function call round trip with the reasoning item handed back', async () => {
    const tools = [{ type: 'function', name: 'get_weather', description: 'Weather', parameters: { type: 'object' }, strict: false }];
    const input = [{ role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] }, first.output[0],
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'sunny' }];
    const r = await openai.responses.create({ ...ask, tools, input });
    assert.equal(r.status === 'completed' || r.status === 'incomplete', true);
    await assert.rejects(openai.responses.create({ ...ask, previous_response_id: first.id }), (e) =>
      e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id');
    await assert.rejects(openai.responses.create({ ...ask, tools, tool_choice: { type: 'function', name: 'no_such_tool' } }),
      OpenAI.BadRequestError);
  });
}

async function chat(openai) {
  await test('Chat: DeepSeek effort names, text parts, budgets, reasoning tokens, seeded stream == whole', async () => {
    const ask = { model: MODEL, max_tokens: 64, seed: 7, reasoning_effort: 'medium', user: 'u-1', store: false,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: 'there' }] }],
      thinking: { type: 'enabled', budget_tokens: 8 } };
    const whole = await openai.chat.completions.create(ask);
    assert.equal(whole.usage.completion_tokens_details.reasoning_tokens, 9);  // 8, then the forced </think>
    let content = '', reasoning = '', usage = null;
    for await (const chunk of await openai.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } })) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        content += c.delta.content ?? '';
        reasoning += c.delta.reasoning_content ?? '';
      }
    }
    assert.equal(content, whole.choices[0].message.content);
    assert.equal(reasoning, whole.choices[0].message.reasoning_content);
    assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
    assert.equal(usage.prompt_cache_hit_tokens + usage.prompt_cache_miss_tokens, usage.prompt_tokens);
    await assert.rejects(openai.chat.completions.create({ ...ask, tool_choice: 'required', tools: [] }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice');
  });
}

async function fimAndTokenize(openai, base) {
  await test('Completions: FIM suffix and /tokenize as DeepSeek and vLLM serve them', async () => {
    const count = async (prompt) => (await (await fetch(`${base}/tokenize`, { method: 'POST',
      body: JSON.stringify({ prompt, add_special_tokens: false }) })).json()).count;
    const prompt = 'def area(r):\n    return ', suffix = '\n\nprint(area(2))';
    const r = await openai.completions.create({ model: MODEL, prompt, suffix, max_tokens: 8 });
    assert.equal(r.usage.prompt_tokens, 4 + await count(prompt) + await count(suffix));  // BOS, begin, hole, end
    const ids = (await (await fetch(`${base}/tokenize`, { method: 'POST', body: JSON.stringify({ prompt: 'héllo' }) })).json()).tokens;
    const back = await (await fetch(`${base}/detokenize`, { method: 'POST', body: JSON.stringify({ tokens: ids.slice(1) }) })).json();
    assert.equal(back.prompt, 'héllo');
  });
}

await runE2e(work, async (ctx) => {
  ctx.server = await start(args.flashserve, ['serve', '--host', '127.0.0.1', '--port', '0', '--threads', '2',
    '--tokenizer', args.tokenizer, '--max-reasoning-tokens', '16', '--logit-bias', 'eos:+12',
    '--served-model-name', MODEL, '--served-model-name', 'claude-*'], { ...process.env, XDG_CACHE_HOME: join(work, 'cache') });
  const anthropic = new Anthropic({ baseURL: ctx.server.base, apiKey: 'sk-local', maxRetries: 0 });
  const openai = new OpenAI({ baseURL: `${ctx.server.base}/v1`, apiKey: 'sk-local', maxRetries: 0 });
  await messages(anthropic);
  await responses(openai);
  await chat(openai);
  await fimAndTokenize(openai, ctx.server.base);
});
