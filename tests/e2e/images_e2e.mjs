// Images end to end on a DeepSeek-V4.1 checkpoint with a vision tower (a random tiny-v41 from
// `flashserve make-model`): the OpenAI SDK with an image_url data URL and the Anthropic SDK with
// a base64 image block; prompt tokens = the text plus each picture's span (as image-info plans
// it, as /tokenize and countTokens count it); the same picture gives the same greedy answer and
// logprobs, another picture others; a repeated picture hits the prefix cache through the span,
// while another picture at the same place reuses only the blocks before it; bad pictures and
// refused sources are 400s naming the field, as are a decompression bomb (from its header) and
// too many pictures; remote URLs are fetched from allowed hosts (a loopback server here) and give
// the data URL's answer, refused hosts and missing pictures are 400s; the demo model takes
// pictures, so does a V4 checkpoint laid out as Vision-Exp; a text-only model refuses them.
//
// node tests/e2e/images_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (SDKs or tokenizer missing).
import { execFileSync, spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { officialSdks, parseArgs, runE2e, start, stop } from './cluster_util.mjs';
import { dataUrl, png } from './png_util.mjs';

const { Anthropic, OpenAI } = await officialSdks();
const args = parseArgs();
const work = mkdtempSync(join(tmpdir(), 'flashserve-images-'));
const MODEL = 'tiny-v41';

const CAT = png(200, 120, 1), DOG = png(200, 120, 2);

function spanTokens(buf) {
  const file = join(work, `p${Math.random()}.png`);
  writeFileSync(file, buf);
  return JSON.parse(execFileSync(args.flashserve, ['image-info', file]).toString()).tokens;
}

async function test(name, fn) {
  await fn();
  console.log(`ok - ${name}`);
}

// Long text first, so the picture's span starts inside block 1 and crosses a block boundary.
const LONG = Array.from({ length: 40 }, (_, i) => `Fact ${i}: pictures are worth words.`).join('\n');
const ask = (picture, extra = {}) => ({
  model: MODEL, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2, thinking: { type: 'disabled' },
  messages: [{ role: 'system', content: LONG },
    { role: 'user', content: [{ type: 'text', text: 'Describe:' }, { type: 'image_url', image_url: { url: dataUrl(picture) } }] }],
  ...extra,
});

async function openaiImages(openai, base) {
  const tokenize = async (messages) => (await (await fetch(`${base}/tokenize`, { method: 'POST',
    body: JSON.stringify({ model: MODEL, messages, thinking: { type: 'disabled' } }) })).json());
  const count = async (body) => (await tokenize(body.messages)).count;
  let first;
  await test('OpenAI SDK: image_url data URL; prompt tokens = text + the planned span', async () => {
    first = await openai.chat.completions.create(ask(CAT));
    const textOnly = await count({ messages: [ask(CAT).messages[0], { role: 'user', content: [{ type: 'text', text: 'Describe:' }] }] });
    assert.equal(first.usage.prompt_tokens, await count(ask(CAT)));
    // The V4.1 encoder joins parts with a blank line: text + "\n\n" + placeholder -> span.
    assert.ok(first.usage.prompt_tokens >= textOnly + spanTokens(CAT), `${first.usage.prompt_tokens} vs ${textOnly} + span`);
    assert.ok(first.usage.prompt_tokens <= textOnly + spanTokens(CAT) + 2);
  });
  await test('the same picture: same answer and a prefix-cache hit through its span', async () => {
    const again = await openai.chat.completions.create(ask(CAT));
    assert.deepEqual(again.choices[0].logprobs, first.choices[0].logprobs);
    assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 256, `cached ${again.usage.prompt_tokens_details.cached_tokens}`);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const value = (name) => Number(metrics.match(new RegExp(`^${name} (\\S+)`, 'm'))?.[1]);
    assert.equal(value('flashserve_encoder_cache_misses_total'), 1, 'the picture went through the tower once');
    assert.ok(value('flashserve_encoder_cache_hits_total') >= 1);
    assert.ok(value('flashserve_encoder_cache_bytes') > 0);
  });
  await test('another picture at the same place: other logprobs, cache stops before the picture', async () => {
    // The same text without a picture leaves a resumable state at every block before the picture.
    const textOnly = ask(CAT);
    textOnly.messages[1].content = [{ type: 'text', text: 'Describe:' }];
    await openai.chat.completions.create(textOnly);
    const other = await openai.chat.completions.create(ask(DOG));
    assert.notDeepEqual(other.choices[0].logprobs, first.choices[0].logprobs);
    const ids = (await tokenize(ask(DOG).messages)).tokens;
    const imageStart = ids.indexOf(129264);
    assert.ok(imageStart > 0);
    const cached = other.usage.prompt_tokens_details.cached_tokens;
    assert.equal(cached, Math.floor(imageStart / 128) * 128, `cached ${cached}, image at ${imageStart}`);
  });
  await test('bad pictures and refused sources: 400 naming the field', async () => {
    const cases = [
      [{ url: 'data:image/png;base64,AAAA' }, 'unrecognised image data'],
      [{ url: 'https://example.com/cat.png' }, "'example.com' is not among the hosts"],
      [{ url: 'file:///etc/passwd' }, '--image-file-root'],
    ];
    for (const [image_url, why] of cases) {
      const body = ask(CAT);
      body.messages[1].content[1] = { type: 'image_url', image_url };
      await assert.rejects(openai.chat.completions.create(body), (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.param, 'messages[1].content[1]');
        assert.ok(e.message.includes(why), e.message);
        return true;
      });
    }
  });
}

