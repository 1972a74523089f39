#!/usr/bin/env bash
# `flashserve plan` end to end: the reference case's table and JSON, --file with flags winning,
# --from-bench, and the errors that name their flag. Usage: plan_test.sh FLASHSERVE_BINARY
set -u
bin="$1"
source "$(dirname "${BASH_SOURCE[0]}")/check_util.sh"
field() {  # field JSON_FILE PYTHON_EXPRESSION_ON_d
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

reference=(--prefill-gpus 64 --prefill-gpu-hour 8.60 --decode-gpus 64 --decode-gpu-hour 10.50
  --decode-tokens-per-gpu-s 14466 --balance 0.8 --api-output-price 0.60,0.80,1.20
  --api-input-price 0.15 --api-cached-price 0.003 --input-per-output 4 --cached-fraction 0.5)
table="$("$bin" plan "${reference[@]}")"
check "cost per hour, day, month" "1" "$(grep -c 'Renting: \$1,222.40/hour  \$29,337.60/day  \$880,128.00/month' <<<"$table")"
check "cost per M output at 100/50/20%" "\$0.46 \$0.92 \$2.29" \
  "$(grep -E '^  (100|50|20)% ' <<<"$table" | awk '{print $NF}' | xargs)"
check "break-even vs 0.60 (output only, with input)" "76% 51%" \
  "$(grep -E '^  \$0.60 ' <<<"$table" | awk '{print $2, $3}')"
check "break-even vs 1.20" "38% 30%" "$(grep -E '^  \$1.20 ' <<<"$table" | awk '{print $2, $3}')"

"$bin" plan "${reference[@]}" --json > "$tmp/ref.json"
check "json capacity" "740659.2" "$(field "$tmp/ref.json" "round(d['capacity_output_tokens_per_s'], 6)")"
check "json break-even with input vs 0.80" "0.414512" \
  "$(field "$tmp/ref.json" "round(d['plans'][0]['break_even'][1]['break_even_utilization_with_input'], 6)")"

echo '{"gpus": 8, "gpu-hour": 2.5, "utilization": [0.6], "api-output-price": 1.1, "decode-tokens-per-gpu-s": 1000}' \
  > "$tmp/plan.json"
"$bin" plan --file "$tmp/plan.json" --utilization 0.5 --json > "$tmp/file.json"
check "--file read, a flag wins over it" "0.5 20.0" \
  "$(field "$tmp/file.json" "d['plans'][0]['utilizations'][0]['utilization'], d['plans'][0]['cost_per_hour']" | tr -d '(),')"

echo '{"results": {"output_token_throughput": 3000.0}}' > "$tmp/bench.json"
"$bin" plan --gpus 4 --gpu-hour 2 --from-bench "$tmp/bench.json" --bench-gpus 2 --json > "$tmp/bench_plan.json"
check "--from-bench per GPU x GPUs" "6000.0" "$(field "$tmp/bench_plan.json" "d['capacity_output_tokens_per_s']")"

check_fails "pools exclude each other" "exclude each other" "$bin" plan --gpus 8 --decode-gpus 3 --gpu-hour 1 \
  --decode-tokens-per-gpu-s 5
check_fails "balance out of range" "--balance" "$bin" plan --gpus 8 --gpu-hour 1 --decode-tokens-per-gpu-s 5 --balance 2
check_fails "no price at all" "--node-price" "$bin" plan --gpus 8 --decode-tokens-per-gpu-s 5
check_fails "unknown --file key" 'unknown key "gpu"' bash -c "echo '{\"gpu\": 3}' > '$tmp/x.json'; '$bin' plan --file '$tmp/x.json'"
check_fails "bench file without results" "output_token_throughput" "$bin" plan --gpus 1 --gpu-hour 1 \
  --from-bench "$tmp/plan.json"
check_fails "a --file value of the wrong type" '"gpus" has the wrong type' bash -c \
  "echo '{\"gpus\": \"eight\"}' > '$tmp/y.json'; '$bin' plan --file '$tmp/y.json' --gpu-hour 1 --decode-tokens-per-gpu-s 5"
check_fails "--bench-gpus below 1" "--bench-gpus must be >= 1" "$bin" plan --gpus 4 --gpu-hour 2 \
  --from-bench "$tmp/bench.json" --bench-gpus 0
check_fails "buying flags need a buying price" "is for buying" "$bin" plan --gpus 8 --gpu-hour 1 \
  --decode-tokens-per-gpu-s 5 --power-price 0.1
check "a price the cluster never reaches" "1" \
  "$("$bin" plan --gpus 1 --gpu-hour 100 --decode-tokens-per-gpu-s 1 --api-output-price 1 | grep -c 'never (')"
exit "$fail"
