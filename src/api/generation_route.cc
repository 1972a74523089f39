// What the chat and text completion routes share: body checks, context limits, job start
// (api/routes.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "net/api_error.h"
#include "api/generation_job.h"
#include "api/routes.h"
#include "protocol/headers.h"
#include "tokenizer/utf8.h"

namespace flashserve::api {

bool ReadGenerationBody(const RouteContext& ctx, net::Exchange& exchange, Dialect dialect, Json* body,
                        GenerationOptions* options) {
  const std::string& text = exchange.request().body;
  base::Status utf8 = tokenizer::ValidateUtf8(text);
  if (!utf8.ok()) {
    exchange.Respond(net::ErrorResponse(net::InvalidRequest("the request body is not valid UTF-8: " + utf8.error().message(), "", "invalid_utf8")));
    return false;
  }
  if (auto error = ParseJsonBody(text, body)) {
    exchange.Respond(net::ErrorResponse(*error));
    return false;
  }
  const serve::ModelInfo info = ctx.service->Info();
  if (auto error = ParseGenerationOptions(*body, dialect, info.vocab_size, options)) {
    exchange.Respond(net::ErrorResponse(*error));
    return false;
  }
  if (options->model != info.name) {
    exchange.Respond(net::ErrorResponse(net::NotFound(
        fmt::format("The model '{}' does not exist; this server serves '{}'", options->model, info.name), "model",
        "model_not_found")));
    return false;
  }
  return true;
}

namespace {

// max_tokens for the request, or the error that refuses it.
std::optional<net::ApiError> PickMaxTokens(const serve::ModelInfo& info, const RouteContext& ctx, int64_t num_prompt,
                                      const char* prompt_param, GenerationOptions& options) {
  const int64_t limit = info.max_context;
  if (options.max_tokens && *options.max_tokens > limit)
    return net::InvalidRequest(fmt::format("max_tokens: must be at most {} (the model's context length)", limit), "max_tokens",
                          "invalid_value");
  if (num_prompt >= limit) {
    net::ApiError e = net::ContextLengthExceeded(fmt::format(
        "This model's maximum context length is {} tokens. However, your {} resulted in {} tokens. Please reduce the length of the {}.",
        limit, prompt_param, num_prompt, prompt_param));
    e.param = prompt_param;
    return e;
  }
  const int64_t room = limit - num_prompt;
  if (options.max_tokens && *options.max_tokens > room) {
    net::ApiError e = net::ContextLengthExceeded(fmt::format(
        "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the {}, {} in the "
        "completion). Please reduce the length of the {} or completion.",
        limit, num_prompt + *options.max_tokens, num_prompt, prompt_param, *options.max_tokens, prompt_param));
    e.param = prompt_param;
    return e;
  }
  if (!options.max_tokens) options.max_tokens = std::min(ctx.options.default_max_tokens, room);
  return std::nullopt;
}

}  // namespace

void StartGeneration(const RouteContext& ctx, const ExchangePtr& exchange, Dialect dialect, GenerationOptions options,
                     std::vector<int32_t> prompt, bool thinking, const char* prompt_param) {
  const serve::ModelInfo info = ctx.service->Info();
  if (auto error = PickMaxTokens(info, ctx, static_cast<int64_t>(prompt.size()), prompt_param, options)) {
    exchange->Respond(net::ErrorResponse(*error));
    return;
  }
  const bool chat = dialect == Dialect::kChat;
  JobOptions job;
  job.dialect = dialect;
  job.stream = options.stream;
  job.include_usage = options.stream && options.include_usage;
  job.stop = options.stop;
  job.logprobs = options.sampling.logprobs;
  job.prompt_param = prompt_param;
  job.thinking = thinking;
  job.version = ctx.options.encoding_version;
  job.meta.id = ctx.ids->Next(chat ? "chatcmpl-" : "cmpl-");
  job.meta.created = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  job.meta.model = info.name;
  job.meta.system_fingerprint = ctx.options.system_fingerprint;

  protocol::GenerateRequest request;
  request.id = job.meta.id;
  request.prompt = std::move(prompt);
  request.sampling = options.sampling;
  request.n = options.n;
  request.max_tokens = *options.max_tokens;
  request.stop_token_ids = std::move(options.stop_token_ids);
  request.ignore_eos = options.ignore_eos;
  request.ttl_class = options.cache_ttl;
  if (ctx.keys != nullptr && ctx.keys->enabled()) {
    if (const meter::ApiKey* key = ctx.keys->Find(exchange->request())) {
      request.cache_namespace = meter::ApiKeyRing::Namespace(*key);
      if (request.ttl_class.empty()) request.ttl_class = key->ttl_class;
    }
  }

  JobDeps deps{ctx.service, ctx.tokenizer, ctx.metrics, ctx.ids};
  const std::string transfer = exchange->request().Header(protocol::kTransferHeader);
  if (!transfer.empty()) return StartDisaggregated(ctx, exchange, std::move(job), deps, std::move(request), transfer);
  GenerationJob::Create(std::move(job), deps, exchange)->Start(std::move(request));
}

}  // namespace flashserve::api
