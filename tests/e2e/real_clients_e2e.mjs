// The coding agents people run, as they ship (Claude Code and Codex CLI, pinned in
// tests/clients/package.json), against `flashserve serve` on the embedded demo model: each runs a
// prompt and then resumes the session for a second turn. A loopback proxy between client and
// server records every exchange, so the test checks what the clients actually sent: each turn
// exits 0 and prints the answer the server streamed, the second turn hands back the sealed
// reasoning the first received (Claude Code: the thinking block's signature; Codex: the
// reasoning item's encrypted_content), and no exchange got a 4xx or 5xx. Codex also attaches a
// picture (`codex exec --image`), which reaches the demo's vision tower as an input_image.
//
// node tests/e2e/real_clients_e2e.mjs --flashserve build/flashserve --tokenizer <tokenizer.json>
// Exit 0 = pass, 1 = fail, 77 = skipped (clients not installed: run ./scripts/setup.sh).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { events, parseArgs, procs, runBehindRecorder } from './cluster_util.mjs';
import { png } from './png_util.mjs';

const args = parseArgs();
const bin = join(dirname(fileURLToPath(import.meta.url)), '..', 'clients', 'node_modules', '.bin');
const claude = join(bin, 'claude');
const codex = join(bin, 'codex');
if (!existsSync(claude) || !existsSync(codex)) {
  console.log(`SKIP: Claude Code / Codex CLI not installed in ${bin} (run ./scripts/setup.sh; npm must be reachable)`);
  process.exit(77);
}

const MODEL = 'deepseek-v4-demo';
const work = mkdtempSync(join(tmpdir(), 'flashserve-clients-'));

function run(cmd, cmdArgs, env, cwd) {
  return new Promise((resolve) => {
    const p = spawn(cmd, cmdArgs, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    procs.add(p);
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), 240000);
    p.on('exit', (code) => { clearTimeout(timer); procs.delete(p); resolve({ code, stdout, stderr }); });
  });
}

function lastExchange(path) {
  const found = proxy.exchanges.filter((e) => e.path.startsWith(path));
  assert.ok(found.length > 0, `no request to ${path}`);
  return found[found.length - 1];
}

// Messages stream -> { text, signatures }.
function messagesAnswer(ex) {
  let text = '';
  const signatures = [];
  for (const e of events(ex.response)) {
    if (e.name !== 'content_block_delta') continue;
    if (e.data.delta.type === 'text_delta') text += e.data.delta.text;
    if (e.data.delta.type === 'signature_delta') signatures.push(e.data.delta.signature);
  }
  return { text, signatures };
}

// Responses stream -> { text, sealed } from its output_item.done events.
function responsesAnswer(ex) {
  let text = '';
  const sealed = [];
  for (const e of events(ex.response)) {
    if (e.name !== 'response.output_item.done') continue;
    if (e.data.item.type === 'message') text += e.data.item.content.map((p) => p.text).join('');
    if (e.data.item.type === 'reasoning' && e.data.item.encrypted_content) sealed.push(e.data.item.encrypted_content);
  }
  return { text, sealed };
}

async function claudeCode(base) {
  const home = join(work, 'claude-home');
  mkdirSync(home);
  const env = { PATH: process.env.PATH, HOME: home, ANTHROPIC_BASE_URL: base, ANTHROPIC_API_KEY: 'sk-local',
    DISABLE_TELEMETRY: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_MAX_OUTPUT_TOKENS: '256' };
  const first = await run(claude, ['-p', 'say hi', '--model', MODEL, '--output-format', 'json'], env, work);
  assert.equal(first.code, 0, `claude turn 1 exited ${first.code}\n${first.stdout}\n${first.stderr}`);
  const result = JSON.parse(first.stdout);
  assert.equal(result.is_error, false, first.stdout);
  const one = lastExchange('/v1/messages');
  assert.equal(one.request.stream, true);
  assert.ok(one.request.tools.length > 5, 'Claude Code sent its tools');
  const answer1 = messagesAnswer(one);
  assert.equal(result.result.trim(), answer1.text.trim());
  assert.ok(answer1.signatures.length === 1 && answer1.signatures[0].startsWith('fsr1.'), 'a sealed thinking block');

  const second = await run(claude, ['-p', '--resume', result.session_id, 'again', '--model', MODEL], env, work);
  assert.equal(second.code, 0, `claude turn 2 exited ${second.code}\n${second.stdout}\n${second.stderr}`);
  const two = lastExchange('/v1/messages');
  assert.notEqual(two, one);
  const handedBack = two.request.messages.filter((m) => m.role === 'assistant').flatMap((m) => m.content)
    .filter((b) => b.type === 'thinking').map((b) => b.signature);
  assert.ok(handedBack.includes(answer1.signatures[0]), 'turn 2 hands back the sealed reasoning of turn 1');
  assert.equal(second.stdout.trim(), messagesAnswer(two).text.trim());
  console.log(`ok - Claude Code: two turns (${one.request.messages.length} -> ${two.request.messages.length} messages), answers printed, reasoning handed back`);
}

