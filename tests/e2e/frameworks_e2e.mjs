// The application frameworks people build on, pinned in tests/e2e/package.json, against
// `flashserve serve` on the demo model through a recording proxy: LangChain (ChatOpenAI on Chat
// Completions: invoke, stream, tools and a tool round trip, structured output by json_schema and by
// a forced function; ChatAnthropic on Messages: invoke, stream, structured output by a forced
// strict tool and by output_config.format) and the Vercel AI SDK (the OpenAI provider on Chat Completions and on Responses, its
// default; tools; the Anthropic provider; generateObject on all three). Each call returns a
// well-formed answer, and no request the frameworks sent got a 4xx or 5xx.
//
// node tests/e2e/frameworks_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (packages or tokenizer missing).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { parseArgs, runBehindRecorder } from './cluster_util.mjs';

let lc, ai;
try {
  lc = {
    ...(await import('@langchain/openai')), ...(await import('@langchain/anthropic')),
    ...(await import('@langchain/core/messages')), ...(await import('@langchain/core/tools')),
  };
  ai = { ...(await import('ai')), ...(await import('@ai-sdk/openai')), ...(await import('@ai-sdk/anthropic')) };
  ai.z = (await import('zod')).z;
} catch (e) {
  console.log(`SKIP: LangChain / Vercel AI SDK packages are not installed (run ./scripts/setup.sh): ${e.message}`);
  process.exit(77);
}
const args = parseArgs();
const MODEL = 'deepseek-v4-demo';
const work = mkdtempSync(join(tmpdir(), 'flashserve-frameworks-'));

async function test(name, fn) {
  await fn();
  console.log(`ok - ${name}`);
}

// A schema whose every valid instance is a few tokens long.
const Verdict = ai.z.object({ answer: ai.z.enum(['yes', 'no']), confidence: ai.z.number().int().min(0).max(9) });
function checkVerdict(v) {
  assert.ok(['yes', 'no'].includes(v.answer), JSON.stringify(v));
  assert.ok(Number.isInteger(v.confidence) && v.confidence >= 0 && v.confidence <= 9, JSON.stringify(v));
}

async function langchain(base) {
  const chat = new lc.ChatOpenAI({ model: MODEL, apiKey: 'sk-local', maxTokens: 48, configuration: { baseURL: `${base}/v1` } });
  const ask = [new lc.SystemMessage('Answer briefly.'), new lc.HumanMessage('Hello there')];
  await test('LangChain ChatOpenAI: invoke and stream', async () => {
    const r = await chat.invoke(ask);
    assert.equal(typeof r.content, 'string');
    assert.ok(r.usage_metadata.input_tokens > 0 && r.usage_metadata.output_tokens > 0);
    let text = '';
    for await (const chunk of await chat.stream(ask)) text += chunk.content;
    assert.equal(typeof text, 'string');
  });
  const weather = lc.tool(async ({ city }) => `sunny in ${city}`, {
    name: 'get_weather', description: 'Weather of a city', schema: ai.z.object({ city: ai.z.string() }) });
  await test('LangChain ChatOpenAI: bound tools and a tool-result round trip', async () => {
    const r = await chat.bindTools([weather]).invoke(ask);
    assert.equal(typeof r.content, 'string');
    // A tool round trip as an agent loop sends it (chat mode: LangChain keeps no reasoning_content).
    const plain = new lc.ChatOpenAI({ model: MODEL, apiKey: 'sk-local', maxTokens: 32, configuration: { baseURL: `${base}/v1` },
      modelKwargs: { thinking: { type: 'disabled' } } }).bindTools([weather]);
    const call = new lc.AIMessage({ content: '', tool_calls: [{ id: 'call_1', name: 'get_weather', args: { city: 'Paris' } }] });
    const next = await plain.invoke([...ask, call, new lc.ToolMessage({ tool_call_id: 'call_1', content: 'sunny' })]);
    assert.equal(typeof next.content, 'string');
  });
  // Structured output, as each way LangChain asks for it: a strict json_schema response format,
  // a forced function call, and on Messages a forced tool. The schema leaves the model only short
  // answers, so the random demo model finishes; the grammar makes every answer parse.
  for (const method of ['jsonSchema', 'functionCalling']) {
    await test(`LangChain ChatOpenAI: withStructuredOutput (${method})`, async () => {
      const strict = new lc.ChatOpenAI({ model: MODEL, apiKey: 'sk-local', maxTokens: 200, configuration: { baseURL: `${base}/v1` },
        modelKwargs: { thinking: { type: 'disabled' } } });
      checkVerdict(await strict.withStructuredOutput(Verdict, { name: 'verdict', method, strict: true }).invoke(ask));
    });
  }
  await test('LangChain ChatAnthropic: withStructuredOutput (a forced strict tool)', async () => {
    const claude = new lc.ChatAnthropic({ model: MODEL, apiKey: 'sk-local', anthropicApiUrl: base, maxTokens: 200 });
    checkVerdict(await claude.withStructuredOutput(Verdict, { name: 'verdict', method: 'functionCalling', strict: true }).invoke(ask));
  });
  await test('LangChain ChatAnthropic: withStructuredOutput (output_config.format)', async () => {
    // Anthropic's SDK moves enum and bounds into descriptions for this method, so only types are
    // enforced: a schema of booleans keeps the random model's answers short.
    const Flags = ai.z.object({ correct: ai.z.boolean(), sure: ai.z.boolean() });
    const claude = new lc.ChatAnthropic({ model: MODEL, apiKey: 'sk-local', anthropicApiUrl: base, maxTokens: 200 });
    const v = await claude.withStructuredOutput(Flags, { name: 'flags', method: 'jsonSchema' }).invoke(ask);
    assert.ok(typeof v.correct === 'boolean' && typeof v.sure === 'boolean', JSON.stringify(v));
  });
  await test('LangChain ChatAnthropic: invoke and stream', async () => {
    const claude = new lc.ChatAnthropic({ model: MODEL, apiKey: 'sk-local', anthropicApiUrl: base, maxTokens: 48 });
    const r = await claude.invoke(ask);
    assert.ok(r.usage_metadata.input_tokens > 0);
    let chunks = 0;
    for await (const chunk of await claude.stream(ask)) chunks += chunk ? 1 : 0;
    assert.ok(chunks > 0);
  });
}

