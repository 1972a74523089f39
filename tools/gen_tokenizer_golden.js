#!/usr/bin/env node
// Generates src/tokenizer/testdata/deepseek_v3_golden.json: token ids produced by Hugging Face
// `tokenizers` (npm package `tokenizers`, Node bindings of the Rust library) for the DeepSeek
// tokenizer.json, used by src/tokenizer/tokenizer_golden_test.cc as the independent reference.
//
// Re-run (from the repository root, after scripts/setup.sh installed the tokenizer):
//   mkdir -p /tmp/hf && (cd /tmp/hf && npm install tokenizers@0.23.2)
//   NODE_PATH=/tmp/hf/node_modules node tools/gen_tokenizer_golden.js \
//       third_party/tokenizer/deepseek_v3/tokenizer.json src/tokenizer/testdata/deepseek_v3_golden.json
//
// "ids" is HF encode(text, add_special_tokens=false) with the file as is (added tokens recognised);
// "plain_ids" (only when different) is the same text through a copy of the file without
// added_tokens, i.e. everything is plain text. "decode_cases" hold HF decode(ids, false).
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

const [tokenizerPath, outPath] = process.argv.slice(2);
if (!tokenizerPath || !outPath) {
  console.error('usage: gen_tokenizer_golden.js TOKENIZER_JSON OUT_JSON');
  process.exit(2);
}

// Deterministic PRNG (mulberry32) so the fuzz cases never change between runs.
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const cases = [];
const add = (name, text) => cases.push({ name, text });

// --- natural text ---
add('empty', '');
add('prose_en', 'The quick brown fox jumps over the lazy dog. It wasn\'t the first time; the dog didn\'t ' +
  'mind, and neither did the farmer\'s children, who had watched it happen a hundred times before.\n\n' +
  'In 1998, researchers at the university published "A Study of Foxes" (vol. 3, pp. 221-245), ' +
  'arguing that foxes\u2014unlike dogs\u2014rarely form packs. Critics weren\'t convinced!');
add('prose_en_2', 'Well... I\'ll think about it. You\'re right, we\'d better go; they\'ve already left. ' +
  'Mr. Smith (aged 42) paid $1,299.99 for a 3.5-inch widget on 2024-03-15 at 10:30am. ' +
  'E-mail: john.doe@example.com \u2014 URL: https://example.com/path?q=1&x=y#frag');
add('code_cpp', '#include <vector>\n\nint main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n' +
  '\tfor (auto& x : v) x *= 2;  // double\n  if (argc > 1 && argv[1][0] == \'-\') return -1;\n' +
  '  return v.size() == 3 ? 0 : 1;\n}\n');
add('code_python', 'def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n' +
  '    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\n' +
  'if __name__ == "__main__":\n    print([fib(i) for i in range(20)])  # 0..4181\n');
add('code_json', '{"name": "flashserve", "version": "0.1.0", "deps": ["fmt", "pcre2"], "n": 12345678, ' +
  '"nested": {"a": [1, 2.5, -3e-7, null, true]}}');
add('code_shell', 'for f in *.txt; do\r\n  wc -l "$f" | awk \'{print $1}\' >> /tmp/out.log 2>&1\r\ndone\r\n');
add('cjk_zh', '深度求索发布了新的大语言模型。它在数学、代码和推理任务上表现出色，支持128K上下文长度！' +
  '北京时间2024年12月26日，「开源」模型获得了广泛关注（包括学术界和工业界）。');
add('cjk_ja', 'ひらがなとカタカナ、そして漢字を混ぜた日本語の文章です。東京タワーは1958年に完成しました。' +
  'ｶﾀｶﾅ（半角）もテストします。ー・ヽヾゝゞ');
add('cjk_ko', '안녕하세요! 한국어 문장입니다. 서울특별시는 대한민국의 수도이며, 인구는 약 9,500,000명입니다.');
add('arabic', 'مرحبا بالعالم! هذا نص عربي للاختبار، يحتوي على أرقام ١٢٣٤٥ و 67890.');
add('hebrew_cyrillic_greek', 'שלום עולם. Привет, мир! Γειά σου Κόσμε; Ελληνικά: αβγδε.');
add('indic_thai', 'नमस्ते दुनिया। हिन्दी में परीक्षण। สวัสดีชาวโลก ภาษาไทย');
add('latin_accents', 'Café naïve façade résumé Ångström Øre Straße ﬁnancial cafe\u0301 nai\u0308ve Z\u0327\u0301alg\u0308o');
add('emoji', 'I ❤️ emoji 😀😃😄 👍🏽 👍🏿 👨‍👩‍👧‍👦 🏳️‍🌈 🇺🇸🇯🇵 1️⃣ #️⃣ 🧑🏻‍💻 ✌🏾 👩🏽‍🚀!!');
add('emoji_zwj_runs', '👨‍👩‍👧👨‍👩‍👧‍👦👩‍❤️‍💋‍👨 🫱🏼‍🫲🏿 🐻‍❄️🐈‍⬛ 🏃‍♀️‍➡️');
// Characters assigned in Unicode 15/16 (HF classifies them with Unicode 16 tables): CJK Ext H/I,
// Kawi letters and digits, Todhri, new symbols, and U+1171E (Mn in 14, Mc in 16).
add('unicode_15_16', '\u{31350}\u{31351}x\u{2EBF0} \u{11F04}\u{11F05}\u{11F50}\u{11F51}\u{11F52}\u{11F53} ' +
  '\u{105C0}\u{105C1} \u{1FAE8}\u{1FAE9}! \u{1B4E}\u{1B7F} a\u{1171E}b \u{1E4F0}\u{1E4F1}\u{1E4F2}\u{1E4F3}');
