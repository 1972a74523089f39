// OpenAI request bodies and streamed-chunk parsing (see openai_wire.h).
#include "loadgen/openai_wire.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace flashserve::loadgen {

namespace {
using Json = nlohmann::json;

int64_t IntField(const Json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

bool NonEmptyString(const Json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

Usage ParseUsage(const Json& u) {
  Usage usage;
  usage.prompt_tokens = IntField(u, "prompt_tokens");
  usage.completion_tokens = IntField(u, "completion_tokens");
  usage.cached_tokens = IntField(u, "prompt_cache_hit_tokens");
  if (auto d = u.find("prompt_tokens_details"); d != u.end() && d->is_object())
    usage.cached_tokens = std::max(usage.cached_tokens, IntField(*d, "cached_tokens"));
  return usage;
}

// Reads choices[0] of a chat chunk (delta) or a completions chunk (text).
void ParseChoice(const Json& choice, StreamChunk* chunk) {
  if (auto t = choice.find("text"); t != choice.end() && t->is_string()) {
    chunk->text = t->get<std::string>();
    chunk->has_token = !chunk->text.empty();
  }
  auto delta = choice.find("delta");
  if (delta == choice.end() || !delta->is_object()) return;
  if (NonEmptyString(*delta, "content")) chunk->text = (*delta)["content"].get<std::string>();
  bool reasoning = NonEmptyString(*delta, "reasoning_content") || NonEmptyString(*delta, "reasoning");
  auto tools = delta->find("tool_calls");
  bool tool_call = tools != delta->end() && tools->is_array() && !tools->empty();
  chunk->has_token = !chunk->text.empty() || reasoning || tool_call;
}

Json BaseBody(const SamplingParams& params) {
  Json body = {{"model", params.model},
               {"max_tokens", params.max_tokens},
               {"temperature", params.temperature},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (params.seed) body["seed"] = *params.seed;
  if (params.ignore_eos) body["ignore_eos"] = true;
  return body;
}
}  // namespace

std::string_view ApiPath(ApiKind api) {
  return api == ApiKind::kChat ? "/v1/chat/completions" : "/v1/completions";
}

std::string BuildTokenPromptBody(const SamplingParams& params, std::span<const int32_t> prompt_ids) {
  Json body = BaseBody(params);
  body["prompt"] = std::vector<int32_t>(prompt_ids.begin(), prompt_ids.end());
  return body.dump();
}

std::string BuildRequestBody(ApiKind api, const SamplingParams& params, const std::vector<Message>& messages) {
  Json body = BaseBody(params);
  if (api == ApiKind::kChat) {
    Json list = Json::array();
    for (const Message& m : messages) {
      if (m.images.empty()) {
        list.push_back({{"role", m.role}, {"content", m.content}});
        continue;
      }
      Json parts = Json::array({{{"type", "text"}, {"text", m.content}}});
      for (const std::string& url : m.images) parts.push_back({{"type", "image_url"}, {"image_url", {{"url", url}}}});
      list.push_back({{"role", m.role}, {"content", std::move(parts)}});
    }
    body["messages"] = std::move(list);
  } else {
    std::string prompt;
    for (size_t i = 0; i < messages.size(); ++i) {
      if (i > 0) prompt += '\n';
      prompt += messages[i].content;
    }
    body["prompt"] = std::move(prompt);
  }
  // Invalid UTF-8 (never produced by the datasets, possible in echoed replies) is replaced.
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

base::Result<StreamChunk> ParseStreamChunk(std::string_view data) {
  StreamChunk chunk;
  if (data == "[DONE]") {
    chunk.done = true;
    return chunk;
  }
  Json j = Json::parse(data.begin(), data.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return base::MakeError(base::ErrorCode::kInvalidArgument,
                           "stream chunk is not a JSON object: " + std::string(data.substr(0, 120)));
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    std::string message = e->is_object() && e->contains("message") && (*e)["message"].is_string()
                              ? (*e)["message"].get<std::string>()
                              : e->dump();
    chunk.error = message.empty() ? "error in stream" : message;
  }
  if (auto c = j.find("choices"); c != j.end() && c->is_array() && !c->empty() && (*c)[0].is_object())
    ParseChoice((*c)[0], &chunk);
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) chunk.usage = ParseUsage(*u);
  return chunk;
}

std::string ErrorBodyMessage(std::string_view body) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    auto e = j.find("error");
    if (e != j.end() && e->is_object() && e->contains("message") && (*e)["message"].is_string())
      return (*e)["message"].get<std::string>();
    if (e != j.end() && e->is_string()) return e->get<std::string>();
  }
  size_t begin = body.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return "";
  size_t end = body.find_last_not_of(" \t\r\n");
  return std::string(body.substr(begin, std::min<size_t>(end + 1 - begin, 200)));
}

void StreamAccumulator::OnBytes(std::string_view bytes, double now_s) {
  events_.clear();
  sse_.Feed(bytes, &events_);
  for (const std::string& data : events_) {
    if (data.empty()) continue;
    auto chunk = ParseStreamChunk(data);
    if (!chunk.ok()) {
      if (!error_) error_ = chunk.error().message();
      continue;
    }
    if (chunk->done) done_ = true;
    if (chunk->error && !error_) error_ = *chunk->error;
    if (chunk->usage) usage_ = chunk->usage;
    if (!chunk->has_token) continue;
    if (first_token_s_) {
      itl_s_.push_back(now_s - last_token_s_);
    } else {
      first_token_s_ = now_s;
    }
    last_token_s_ = now_s;
    ++num_token_chunks_;
    text_ += chunk->text;
  }
}

}  // namespace flashserve::loadgen
