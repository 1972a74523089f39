// Helpers of the usage-ledger end-to-end tests: seeded pseudo-random numbers, prompts that
// share prefixes (cache hits), one random generation request in any dialect returning the usage
// its client received, and a request's price by hand in integer micro-units.

// Deterministic pseudo-random integers in [0, n).
export function seeded(seed) {
  let s = seed;
  return (n) => { s = (s * 1103515245 + 12345) % 2147483648; return s % n; };
}

// Prompt i of a small family: the same text each time, so repeats hit the prefix cache.
export const topic = (i) => `Ledger topic ${i}: ` + Array.from({ length: 40 + 10 * i }, (_, k) => `t${i}w${k % 31}`).join(' ');

export function post(server, key, path, body, headers = {}, signal = undefined) {
  return fetch(`${server.base}${path}`, { method: 'POST', body: JSON.stringify(body), signal,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers } });
}

// The usage object of a stream's events (the last frame carrying one).
function streamUsage(text) {
  const frames = text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
  const last = frames.reverse().find((f) => f.usage || f.response?.usage || f.message?.usage);
  return last?.usage ?? last?.response?.usage ?? last?.message?.usage;
}

// One request in a random dialect (Chat streamed or not, Completions, Messages streamed or not,
// Responses); returns { input, cached, output } as the client's usage object says.
export async function randomRequest(server, key, rand, topics = 4) {
  const text = topic(rand(topics));
  const max = 1 + rand(6);
  const messages = [{ role: 'user', content: text }];
  const anthropic = { 'anthropic-version': '2023-06-01' };
  const openai = (u) => ({ input: u.prompt_tokens, cached: u.prompt_tokens_details.cached_tokens, output: u.completion_tokens });
  const claude = (u) => ({ input: u.input_tokens + u.cache_read_input_tokens, cached: u.cache_read_input_tokens,
    output: u.output_tokens });
  switch (rand(6)) {
    case 0:
      return openai((await (await post(server, key, '/v1/chat/completions', { model: 'tiny', max_tokens: max, messages,
        thinking: { type: 'disabled' } })).json()).usage);
    case 1:
      return openai(streamUsage(await (await post(server, key, '/v1/chat/completions', { model: 'tiny', max_tokens: max,
        stream: true, stream_options: { include_usage: true }, messages })).text()));
    case 2:
      return openai((await (await post(server, key, '/v1/completions', { model: 'tiny', max_tokens: max, prompt: text })).json()).usage);
    case 3:  // Anthropic Messages: input_tokens are the uncached ones
      return claude((await (await post(server, key, '/v1/messages', { model: 'tiny', max_tokens: max, messages },
        anthropic)).json()).usage);
    case 4: {  // streamed: the final message_delta carries the whole usage (message_start is sent
      // before the prompt meets the cache, so its split is not final)
      const events = (await (await post(server, key, '/v1/messages', { model: 'tiny', max_tokens: max, messages,
        stream: true }, anthropic)).text()).split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
      return claude(events.filter((e) => e.type === 'message_delta').pop().usage);
    }
    default: {
      const u = (await (await post(server, key, '/v1/responses', { model: 'tiny', max_output_tokens: 16 + max,
        input: text })).json()).usage;
      return { input: u.input_tokens, cached: u.input_tokens_details.cached_tokens, output: u.output_tokens };
    }
  }
}

// A request's cost in micro-units from per-million rates in micro-units (BigInt), rounded half up.
export function priceMicros(u, rates) {
  const total = BigInt(u.input - u.cached) * rates.input + BigInt(u.cached) * rates.cached + BigInt(u.output) * rates.output;
  return (total + 500000n) / 1000000n;
}