add('math_symbols', '∀x∈ℝ: x² ≥ 0; ∑ᵢ aᵢ = ½·(n+1); ∫₀^∞ e^{-x} dx = 1 ≈ 1.000 ± 0.001 → ∞ ≠ ∅');

// --- digits: every run length 1..20, alone and in context, plus non-ASCII numbers ---
for (let n = 1; n <= 20; ++n) {
  const digits = '12345678901234567890'.slice(0, n);
  add(`digits_${n}`, digits);
  add(`digits_ctx_${n}`, `x${digits}y ${digits}, (${digits}) ${digits}th -${digits}.5`);
}
add('digits_unicode', '٠١٢٣٤٥٦٧٨٩ ０１２３４５ ²³¹ ½¾ Ⅻⅻ ①②③ ៣៤ 𝟙𝟚𝟛 ۱۲۳۴');

// --- whitespace ---
for (let n = 1; n <= 10; ++n) add(`spaces_${n}`, `a${' '.repeat(n)}b${' '.repeat(n)}`);
add('tabs', '\tx\t\ty\t\t\t\n\t\tz');
add('newlines', '\n\n\nline1\nline2\n\n\nline3\n');
add('crlf', 'a\r\nb\r\n\r\nc\rd\n\re  \r\n  f \r\n');
add('whitespace_mix', ' \t \n \u00a0\u3000x\u2028y\u2029z\u0085w\u000b\u000cv \u180e u\u200bt\ufeffs');
add('mongolian_vs', '\u180e\n \u180e\u180e\n\u180ex\u180e \u180e');
add('leading_trailing', '   hello world   ');
add('space_before_punct', 'hello , world ! what ? yes .');
add('only_newline', '\n');
add('only_spaces', '     ');

// --- punctuation ---
add('punct_clusters', '!!! ??? ?!?! ... --- === ===> <=> :: ;; ,,, \'\' "" `` ~~~ ^^^ ||| &&& ***');
add('punct_brackets', '(a)[b]{c}<d> ((x)) [[y]] {{z}} «guillemets» “curly” ‘single’ „low“ 「括弧」【括弧】');
add('punct_mixed', '@#$%^&*()_+-=[]{}|;\':",./<>?`~ a.b,c;d:e!f?g /path/to/file.txt C:\\Windows\\System32');
add('punct_letters', '.NET _private __dunder__ -flag --long-flag ./run.sh ..\\up #tag @user $var %mod');

// --- long words ---
add('long_a', 'a'.repeat(1500));
add('long_ab', 'ab'.repeat(700) + ' end');
add('long_digits', '7'.repeat(1201));
add('long_spaces', ' '.repeat(3000) + 'x');
add('long_newlines', '\n'.repeat(1100) + 'y');
add('long_cjk', '的一是不了人我在有他这为之大来以个中上们'.repeat(60));
add('long_emoji', '😀'.repeat(400));
add('long_url', 'https://example.com/' + 'segment-'.repeat(150) + '?q=' + 'x'.repeat(300));
{
  const r = rng(7);
  const b64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  let s = '';
  for (let i = 0; i < 2400; ++i) s += b64[Math.floor(r() * 64)];
  add('long_base64', s);
  let w = '';
  for (let i = 0; i < 2000; ++i) w += String.fromCharCode(97 + Math.floor(r() * 26));
  add('long_random_letters', w);
}

// --- special tokens inside ordinary text ---
add('special_chat', '<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi there<｜Assistant｜>Hello!<｜end▁of▁sentence｜>');
add('special_adjacent', '<｜User｜><｜User｜><｜Assistant｜><｜Assistant｜>');
add('special_spaces', ' <｜User｜> hello <｜Assistant｜> \n<｜end▁of▁sentence｜>\n');
add('special_partial', '<｜User <｜User｜ ｜User｜> <｜Use｜> <｜user｜> <|User|> <｜User｜｜>');
add('special_misc', 'x<|EOT|>y <｜fim▁begin｜>a<｜fim▁hole｜>b<｜fim▁end｜> <｜tool▁calls▁begin｜><｜tool▁sep｜>');
add('special_placeholders', '<｜place▁holder▁no▁0｜><｜place▁holder▁no▁799｜>z<｜place▁holder▁no▁800｜>');
add('v4_control_text', '<think>reasoning</think>answer <｜latest_reminder｜> <｜DSML｜tool_calls> <｜System｜>' +
  '<｜deepseek_image｜><｜action｜><｜query｜><｜authority｜><｜domain｜><｜title｜><｜read_url｜>');