async function codexCli(base) {
  const home = join(work, 'codex-home');
  mkdirSync(join(home, 'home'), { recursive: true });
  writeFileSync(join(home, 'config.toml'), `model = "${MODEL}"\nmodel_provider = "flashserve"\n\n` +
    `[model_providers.flashserve]\nname = "flashserve"\nbase_url = "${base}/v1"\nwire_api = "responses"\n` +
    'env_key = "FLASHSERVE_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n');
  const env = { PATH: process.env.PATH, HOME: join(home, 'home'), CODEX_HOME: home, FLASHSERVE_KEY: 'sk-local' };
  const exec = ['exec', '--skip-git-repo-check', '-s', 'read-only'];
  const first = await run(codex, [...exec, '--json', 'say hi'], env, work);
  assert.equal(first.code, 0, `codex turn 1 exited ${first.code}\n${first.stdout}\n${first.stderr}`);
  const lines = first.stdout.trim().split('\n').map((l) => JSON.parse(l));
  const thread = lines.find((l) => l.type === 'thread.started').thread_id;
  const printed = lines.filter((l) => l.type === 'item.completed' && l.item.type === 'agent_message').map((l) => l.item.text).join('');
  const one = lastExchange('/v1/responses');
  assert.ok(one.request.include.includes('reasoning.encrypted_content'));
  const answer1 = responsesAnswer(one);
  assert.equal(printed.trim(), answer1.text.trim());
  assert.ok(answer1.sealed.length === 1 && answer1.sealed[0].startsWith('fsr1.'), 'a sealed reasoning item');

  const second = await run(codex, [...exec, 'resume', thread, 'again'], env, work);
  assert.equal(second.code, 0, `codex turn 2 exited ${second.code}\n${second.stdout}\n${second.stderr}`);
  const two = lastExchange('/v1/responses');
  assert.notEqual(two, one);
  const handedBack = two.request.input.filter((i) => i.type === 'reasoning').map((i) => i.encrypted_content);
  assert.ok(handedBack.includes(answer1.sealed[0]), 'turn 2 hands back the sealed reasoning of turn 1');
  assert.equal(second.stdout.trim(), responsesAnswer(two).text.trim());
  console.log(`ok - Codex CLI: two turns (${one.request.input.length} -> ${two.request.input.length} input items), answers printed, reasoning handed back`);

  // codex exec -i: the picture travels as an input_image data URL and is counted as its span.
  const shot = join(work, 'shot.png');
  writeFileSync(shot, png(320, 200, 5));
  const withImage = await run(codex, [...exec, '--json', 'what is in this picture?', '--image', shot], env, work);
  assert.equal(withImage.code, 0, `codex -i exited ${withImage.code}\n${withImage.stdout}\n${withImage.stderr}`);
  const three = lastExchange('/v1/responses');
  const images = three.request.input.flatMap((i) => (Array.isArray(i.content) ? i.content : []))
    .filter((c) => c.type === 'input_image');
  assert.equal(images.length, 1, 'Codex sent the picture as an input_image part');
  assert.match(images[0].image_url, /^data:image\//);
  const completed = events(three.response).find((e) => e.name === 'response.completed');
  const span = JSON.parse(execFileSync(args.flashserve, ['image-info', shot]).toString()).tokens;
  assert.ok(completed.data.response.usage.input_tokens > span, `input tokens ${completed.data.response.usage.input_tokens} > span ${span}`);
  const printed3 = withImage.stdout.trim().split('\n').map((l) => JSON.parse(l))
    .filter((l) => l.type === 'item.completed' && l.item.type === 'agent_message').map((l) => l.item.text).join('');
  assert.equal(printed3.trim(), responsesAnswer(three).text.trim());
  console.log(`ok - Codex CLI: codex exec -i attaches a picture (${completed.data.response.usage.input_tokens} input tokens, span ${span})`);
}

// The demo's random weights would think and talk until max_tokens, which both clients treat as
// an error: the reasoning is capped (</think> forced) and EOS made likely.
let proxy;
await runBehindRecorder(args.flashserve, ['--tokenizer', args.tokenizer, '--default-max-tokens', '256',
  '--max-reasoning-tokens', '8', '--logit-bias', 'eos:+12'], work, async (base, recorder) => {
  proxy = recorder;
  await claudeCode(base);
  await codexCli(base);
});
