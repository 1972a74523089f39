// Encode / prefill / decode disaggregation end to end on a tiny-v41 checkpoint with a vision
// tower: `flashserve router` over `serve --role encode`, `--role prefill` and `--role decode`
// (E + P + D), and over an encode worker and a `--role both` worker (E + PD), against one
// colocated worker:
//  - the answers are token for token and logprob for logprob the colocated worker's (greedy);
//  - no tower runs on the prompt workers: the encode worker's outputs arrive over transfer
//    (the prefill worker forwards them to the decode worker with the prompt state);
//  - the same picture again is an encoder-cache hit on the encode worker it went to;
//  - a request sent to an encode worker directly is a 400 saying what the worker is for, as are
//    malformed encode headers; an encode worker without a tower and an unknown --image-ttl are
//    refused at start;
//  - the encode worker killed: the prompt worker waits about a second for its transfer, then
//    encodes itself, and the answer is unchanged.
//
// node tests/e2e/encode_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (tokenizer missing).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { parseArgs, runE2e, start, waitHealthy } from './cluster_util.mjs';
import { dataUrl, png } from './png_util.mjs';

const args = parseArgs();
const work = mkdtempSync(join(tmpdir(), 'flashserve-encode-'));
const MODEL = 'tiny-v41';
const CAT = png(200, 120, 1), DOG = png(180, 260, 2);

const ask = (pictures) => JSON.stringify({
  model: MODEL, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2, thinking: { type: 'disabled' },
  messages: [{ role: 'user', content: [{ type: 'text', text: 'Compare these:' },
    ...pictures.map((p) => ({ type: 'image_url', image_url: { url: dataUrl(p) } }))] }],
});

async function chat(base, pictures) {
  const t0 = performance.now();
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: ask(pictures) });
  const j = await res.json();
  assert.equal(res.status, 200, JSON.stringify(j));
  return { text: j.choices[0].message.content, logprobs: j.choices[0].logprobs, usage: j.usage, ms: performance.now() - t0 };
}

async function metric(base, name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'm'));
  return m ? Number(m[1]) : 0;
}

function same(got, want, what) {
  assert.equal(got.text, want.text, `${what}: same text`);
  assert.deepEqual(got.logprobs, want.logprobs, `${what}: same logprobs`);
  assert.equal(got.usage.prompt_tokens, want.usage.prompt_tokens, `${what}: same prompt tokens`);
}