// Remote pictures: the server runs with --image-fetch-hosts 127.0.0.1 --image-fetch-allow-private
// and fetches from a loopback server here; the picture by URL is the picture by data URL.
async function remoteImages(openai, anthropic, base) {
  const site = createServer((req, res) => {
    if (req.url === '/cat.png') return res.writeHead(200, { 'Content-Type': 'image/png' }).end(CAT);
    if (req.url === '/moved') return res.writeHead(302, { Location: '/cat.png' }).end();
    res.writeHead(404).end();
  });
  await new Promise((resolve) => site.listen(0, '127.0.0.1', resolve));
  const url = (path) => `http://127.0.0.1:${site.address().port}${path}`;
  try {
    await test('remote image URLs: fetched under the allowlist, the same answer as the data URL', async () => {
      const inline = await openai.chat.completions.create(ask(CAT));
      for (const path of ['/cat.png', '/moved']) {
        const body = ask(CAT);
        body.messages[1].content[1] = { type: 'image_url', image_url: { url: url(path) } };
        const remote = await openai.chat.completions.create(body);
        assert.equal(remote.usage.prompt_tokens, inline.usage.prompt_tokens);
        assert.deepEqual(remote.choices[0].logprobs, inline.choices[0].logprobs);
      }
      const messages = [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: url('/cat.png') } },
        { type: 'text', text: 'What is this?' }] }];
      const byData = [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: CAT.toString('base64') } },
        { type: 'text', text: 'What is this?' }] }];
      const counted = await anthropic.messages.countTokens({ model: MODEL, messages, thinking: { type: 'disabled' } });
      const inlineCount = await anthropic.messages.countTokens({ model: MODEL, messages: byData, thinking: { type: 'disabled' } });
      assert.equal(counted.input_tokens, inlineCount.input_tokens);
      const metrics = await (await fetch(`${base}/metrics`)).text();
      assert.match(metrics, /^flashserve_image_fetches_total\{outcome="ok"\} 3$/m);
    });
    await test('remote image URLs: a missing picture and a host off the allowlist are 400s naming the part', async () => {
      const cases = [[url('/missing.png'), 'answered HTTP 404'],
        [`http://localhost:${site.address().port}/cat.png`, "'localhost' is not among the hosts"]];
      for (const [where, why] of cases) {
        const body = ask(CAT);
        body.messages[1].content[1] = { type: 'image_url', image_url: { url: where } };
        await assert.rejects(openai.chat.completions.create(body), (e) => {
          assert.equal(e.status, 400);
          assert.equal(e.param, 'messages[1].content[1]');
          assert.ok(e.message.includes(why), e.message);
          return true;
        });
      }
      const messages = [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: url('/missing.png') } }] }];
      await assert.rejects(anthropic.messages.create({ model: MODEL, max_tokens: 2, messages }),
        (e) => e.status === 400 && e.error?.error?.message?.includes('messages[0].content[0]'));
    });
  } finally {
    site.close();
  }
}

