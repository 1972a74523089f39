#!/usr/bin/env bash
# End-to-end checks of the developer subcommands of the real binary: tokenize / detokenize /
# encode-chat (exact outputs and error exits) and make-model / logits / generate on a tiny
# generated checkpoint. Usage: cli_test.sh FLASHSERVE_BINARY TOKENIZER_JSON
# Exits 77 (skipped) when the tokenizer data is not installed.
set -u
bin="$1"
tok="$2"
source "$(dirname "${BASH_SOURCE[0]}")/check_util.sh"

# Developer model tools (no tokenizer needed).
"$bin" make-model --preset tiny --vocab 1280 --out "$tmp/m" >/dev/null || { echo "FAIL make-model"; exit 1; }
"$bin" logits --model "$tmp/m" --tokens 0,5,17,99 --out "$tmp/a.f32" --top 0 2>/dev/null
"$bin" logits --model "$tmp/m" --tokens 0,5,17,99 --out "$tmp/b.f32" --top 0 --chunk 1 2>/dev/null
check "logits size" "$((4 * 1280 * 4))" "$(stat -c %s "$tmp/a.f32")"
check "logits chunked == one-shot" "$(sha256sum < "$tmp/a.f32")" "$(sha256sum < "$tmp/b.f32")"
"$bin" logits --model "$tmp/m" --tokens 0,5,17,99 --out "$tmp/h.f32" --top 0 --no-huge-page-head 2>/dev/null
check "logits with the head in the mapping == in huge pages" "$(sha256sum < "$tmp/a.f32")" "$(sha256sum < "$tmp/h.f32")"
"$bin" logits --model "$tmp/m" --tokens 0,5,17,99 --out "$tmp/n.f32" --top 0 --no-amx 2>"$tmp/n.log"
"$bin" logits --model "$tmp/m" --tokens 0,5,17,99 --out "$tmp/n1.f32" --top 0 --no-amx --chunk 1 2>/dev/null
check "logits --no-amx chunked == one-shot" "$(sha256sum < "$tmp/n.f32")" "$(sha256sum < "$tmp/n1.f32")"
check "logits --no-amx says the tiles are off" "1" "$(grep -c 'AMX tiles off' "$tmp/n.log")"
"$bin" logits --model "$tmp/m" --tokens 0,5,17,99 --mtp --out "$tmp/c.f32" --top 0 2>/dev/null
check "mtp logits rows" "$((3 * 1280 * 4))" "$(stat -c %s "$tmp/c.f32")"
g1="$("$bin" generate --model "$tmp/m" --tokens 0,5,17 -n 5 --ignore-eos 2>/dev/null)"
g2="$("$bin" generate --model "$tmp/m" --tokens 0,5,17 -n 5 --ignore-eos --threads 1 2>/dev/null)"
check "generate is deterministic" "$g1" "$g2"
check "generate count" "5" "$(echo "$g1" | tr ',' '\n' | wc -l | tr -d ' ')"
check_fails "logits bad token" "vocabulary" "$bin" logits --model "$tmp/m" --tokens 0,5000 --out "$tmp/x.f32"
check_fails "logits missing model" "config.json" "$bin" logits --model "$tmp/none" --tokens 0 --out "$tmp/x.f32"
# A DSpark checkpoint (V4-Flash-0731 layout): generate runs its trunk; serve refuses drafters it lacks.
"$bin" make-model --preset tiny-dspark --vocab 1280 --out "$tmp/d" >/dev/null || { echo "FAIL make-model tiny-dspark"; exit 1; }
check "tiny-dspark config" "5 1279 [3,4,5]" \
  "$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["dspark_block_size"], c["dspark_noise_token_id"], json.dumps(c["dspark_target_layer_ids"]).replace(" ",""))' "$tmp/d/config.json")"
check "generate on tiny-dspark count" "4" "$("$bin" generate --model "$tmp/d" --tokens 0,5,17 -n 4 --ignore-eos 2>/dev/null | tr ',' '\n' | wc -l | tr -d ' ')"
check_fails "serve --speculative dspark needs DSpark stages" "needs a checkpoint with DSpark stages" \
  "$bin" serve --model "$tmp/m" --speculative dspark --host 127.0.0.1 --port 0