await runE2e(work, async (ctx) => {
  const model = join(work, MODEL);
  execFileSync(args.flashserve, ['make-model', '--preset', 'tiny-v41', '--out', model, '--tokenizer', args.tokenizer, '--threads', '2']);
  const serve = (role) => start(args.flashserve, ['serve', '--model', model, '--host', '127.0.0.1', '--port', '0',
    '--threads', '1', '--served-model-name', MODEL, '--role', role]);
  const [single, encode, prefill, decode, both] = await Promise.all(['both', 'encode', 'prefill', 'decode', 'both'].map(serve));
  ctx.server = single;
  const want = { cat: await chat(single.base, [CAT]), two: await chat(single.base, [CAT, DOG]) };

  const epd = await start(args.flashserve, ['router', '--tokenizer', args.tokenizer, '--host', '127.0.0.1', '--port', '0',
    '--worker', encode.base, '--worker', prefill.base, '--worker', decode.base]);
  await waitHealthy(epd, 3);
  same(await chat(epd.base, [CAT]), want.cat, 'E + P + D, one picture');
  same(await chat(epd.base, [CAT, DOG]), want.two, 'E + P + D, two pictures');
  console.log('ok - E + P + D answers as the colocated worker');
  assert.equal(await metric(prefill.base, 'flashserve_encoder_cache_misses_total'), 0, 'no tower ran on the prefill worker');
  assert.equal(await metric(decode.base, 'flashserve_encoder_cache_misses_total'), 0, 'no tower ran on the decode worker');
  assert.ok(await metric(prefill.base, 'flashserve_encoder_imported_total') >= 2, 'the prefill worker received the pictures');
  assert.ok(await metric(decode.base, 'flashserve_encoder_imported_total') >= 2, 'the decode worker got them from prefill');
  assert.equal(await metric(encode.base, 'flashserve_encoder_cache_misses_total'), 2, 'CAT and DOG encoded once each');
  assert.ok(await metric(encode.base, 'flashserve_encoder_cache_hits_total') >= 1, 'CAT again: an encoder-cache hit');
  assert.equal(await metric(epd.base, 'flashserve_router_encoded_images_total'), 3);
  const load = await (await fetch(`${encode.base}/v1/load`)).json();
  assert.equal(load.role, 'encode');
  assert.equal(load.queued_images, 0, 'the encode worker reports its picture queue (empty now)');
  console.log('ok - the tower ran only on the encode worker, each picture once');

  const direct = await fetch(`${encode.base}/v1/chat/completions`, { method: 'POST', body: ask([CAT]) });
  assert.equal(direct.status, 400);
  assert.match((await direct.json()).error.message, /only encodes pictures for other workers/);
  const post = (base, headers) => fetch(`${base}/v1/chat/completions`, { method: 'POST', body: ask([CAT]),
    headers: { 'content-type': 'application/json', ...headers } });
  const badPicture = await post(encode.base, { 'x-flashserve-transfer': '0'.repeat(32),
    'x-flashserve-encode-to': '127.0.0.1:9', 'x-flashserve-encode-images': '1' });  // the request has one picture
  assert.equal(badPicture.status, 400);
  assert.match((await badPicture.json()).error.message, /x-flashserve-encode-images/);
  const badIds = await post(both.base, { 'x-flashserve-encode-transfers': 'not-a-transfer-id' });
  assert.equal(badIds.status, 400);
  assert.match((await badIds.json()).error.message, /x-flashserve-encode-transfers/);
  console.log('ok - an encode worker refuses to generate; malformed encode headers are 400s naming them');

  const epd2 = await start(args.flashserve, ['router', '--tokenizer', args.tokenizer, '--host', '127.0.0.1', '--port', '0',
    '--worker', encode.base, '--worker', both.base]);
  await waitHealthy(epd2, 2);
  same(await chat(epd2.base, [CAT, DOG]), want.two, 'E + PD');
  assert.equal(await metric(both.base, 'flashserve_encoder_cache_misses_total'), 0, 'no tower ran on the PD worker');
  console.log('ok - E + PD answers as the colocated worker');

  // Refused at start: an encode worker without a tower, a retention class that is not one of --kv-ttl.
  const text = join(work, 'tiny');
  execFileSync(args.flashserve, ['make-model', '--preset', 'tiny', '--out', text, '--tokenizer', args.tokenizer, '--threads', '2']);
  const refused = (extra) => spawnSync(args.flashserve, ['serve', '--host', '127.0.0.1', '--port', '0', '--threads', '1', ...extra],
    { encoding: 'utf8', timeout: 60000 });
  const textEncoder = refused(['--model', text, '--role', 'encode']);
  assert.notEqual(textEncoder.status, 0);
  assert.match(textEncoder.stderr + textEncoder.stdout, /--role encode needs a model with a vision tower/);
  const badTtl = refused(['--model', model, '--image-ttl', 'forever']);
  assert.notEqual(badTtl.status, 0);
  assert.match(badTtl.stderr + badTtl.stdout, /--image-ttl 'forever' is not one of --kv-ttl/);
  console.log('ok - an encode worker without a tower and an unknown --image-ttl are refused at start');

  encode.proc.kill('SIGKILL');  // the router still believes it healthy until its next poll
  const after = await chat(epd2.base, [DOG, CAT]);
  const wantSwapped = await chat(single.base, [DOG, CAT]);
  same(after, wantSwapped, 'encode worker dead');
  assert.ok(after.ms < 15000, `no long wait (${after.ms.toFixed(0)} ms)`);
  console.log(`ok - encode worker killed: answered in ${after.ms.toFixed(0)} ms, encoded on the prompt worker`);
});