add('special_in_words', 'abc<｜User｜>def 123<｜Assistant｜>456 中文<｜end▁of▁sentence｜>文字');

// --- deterministic fuzz over a mixed alphabet ---
{
  const r = rng(20240601);
  const pool = [
    'a', 'b', 'Z', 'the', 'ing', ' ', ' ', '  ', '\t', '\n', '\r\n', '\r', '0', '7', '42', '.', ',', '!', '?',
    '\'', '"', '-', '_', '/', '\\', '(', ')', '#', '$', '<', '>', '|', '｜', '▁', '中', '文', 'の', 'カ', '한',
    'é', 'e\u0301', 'ß', 'Ω', 'ж', 'ع', '١', '２', '½', '😀', '👍🏽', '👨‍👩‍👧', '\u200d', '\ufe0f', '\u00a0',
    '\u3000', '\u2028', '\u180e', '<｜User｜>', '<｜Assistant｜>', '<｜end▁of▁sentence｜>', '<think>',
    '<|EOT|>', '𝔘', '\u0300', '\u20ac', '™', '…', '—',
  ];
  for (let i = 0; i < 400; ++i) {
    const len = 1 + Math.floor(r() * 24);
    let s = '';
    for (let j = 0; j < len; ++j) s += pool[Math.floor(r() * pool.length)];
    add(`fuzz_${i}`, s);
  }
}

async function main() {
  const fileText = fs.readFileSync(tokenizerPath, 'utf8');
  const full = Tokenizer.fromString(fileText);
  const doc = JSON.parse(fileText);
  doc.added_tokens = [];
  const plain = Tokenizer.fromString(JSON.stringify(doc));
  const out = [];
  for (const c of cases) {
    const ids = (await full.encode(c.text, null, { addSpecialTokens: false })).getIds();
    const plainIds = (await plain.encode(c.text, null, { addSpecialTokens: false })).getIds();
    const decoded = await full.decode(ids, false);
    if (decoded !== c.text) throw new Error(`HF round trip differs for ${c.name}`);
    const entry = { name: c.name, text: c.text, ids };
    if (JSON.stringify(plainIds) !== JSON.stringify(ids)) entry.plain_ids = plainIds;
    out.push(entry);
  }
  // Decoding id sequences whose bytes are not valid UTF-8 on their own (lossy rule), unknown ids,
  // and special tokens. Single-byte vocab entries are looked up by their byte-level text.
  const byteId = (b) => {
    const cp = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae ? b : null;
    if (cp !== null) return full.tokenToId(String.fromCodePoint(cp));
    let n = 0;
    for (let x = 0; x < b; ++x) if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae)) ++n;
    return full.tokenToId(String.fromCodePoint(256 + n));
  };
  const byteSeqs = [[0xe4, 0xbd], [0xe4, 0xbd, 0xa0], [0xf0, 0x9f, 0x98], [0xf0, 0x80, 0x80, 0x41],
    [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xff, 0x41, 0xfe], [0xe2, 0x82, 0x41, 0xe2, 0x82, 0xac],
    [0x80, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xc3], [0xf0, 0x9f, 0x98, 0x80, 0xf0, 0x9f]];
  const decodeCases = [];
  for (const seq of byteSeqs) {
    const ids = seq.map(byteId);
    decodeCases.push({ ids, text: await full.decode(ids, false) });
  }
  for (const ids of [[0, 1, 2], [128803, 19923, 128804], [128000, 128799, 128814], [5, 99999999, 6],
    [128815, 128816, 19923]]) {
    decodeCases.push({ ids, text: await full.decode(ids, false) });
  }
  const lookups = ['<｜User｜>', '<｜Assistant｜>', '<｜begin▁of▁sentence｜>', '<｜end▁of▁sentence｜>', '<|EOT|>',
    '<｜place▁holder▁no▁0｜>', 'Ġthe', 'hello', 'ä½łå¥½', 'Ċ', '<think>', '｜DSML｜', 'not-a-token-xyz'];
  const tokenIds = lookups.map((text) => ({ text, id: full.tokenToId(text) }));
  const tokenTexts = [0, 1, 2, 3, 220, 19923, 127999, 128000, 128803, 128814, 128815].map(
    (id) => ({ id, text: full.idToToken(id) }));
  const result = {
    generator: 'tools/gen_tokenizer_golden.js',
    reference: 'Hugging Face tokenizers (npm tokenizers ' + require('tokenizers/package.json').version + ')',
    tokenizer_sha256: crypto.createHash('sha256').update(fs.readFileSync(tokenizerPath)).digest('hex'),
    vocab_size: full.getVocabSize(true),
    token_ids: tokenIds,
    token_texts: tokenTexts,
    cases: out,
    decode_cases: decodeCases,
  };
  fs.writeFileSync(outPath, JSON.stringify(result) + '\n');
  console.log(`wrote ${out.length} cases, ${decodeCases.length} decode cases to ${outPath}`);
}

main().catch((e) => { console.error(e); process.exit(1); });