async function vercel(base) {
  const openai = ai.createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local' });
  await test('Vercel AI SDK: OpenAI provider on Chat Completions (generate, stream, tools)', async () => {
    const r = await ai.generateText({ model: openai.chat(MODEL), prompt: 'Hello there', maxOutputTokens: 48 });
    assert.equal(typeof r.text, 'string');
    assert.ok(r.usage.inputTokens > 0);
    const s = ai.streamText({ model: openai.chat(MODEL), prompt: 'Hello there', maxOutputTokens: 48 });
    let text = '';
    for await (const part of s.textStream) text += part;
    assert.equal(text, await s.text);
    const tools = { get_weather: ai.tool({ description: 'Weather', inputSchema: ai.z.object({ city: ai.z.string() }),
      execute: async ({ city }) => `sunny in ${city}` }) };
    const t = await ai.generateText({ model: openai.chat(MODEL), prompt: 'Weather in Paris?', tools, maxOutputTokens: 48 });
    assert.ok(['stop', 'length', 'tool-calls'].includes(t.finishReason));
  });
  await test('Vercel AI SDK: OpenAI provider on Responses (its default)', async () => {
    const r = await ai.generateText({ model: openai(MODEL), prompt: 'Hello there', maxOutputTokens: 48 });
    assert.equal(typeof r.text, 'string');
    assert.ok(r.usage.inputTokens > 0);
    const s = ai.streamText({ model: openai(MODEL), prompt: 'Hello there', maxOutputTokens: 48 });
    await s.text;
  });
  await test('Vercel AI SDK: generateObject on Chat Completions and Responses', async () => {
    for (const model of [openai.chat(MODEL), openai(MODEL)]) {
      const r = await ai.generateObject({ model, schema: Verdict, prompt: 'Is Paris in France?', maxOutputTokens: 200,
        providerOptions: { openai: { reasoningEffort: 'none' } } });
      checkVerdict(r.object);
    }
  });
  await test('Vercel AI SDK: generateObject on Messages', async () => {
    const anthropic = ai.createAnthropic({ baseURL: `${base}/v1`, apiKey: 'sk-local' });
    const r = await ai.generateObject({ model: anthropic(MODEL), schema: Verdict, prompt: 'Is Paris in France?', maxOutputTokens: 200 });
    checkVerdict(r.object);
  });
  await test('Vercel AI SDK: Anthropic provider (generate, stream)', async () => {
    const anthropic = ai.createAnthropic({ baseURL: `${base}/v1`, apiKey: 'sk-local' });
    const r = await ai.generateText({ model: anthropic(MODEL), prompt: 'Hello there', maxOutputTokens: 48 });
    assert.equal(typeof r.text, 'string');
    const s = ai.streamText({ model: anthropic(MODEL), prompt: 'Hello there', maxOutputTokens: 48 });
    await s.text;
  });
}

await runBehindRecorder(args.flashserve, ['--tokenizer', args.tokenizer, '--max-reasoning-tokens', '8', '--logit-bias', 'eos:+12'],
  work, async (base) => {
    await langchain(base);
    await vercel(base);
  });