async function limits(openai) {
  await test('limits: a decompression bomb and too many pictures are 400s before any decoding', async () => {
    const bomb = png(4, 4, 3);
    bomb.writeUInt32BE(100000, 16);  // IHDR width and height: 10^10 pixels claimed
    bomb.writeUInt32BE(100000, 20);
    const body = ask(CAT);
    body.messages[1].content[1] = { type: 'image_url', image_url: { url: dataUrl(bomb) } };
    await assert.rejects(openai.chat.completions.create(body), (e) => e.status === 400 && e.code === 'image_too_large'
      && e.param === 'messages[1].content[1]' && e.message.includes('100000x100000'));
    const many = ask(CAT);
    many.messages[1].content = Array.from({ length: 17 }, () => ({ type: 'image_url', image_url: { url: dataUrl(CAT) } }));
    await assert.rejects(openai.chat.completions.create(many), (e) => e.status === 400 && e.code === 'too_many_images'
      && e.param === 'messages[1].content[16]');
  });
}

async function rawPlaceholder(openai) {
  await test('a raw prompt with the image placeholder but no picture: 400, and the server keeps serving', async () => {
    await assert.rejects(openai.completions.create({ model: MODEL, prompt: [0, 129264, 5], max_tokens: 2 }),
      (e) => e.status === 400 && e.message.includes('image placeholder'));
    const ok = await openai.completions.create({ model: MODEL, prompt: [0, 7, 5], max_tokens: 2 });
    assert.equal(ok.usage.prompt_tokens, 3);
  });
}

async function responsesImage(openai) {
  await test('Responses: an input_image part counts its span; a bad one is named by its input path', async () => {
    const input = [{ role: 'user', content: [{ type: 'input_text', text: 'Describe:' }, { type: 'input_image', image_url: dataUrl(CAT), detail: 'auto' }] }];
    const r = await openai.responses.create({ model: MODEL, input, max_output_tokens: 4, reasoning: { effort: 'low' } });
    assert.equal(r.status === 'completed' || r.status === 'incomplete', true);
    assert.ok(r.usage.input_tokens > spanTokens(CAT), `${r.usage.input_tokens}`);
    input[0].content[1].image_url = 'data:image/png;base64,AAAA';
    await assert.rejects(openai.responses.create({ model: MODEL, input, max_output_tokens: 4 }),
      (e) => e.status === 400 && e.param === 'input[0].content[1]');
  });
}

async function anthropicImages(anthropic) {
  await test('Anthropic SDK: a base64 image block; countTokens counts the span', async () => {
    const messages = [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: CAT.toString('base64') } },
      { type: 'text', text: 'What is this?' }] }];
    const r = await anthropic.messages.create({ model: MODEL, max_tokens: 4, temperature: 0, messages, thinking: { type: 'disabled' } });
    assert.equal(r.type, 'message');
    const { input_tokens } = await anthropic.messages.countTokens({ model: MODEL, messages, thinking: { type: 'disabled' } });
    assert.equal(r.usage.input_tokens + r.usage.cache_read_input_tokens, input_tokens);
    assert.ok(input_tokens > spanTokens(CAT));
    const bad = [{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }];
    await assert.rejects(anthropic.messages.create({ model: MODEL, max_tokens: 4, messages: bad }),
      (e) => e.status === 400 && e.error?.error?.message?.includes('messages[0].content[1]'));
  });
  await test('Anthropic SDK: a screenshot inside tool_result (Claude Code\'s Read tool) is a picture of the prompt', async () => {
    const shot = (picture) => [
      { role: 'user', content: 'Open the screenshot.' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Read', input: { file_path: '/tmp/shot.png' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'shot.png:' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: picture.toString('base64') } }] }] },
    ];
    const tools = [{ name: 'Read', description: 'Read a file', input_schema: { type: 'object', properties: { file_path: { type: 'string' } } } }];
    const ask = (picture) => ({ model: MODEL, max_tokens: 4, temperature: 0, tools, messages: shot(picture), thinking: { type: 'disabled' } });
    const r = await anthropic.messages.create(ask(CAT));
    const { input_tokens } = await anthropic.messages.countTokens({ model: MODEL, tools, messages: shot(CAT), thinking: { type: 'disabled' } });
    assert.equal(r.usage.input_tokens + r.usage.cache_read_input_tokens, input_tokens);
    const textOnly = shot(CAT);
    textOnly[2].content[0].content.pop();
    const { input_tokens: without } = await anthropic.messages.countTokens({ model: MODEL, tools, messages: textOnly, thinking: { type: 'disabled' } });
    assert.ok(input_tokens >= without + spanTokens(CAT), `${input_tokens} vs ${without} + span`);
    const again = await anthropic.messages.create(ask(CAT));
    assert.ok(again.usage.cache_read_input_tokens >= 128, 'the same screenshot: a prefix-cache hit through it');
    const broken = shot(CAT);
    broken[2].content[0].content[1].source.data = 'AAAA';
    await assert.rejects(anthropic.messages.create({ ...ask(CAT), messages: broken }),
      (e) => e.status === 400 && e.error?.error?.message?.includes('messages[2].content[0].content[1]'));
  });
}

