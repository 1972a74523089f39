// Response JSON shapes (api/response_json.h).
#include "api/response_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "tokenizer/utf8.h"

namespace flashserve::api {

namespace {

Json TokenFields(const tokenizer::Tokenizer& tokenizer, int32_t token, float logprob) {
  const std::string_view bytes = tokenizer.TokenBytes(token);
  Json byte_list = Json::array();
  for (unsigned char b : bytes) byte_list.push_back(static_cast<int>(b));
  Json entry;
  entry["token"] = tokenizer::LossyUtf8(bytes);
  entry["logprob"] = logprob;
  entry["bytes"] = std::move(byte_list);
  return entry;
}

Json Header(const ResponseMeta& meta, const char* object) {
  Json j;
  j["id"] = meta.id;
  j["object"] = object;
  j["created"] = meta.created;
  j["model"] = meta.model;
  j["system_fingerprint"] = meta.system_fingerprint;
  return j;
}

}  // namespace

Json UsageJson(const protocol::Usage& usage, const int64_t* reasoning_tokens) {
  Json j;
  j["prompt_tokens"] = usage.prompt_tokens;
  j["completion_tokens"] = usage.completion_tokens;
  j["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  if (reasoning_tokens) j["completion_tokens_details"] = {{"reasoning_tokens", *reasoning_tokens}};
  j["prompt_tokens_details"] = {{"cached_tokens", usage.cached_tokens},
                                {"cached_tokens_by_tier",
                                 {{"memory", usage.cached_memory}, {"disk", usage.cached_disk}, {"shared", usage.cached_shared}}}};
  if (usage.cached_prefill > 0) j["prompt_tokens_details"]["cached_tokens_by_tier"]["prefill_worker"] = usage.cached_prefill;
  j["prompt_cache_hit_tokens"] = usage.cached_tokens;
  j["prompt_cache_miss_tokens"] = usage.cache_miss_tokens();
  if (usage.speculative_drafted > 0)
    j["speculative"] = {{"drafted", usage.speculative_drafted}, {"accepted", usage.speculative_accepted}};
  return j;
}

Json ChatLogprobEntry(const tokenizer::Tokenizer& tokenizer, const protocol::TokenOutput& token) {
  Json entry = TokenFields(tokenizer, token.token, token.logprob);
  Json top = Json::array();
  for (const protocol::TokenLogprob& alt : token.top_logprobs) top.push_back(TokenFields(tokenizer, alt.token, alt.logprob));
  entry["top_logprobs"] = std::move(top);
  return entry;
}

Json ChatChunk(const ResponseMeta& meta, Json choices, bool usage_null) {
  Json j = Header(meta, "chat.completion.chunk");
  j["choices"] = std::move(choices);
  if (usage_null) j["usage"] = nullptr;
  return j;
}

Json ChatCompletion(const ResponseMeta& meta, Json choices, const protocol::Usage& usage) {
  Json j = Header(meta, "chat.completion");
  j["choices"] = std::move(choices);
  j["usage"] = UsageJson(usage);
  return j;
}

Json TextCompletion(const ResponseMeta& meta, Json choices, const protocol::Usage* usage, bool usage_null) {
  Json j = Header(meta, "text_completion");
  j["choices"] = std::move(choices);
  if (usage) {
    j["usage"] = UsageJson(*usage);
  } else if (usage_null) {
    j["usage"] = nullptr;
  }
  return j;
}

std::string Dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

IdSource::IdSource() {
  std::random_device rd;
  base_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::string IdSource::Next(const char* prefix) {
  const uint64_t n = counter_.fetch_add(1, std::memory_order_relaxed);
  // The counter is mixed so consecutive ids do not look sequential; base_ keeps processes apart.
  const uint64_t mixed = (n + 1) * 0x9E3779B97F4A7C15ull;
  return fmt::format("{}{:016x}{:08x}", prefix, base_ ^ mixed, static_cast<uint32_t>(n));
}

}  // namespace flashserve::api
