// POST /v1/completions: plain text completion of a prompt string or token-id array, without
// chat encoding, or fill in the middle with `suffix` (api/routes.h).
#include "net/api_error.h"
#include "api/routes.h"

namespace flashserve::api {

namespace {

// The prompt as ids: a string (BOS + its tokens, control-token text recognised), an array of
// token ids, or a one-element array of either. Batched prompts are refused.
std::optional<net::ApiError> PromptIds(const RouteContext& ctx, const Json& body, std::vector<int32_t>* ids) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return net::InvalidRequest("you must provide a prompt parameter", "prompt");
  const Json* p = &*it;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  const serve::ModelInfo info = ctx.service->Info();
  if (p->is_string()) {
    ids->push_back(info.bos_token_id);
    for (int32_t id : ctx.tokenizer->Encode(p->get<std::string>())) ids->push_back(id);
    return std::nullopt;
  }
  if (!p->is_array()) return net::InvalidRequest(std::string("prompt: expected a string or an array of token ids, got ") + dialect::JsonTypeName(*p), "prompt");
  if (p->empty()) return net::InvalidRequest("prompt: must not be empty", "prompt");
  for (const Json& t : *p) {
    if (t.is_string() || t.is_array()) return net::InvalidRequest("prompt: batched prompts are not supported; send one prompt per request", "prompt");
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= info.vocab_size)
      return net::InvalidRequest("prompt: token ids must be integers in [0, " + std::to_string(info.vocab_size) + ")", "prompt");
    ids->push_back(t.get<int32_t>());
  }
  return std::nullopt;
}

// Fields of the legacy API this server does not implement.
std::optional<net::ApiError> UnsupportedFields(const Json& body, int n) {
  if (auto e = dialect::CheckKnownFields(body, dialect::kCompletionFields)) return e;
  if (auto it = body.find("echo"); it != body.end() && it->is_boolean() && it->get<bool>())
    return net::InvalidRequest("echo: not supported", "echo", "unsupported_parameter");
  if (auto it = body.find("suffix"); it != body.end() && !it->is_null() && !it->is_string())
    return net::InvalidRequest(std::string("suffix: expected a string, got ") + dialect::JsonTypeName(*it), "suffix");
  if (auto it = body.find("best_of"); it != body.end() && !it->is_null() && !(it->is_number_integer() && it->get<int64_t>() == n))
    return net::InvalidRequest("best_of: only best_of == n is supported", "best_of", "unsupported_parameter");
  return std::nullopt;
}

// Fill in the middle (DeepSeek's FIM completion): BOS <｜fim▁begin｜>prompt<｜fim▁hole｜>suffix
// <｜fim▁end｜>; the model writes what goes in the hole.
std::optional<net::ApiError> FimPrompt(const RouteContext& ctx, const Json& body, std::vector<int32_t>* ids) {
  auto prompt = body.find("prompt");
  if (prompt == body.end() || !prompt->is_string())
    return net::InvalidRequest("prompt: fill-in-the-middle (suffix) needs the prompt as a string", "prompt");
  const auto begin = ctx.tokenizer->TokenId("<｜fim▁begin｜>");
  const auto hole = ctx.tokenizer->TokenId("<｜fim▁hole｜>");
  const auto end = ctx.tokenizer->TokenId("<｜fim▁end｜>");
  if (!begin || !hole || !end)
    return dialect::Unsupported("suffix", "this model's tokenizer has no fill-in-the-middle tokens");
  ids->push_back(ctx.service->Info().bos_token_id);
  ids->push_back(*begin);
  for (int32_t id : ctx.tokenizer->EncodePlain(prompt->get<std::string>())) ids->push_back(id);
  ids->push_back(*hole);
  for (int32_t id : ctx.tokenizer->EncodePlain(body["suffix"].get<std::string>())) ids->push_back(id);
  ids->push_back(*end);
  return std::nullopt;
}

bool HasSuffix(const Json& body) {
  auto it = body.find("suffix");
  return it != body.end() && it->is_string() && !it->get<std::string>().empty();
}

}  // namespace

void HandleCompletions(const RouteContext& ctx, const ExchangePtr& exchange) {
  Json body;
  GenerationPlan plan;
  if (!ReadGenerationBody(ctx, *exchange, dialect::Dialect::kCompletion, &body, &plan.options)) return;
  if (auto error = UnsupportedFields(body, plan.options.n)) return exchange->Respond(net::ErrorResponse(*error));
  if (auto error = ReadConstraintFields(body, /*chat=*/false, &plan.constraint)) return exchange->Respond(net::ErrorResponse(*error));
  auto error = HasSuffix(body) ? FimPrompt(ctx, body, &plan.prompt) : PromptIds(ctx, body, &plan.prompt);
  if (error) return exchange->Respond(net::ErrorResponse(*error));
  plan.chat = false;
  plan.prompt_param = "prompt";
  plan.id_prefix = "cmpl-";
  plan.make_writer = [](WriterContext w) { return MakeCompletionWriter(std::move(w)); };
  StartGeneration(ctx, exchange, std::move(plan));
}

}  // namespace flashserve::api