// flashserve bench's image workload: a new screenshot each turn, the history repeating the
// earlier ones; the report counts the server's tower runs and encoder-cache hits.
async function benchImages(base) {
  await test('bench --turn-image: a screenshot per turn; tower time and encoder hits reported', async () => {
    const out = execFileSync(args.flashserve, ['bench', '--base-url', base, '--model', MODEL, '--dataset', 'multi-turn',
      '--num-conversations', '1', '--turns', '3', '--turn-len', '16', '--output-len', '2', '--turn-image', '320x200',
      '--seed', '9'], { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
    assert.match(out, /Completed requests:\s+3\b/);
    assert.match(out, /Pictures encoded \/ encoder-cache hits:\s+3 \/ 3\b/, out);
    assert.match(out, /Tower time per encoded picture \(ms\):\s+[0-9.]+/);
    const completions = spawnSync(args.flashserve, ['bench', '--base-url', base, '--model', MODEL, '--dataset', 'multi-turn',
      '--endpoint', 'completions', '--num-conversations', '1', '--turns', '1', '--turn-image', '64x40'], { encoding: 'utf8' });
    assert.notEqual(completions.status, 0);
    assert.match(completions.stderr + completions.stdout, /pictures need the chat endpoint/);
  });
}

// The demo (serve with no --model) carries a small tower with the released preprocessing.
async function demoTakesPictures() {
  const demo = await start(args.flashserve, ['serve', '--host', '127.0.0.1', '--port', '0', '--threads', '2',
    '--tokenizer', args.tokenizer], { ...process.env, XDG_CACHE_HOME: join(work, 'cache') });
  try {
    await test('the demo model answers a picture; its span is counted as on tiny-v41', async () => {
      const openai = new OpenAI({ baseURL: `${demo.base}/v1`, apiKey: 'sk-local', maxRetries: 0 });
      const r = await openai.chat.completions.create({ ...ask(CAT), model: 'deepseek-v4-demo' });
      assert.equal(r.choices[0].finish_reason, 'length');
      assert.ok(r.usage.prompt_tokens > spanTokens(CAT), `prompt ${r.usage.prompt_tokens}`);
    });
  } finally {
    await stop(demo);
  }
}

// DeepSeek-V4-Flash-Vision-Exp's layout on a V4 checkpoint with a tower (make-model
// tiny-vision-exp): pictures in every dialect, counted as its paired-row span (plus the lead pads
// that put START on a compressor group), answered the same twice (the repeat resumes from the
// block before the span: a bidirectional span is never cut), another picture answered otherwise.
async function visionExpModel() {
  const model = join(work, 'vision-exp');
  execFileSync(args.flashserve, ['make-model', '--preset', 'tiny-vision-exp', '--out', model, '--tokenizer', args.tokenizer, '--threads', '2']);
  const server = await start(args.flashserve, ['serve', '--model', model, '--host', '127.0.0.1', '--port', '0',
    '--threads', '2', '--served-model-name', MODEL, '--served-model-name', 'claude-*']);
  const file = join(work, 'cat.png');
  writeFileSync(file, CAT);
  const span = JSON.parse(execFileSync(args.flashserve, ['image-info', file, '--layout', 'vision-exp']).toString()).tokens;
  try {
    const openai = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'sk-local', maxRetries: 0 });
    await test('Vision-Exp: image_url counted as its span; the same picture twice, the same answer', async () => {
      const tokenize = async (messages) => (await (await fetch(`${server.base}/tokenize`, { method: 'POST',
        body: JSON.stringify({ model: MODEL, messages, thinking: { type: 'disabled' } }) })).json());
      const first = await openai.chat.completions.create(ask(CAT));
      const textOnly = (await tokenize([ask(CAT).messages[0], { role: 'user', content: [{ type: 'text', text: 'Describe:' }] }])).count;
      assert.equal(first.usage.prompt_tokens, (await tokenize(ask(CAT).messages)).count);
      // text + "\n\n" + lead pads (0-3) + the span
      assert.ok(first.usage.prompt_tokens >= textOnly + span && first.usage.prompt_tokens <= textOnly + span + 5,
        `${first.usage.prompt_tokens} vs ${textOnly} + ${span}`);
      const again = await openai.chat.completions.create(ask(CAT));
      assert.deepEqual(again.choices[0].logprobs, first.choices[0].logprobs);
      const ids = (await tokenize(ask(CAT).messages)).tokens;
      const spanStart = ids.indexOf(129264);
      const cached = again.usage.prompt_tokens_details.cached_tokens;
      assert.ok(cached > 0 && cached % 128 === 0 && cached <= spanStart + 3, `cached ${cached}, span from ${spanStart}`);
      const other = await openai.chat.completions.create(ask(DOG));
      assert.notDeepEqual(other.choices[0].logprobs, first.choices[0].logprobs);
    });
    await test('Vision-Exp: a screenshot in an Anthropic tool_result is a picture of the prompt', async () => {
      const anthropic = new Anthropic({ baseURL: server.base, apiKey: 'sk-local', maxRetries: 0 });
      const messages = [{ role: 'user', content: 'Open the screenshot.' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Read', input: { file_path: '/tmp/shot.png' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: CAT.toString('base64') } }] }] }];
      const tools = [{ name: 'Read', description: 'Read a file', input_schema: { type: 'object', properties: { file_path: { type: 'string' } } } }];
      const body = { model: MODEL, max_tokens: 3, temperature: 0, tools, messages, thinking: { type: 'disabled' } };
      const r = await anthropic.messages.create(body);
      const { input_tokens } = await anthropic.messages.countTokens({ model: MODEL, tools, messages, thinking: { type: 'disabled' } });
      assert.equal(r.usage.input_tokens + r.usage.cache_read_input_tokens, input_tokens);
      assert.ok(input_tokens > span, `${input_tokens} vs span ${span}`);
    });
  } finally {
    await stop(server);
  }
}

async function textOnlyModel() {
  const model = join(work, 'tiny');
  execFileSync(args.flashserve, ['make-model', '--preset', 'tiny', '--out', model, '--tokenizer', args.tokenizer, '--threads', '2']);
  const server = await start(args.flashserve, ['serve', '--model', model, '--host', '127.0.0.1', '--port', '0',
    '--threads', '2', '--served-model-name', MODEL]);
  try {
    await test('a text-only model refuses images with a 400 naming the part', async () => {
      const openai = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'sk-local', maxRetries: 0 });
      await assert.rejects(openai.chat.completions.create(ask(CAT)), (e) => e.status === 400 && e.param === 'messages[1].content[1]'
        && e.message.includes('vision tower'));
    });
  } finally {
    await stop(server);
  }
}

