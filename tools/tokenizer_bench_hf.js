#!/usr/bin/env node
// Measures Hugging Face `tokenizers` (npm package, Node bindings of the Rust library) encode
// throughput on the texts bench/tokenizer_bench dumps, for comparison with flashserve's tokenizer.
// One encode call at a time (single-threaded work); MB/s = 10^6 bytes per second.
//
//   mkdir -p /tmp/hf && (cd /tmp/hf && npm install tokenizers@0.23.2)
//   build/bench/tokenizer_bench --dump /tmp/benchtexts
//   RAYON_NUM_THREADS=1 NODE_PATH=/tmp/hf/node_modules node tools/tokenizer_bench_hf.js \
//       third_party/tokenizer/deepseek_v3/tokenizer.json /tmp/benchtexts
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

// Calls per wall-clock second and per second of process CPU time (user + system, all threads:
// the encode runs on one libuv worker thread while the main thread awaits it).
async function callsPerSecond(seconds, fn) {
  await fn();
  const start = process.hrtime.bigint();
  const cpuStart = process.cpuUsage();
  let calls = 0;
  let elapsed = 0;
  do {
    await fn();
    ++calls;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  } while (elapsed < seconds);
  const cpu = process.cpuUsage(cpuStart);
  return { wall: calls / elapsed, cpu: calls / ((cpu.user + cpu.system) / 1e6) };
}

async function main() {
  const [tokenizerPath, dir, secondsArg] = process.argv.slice(2);
  const seconds = Number(secondsArg || 1);
  const tok = Tokenizer.fromFile(tokenizerPath);
  for (const name of ['prose', 'prose_1mb', 'code', 'code_1mb', 'cjk', 'cjk_1mb']) {
    const text = fs.readFileSync(path.join(dir, name + '.txt'), 'utf8');
    const bytes = Buffer.byteLength(text, 'utf8');
    let numIds = 0;
    const rate = await callsPerSecond(seconds, async () => {
      numIds = (await tok.encode(text, null, { addSpecialTokens: false })).getIds().length;
    });
    const ids = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
    const decodeRate = await callsPerSecond(seconds, async () => tok.decode(ids, false));
    const mb = bytes / 1e6;
    console.log(`${name.padEnd(10)} ${String(bytes).padStart(8)} bytes ${String(numIds).padStart(7)} ids | ` +
      `encode ${(rate.wall * mb).toFixed(1).padStart(6)} MB/s (cpu ${(rate.cpu * mb).toFixed(1).padStart(6)}) | ` +
      `decode ${(decodeRate.wall * mb).toFixed(1).padStart(6)} (cpu ${(decodeRate.cpu * mb).toFixed(1).padStart(6)})`);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