check_fails "serve --speculative mtp on a DSpark checkpoint" "drafts with DSpark" \
  "$bin" serve --model "$tmp/d" --speculative mtp --host 127.0.0.1 --port 0
check_fails "serve --num-draft-tokens past the DSpark block" "exceeds the DSpark block size 5" \
  "$bin" serve --model "$tmp/d" --num-draft-tokens 6 --host 127.0.0.1 --port 0
check_fails "bench-forward bad --bf16-dot" "--bf16-dot" "$bin" bench-forward --model "$tmp/m" --bf16-dot sometimes

if [ ! -s "$tok" ]; then
  echo "tokenizer data not installed at $tok (run scripts/setup.sh); skipping the tokenizer checks"
  [ "$fail" = 0 ] && exit 77 || exit 1
fi
check "tokenize recognises control tokens" "[19923,223,128803,2058]" \
  "$("$bin" tokenize --tokenizer "$tok" --text 'Hello <｜User｜> world')"
check "tokenize --plain" "[19923,818,28217,6756,28217,32,2058]" \
  "$("$bin" tokenize --tokenizer "$tok" --text 'Hello <｜User｜> world' --plain)"
check "detokenize" "Hello lock world" "$("$bin" detokenize --tokenizer "$tok" --ids 19923,10896,2058)"
check_fails "tokenize invalid UTF-8" "invalid UTF-8" "$bin" tokenize --tokenizer "$tok" --text $'\xff\xfe'
cat > "$tmp/req.json" <<'JSON'
{"model": "x", "messages": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "hi"},
 {"role": "assistant", "content": "Hello!", "reasoning_content": "hmm"}, {"role": "user", "content": "1+1?"}],
 "thinking": {"type": "enabled"}}
JSON
check "encode-chat v4 thinking" \
  "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>hi<｜Assistant｜></think>Hello!<｜end▁of▁sentence｜><｜User｜>1+1?<｜Assistant｜><think>" \
  "$("$bin" encode-chat --tokenizer "$tok" --encoding v4 --request "$tmp/req.json")"
ids="$("$bin" encode-chat --tokenizer "$tok" --encoding v4 --request "$tmp/req.json" --json --define-missing-v4-tokens)"
check "encode-chat --json ids" '"ids":[0,3476,477,11502,16,128803,6366,128804,128001,19923,3,1,128803,19,13,19,33,128804,128000]}' \
  "\"ids\"${ids#*\"ids\"}"
# DeepSeek-V4.1 with Engram: the token classes come from the checkpoint's tokenizer.
check_fails "make-model v41: vocab below the classes" "more Engram classes" \
  "$bin" make-model --preset tiny-v41 --vocab 1280 --tokenizer "$tok" --out "$tmp/v41small"
"$bin" make-model --preset tiny-v41 --tokenizer "$tok" --out "$tmp/v41" >/dev/null || { echo "FAIL make-model tiny-v41"; exit 1; }
check "generate v41 count" "3" "$("$bin" generate --model "$tmp/v41" --tokens 0,5,17 -n 3 --ignore-eos 2>/dev/null | tr ',' '\n' | wc -l | tr -d ' ')"
check_fails "serve --speculative mtp needs an MTP block" "needs a checkpoint with an MTP block" \
  "$bin" serve --model "$tmp/v41" --tokenizer "$tok" --speculative mtp --host 127.0.0.1 --port 0
sed -i 's/"engram_compressed_vocab_size": [0-9]*/"engram_compressed_vocab_size": 99092/' "$tmp/v41/config.json"
check_fails "v41 tokenizer with other Engram classes" "compressed vocabulary has" \
  "$bin" generate --model "$tmp/v41" --tokens 0,5 -n 1
printf '{"messages": 5}' > "$tmp/bad.json"
check_fails "encode-chat rejects bad request" "messages" "$bin" encode-chat --tokenizer "$tok" --encoding v4 --request "$tmp/bad.json"
exit "$fail"