await runE2e(work, async (ctx) => {
  const model = join(work, MODEL);
  execFileSync(args.flashserve, ['make-model', '--preset', 'tiny-v41', '--out', model, '--tokenizer', args.tokenizer, '--threads', '2']);
  ctx.server = await start(args.flashserve, ['serve', '--model', model, '--host', '127.0.0.1', '--port', '0', '--threads', '2',
    '--served-model-name', MODEL, '--served-model-name', 'claude-*', '--image-fetch-hosts', '127.0.0.1',
    '--image-fetch-allow-private', '--image-fetch-timeout', '5']);
  const openai = new OpenAI({ baseURL: `${ctx.server.base}/v1`, apiKey: 'sk-local', maxRetries: 0 });
  await openaiImages(openai, ctx.server.base);
  await rawPlaceholder(openai);
  await limits(openai);
  await responsesImage(openai);
  const anthropic = new Anthropic({ baseURL: ctx.server.base, apiKey: 'sk-local', maxRetries: 0 });
  await anthropicImages(anthropic);
  await remoteImages(openai, anthropic, ctx.server.base);
  await benchImages(ctx.server.base);
  await stop(ctx.server);
  ctx.server = null;
  await demoTakesPictures();
  await visionExpModel();
  await textOnlyModel();
});
