#!/usr/bin/env python3
"""Decode throughput with a structured-output constraint against the same requests without one.

Starts `flashserve serve` (the demo model unless --model) on 127.0.0.1, then interleaves rounds
of n choices decoding max_tokens each (ignore_eos), unconstrained and under a JSON constraint,
and prints the medians: constrained tokens/s as a fraction of unconstrained (goal >= 95%).
    python3 bench/structured_decode.py --flashserve build/flashserve [--model DIR] [--rounds 5]
"""
import argparse, json, os, re, statistics, subprocess, tempfile, time, urllib.request

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
                                           "score": {"type": "number"}}, "required": ["name", "tags", "score"]}


def post(base, body):
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    t0 = time.time()
    out = json.load(urllib.request.urlopen(req))
    return out["usage"]["completion_tokens"] / (time.time() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flashserve", required=True)
    ap.add_argument("--model", default="")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--threads", default="2")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="flashserve-structured-bench-")
    cmd = [a.flashserve, "serve", "--host", "127.0.0.1", "--port", "0", "--threads", a.threads] + (["--model", a.model] if a.model else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "XDG_CACHE_HOME": os.path.join(work, "cache")})
    base = None
    for line in proc.stdout:
        m = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
        if m:
            base = m.group(1)
            break
    try:
        model = json.load(urllib.request.urlopen(base + "/v1/models"))["data"][0]["id"]
        common = {"model": model, "messages": [{"role": "user", "content": "Describe a product."}], "n": a.n,
                  "max_tokens": a.max_tokens, "ignore_eos": True, "seed": 1, "thinking": {"type": "disabled"}}
        cases = {"unconstrained": {}, "json_object": {"response_format": {"type": "json_object"}},
                 "json_schema": {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}}}
        rates = {k: [] for k in cases}
        post(base, {**common, "max_tokens": 8})  # warm up
        for _ in range(a.rounds):
            for k, extra in cases.items():
                rates[k].append(post(base, {**common, **extra}))
        floor = statistics.median(rates["unconstrained"])
        print(f"decode, n={a.n} x {a.max_tokens} tokens, {a.rounds} interleaved rounds (median, min-max tokens/s):")
        for k, v in rates.items():
            print(f"  {k:14s} {statistics.median(v):8.1f}  ({min(v):.1f}-{max(v):.1f})  {100 * statistics.median(v) / floor:5.1f}% of unconstrained")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
