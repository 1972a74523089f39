// What the generation routes share: body checks, model names, prompt encoding, context limits,
// job start (api/routes.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "api/generation_job.h"
#include "api/routes.h"
#include "base/wall_time.h"
#include "encoding/request_prompt.h"
#include "meter/limit_http.h"
#include "net/api_error.h"
#include "protocol/headers.h"
#include "tokenizer/utf8.h"

namespace flashserve::api {

bool ReadJsonBody(net::Exchange& exchange, net::ErrorDialect errors, Json* body) {
  const std::string& text = exchange.request().body;
  base::Status utf8 = tokenizer::ValidateUtf8(text);
  if (!utf8.ok()) {
    exchange.Respond(net::ErrorResponse(
        net::InvalidRequest("the request body is not valid UTF-8: " + utf8.error().message(), "", "invalid_utf8"), errors));
    return false;
  }
  if (auto error = dialect::ParseJsonBody(text, body)) {
    exchange.Respond(net::ErrorResponse(*error, errors));
    return false;
  }
  return true;
}

bool ServesModel(const RouteContext& ctx, const std::string& name) {
  if (name == ctx.service->Info().name) return true;
  for (const std::string& alias : ctx.options.model_aliases) {
    const bool glob = !alias.empty() && alias.back() == '*';
    if (glob ? name.compare(0, alias.size() - 1, alias, 0, alias.size() - 1) == 0 : name == alias) return true;
  }
  return false;
}

bool ModelServed(const RouteContext& ctx, net::Exchange& exchange, const std::string& name, net::ErrorDialect errors) {
  if (ServesModel(ctx, name)) return true;
  const serve::ModelInfo info = ctx.service->Info();
  exchange.Respond(net::ErrorResponse(
      net::NotFound(fmt::format("The model '{}' does not exist; this server serves '{}'", name, info.name), "model",
                    "model_not_found"),
      errors));
  return false;
}

bool ReadGenerationBody(const RouteContext& ctx, net::Exchange& exchange, dialect::Dialect dialect, Json* body,
                        dialect::GenerationOptions* options) {
  if (!ReadJsonBody(exchange, net::ErrorDialect::kOpenAI, body)) return false;
  if (auto error = dialect::ParseGenerationOptions(*body, dialect, ctx.service->Info().vocab_size, options)) {
    exchange.Respond(net::ErrorResponse(*error));
    return false;
  }
  return ModelServed(ctx, exchange, options->model, net::ErrorDialect::kOpenAI);
}

void AddDroppedToolsHeader(const std::vector<std::string>& dropped, net::HeaderList* headers) {
  if (dropped.empty()) return;
  std::string names;
  for (const std::string& name : dropped) {
    if (!names.empty()) names += ", ";
    for (char c : std::string_view(name).substr(0, 200)) names.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  headers->emplace_back(protocol::kDroppedToolsHeader, std::move(names));
}

dialect::DialectContext DialectContextOf(const RouteContext& ctx) {
  dialect::DialectContext d;
  d.vocab_size = ctx.service->Info().vocab_size;
  d.version = ctx.options.encoding_version;
  d.hosted_tools = ctx.options.hosted_tools;
  d.seal = ctx.seal;
  return d;
}

namespace {

// max_tokens for the request, or the error that refuses it.
std::optional<net::ApiError> PickMaxTokens(const serve::ModelInfo& info, const RouteContext& ctx, int64_t num_prompt,
                                           const GenerationPlan& plan, dialect::GenerationOptions& options) {
  const int64_t limit = info.max_context;
  const char* prompt_param = plan.prompt_param;
  if (options.max_tokens && *options.max_tokens > limit)
    return net::InvalidRequest(
        fmt::format("{}: must be at most {} (the model's context length)", plan.max_tokens_param, limit),
        plan.max_tokens_param, "invalid_value");
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

// The ledger record of a request at arrival, under its tenant's price book in force now, after
// its tenant's limits admitted it (their headers added to *headers). Null when refused: the
// exchange is answered with a 429.
std::shared_ptr<RequestMeter> MeterFor(const RouteContext& ctx, const ExchangePtr& exchange,
                                       const std::optional<meter::ApiKey>& key, const std::string& model,
                                       const protocol::GenerateRequest& request, bool stream, bool record,
                                       net::ErrorDialect errors, net::HeaderList* headers) {
  meter::UsageRecord r;
  r.request_id = request.id;
  r.route = exchange->request().path;
  r.model = model;
  r.arrival_us = base::UnixMicros();
  r.input_uncached = static_cast<int64_t>(request.prompt.size());
  if (key) {
    r.tenant = key->tenant;
    r.key_id = key->id;
  }
  std::unique_ptr<meter::LimitSlot> slot;
  const auto tenants = ctx.tenants != nullptr && !r.tenant.empty() ? ctx.tenants->Tenants() : nullptr;
  const auto tenant = tenants ? tenants->find(r.tenant) : meter::KeyDirectory::TenantMap::const_iterator();
  if (tenants && tenant != tenants->end()) {
    const int64_t now_s = r.arrival_us / 1'000'000;
    r.currency = tenant->second.prices.currency;
    r.rates = tenant->second.prices.RatesAt(now_s);
    if (ctx.limiter != nullptr) {
      meter::LimitDecision d = ctx.limiter->Admit(r.tenant, tenant->second.limits, r.input_uncached, now_s);
      if (!d.allowed) {
        exchange->Respond(meter::LimitRefusal(d, r.input_uncached, errors, now_s));
        return nullptr;
      }
      net::HeaderList limit_headers = meter::RateLimitHeaders(d, errors, now_s);
      headers->insert(headers->end(), limit_headers.begin(), limit_headers.end());
      slot = std::move(d.slot);
    }
  }
  return std::make_shared<RequestMeter>(record ? ctx.ledger : nullptr, std::move(r), stream, std::move(slot));
}

}  // namespace

std::optional<net::ApiError> EncodePrompt(const RouteContext& ctx, const protocol::ChatRequest& chat,
                                          std::vector<int32_t>* ids, std::vector<protocol::ImageInput>* images,
                                          bool* thinking) {
  if (auto e = ImagesAccepted(ctx.options.images, chat)) return e;
  // Vision-Exp (V4 with a tower) renders picture parts; a text-only V4 keeps encoding_dsv4.py's rules.
  const encoding::EncodeOptions encode{.v4_picture_parts = ctx.options.images.enabled};
  base::Result<encoding::RequestPrompt> prompt = encoding::EncodeRequest(chat, ctx.options.encoding_version, encode);
  if (!prompt.ok()) return dialect::ChatRequestError(prompt.error());
  *thinking = prompt->thinking;
  base::Result<std::vector<int32_t>> tokens = encoding::ToTokenIds(prompt->prompt, *ctx.tokenizer);
  if (!tokens.ok()) return net::FromError(tokens.error());
  *ids = std::move(tokens).value();
  const int32_t placeholder = ctx.tokenizer->TokenId(encoding::kImageToken).value_or(-1);
  return ExpandImages(ctx.options.images, chat, prompt->prompt, placeholder, ids, images);
}

void StartGeneration(const RouteContext& ctx, const ExchangePtr& exchange, GenerationPlan plan) {
  if (ctx.options.role == protocol::WorkerRole::kEncode)
    return StartEncodeHalf(ctx, exchange, std::move(plan.images), plan.errors);
  const serve::ModelInfo info = ctx.service->Info();
  dialect::GenerationOptions& options = plan.options;
  if (auto error = PickMaxTokens(info, ctx, static_cast<int64_t>(plan.prompt.size()), plan, options))
    return exchange->Respond(net::ErrorResponse(*error, plan.errors));
  if (auto error = CheckConstraint(ctx.grammars, plan.constraint)) return exchange->Respond(net::ErrorResponse(*error, plan.errors));
  const int32_t think_end = ctx.tokenizer->TokenId("</think>").value_or(-1);
  JobOptions job;
  job.stop = options.stop;
  job.parse_output = plan.chat;
  job.thinking = plan.thinking;
  job.version = ctx.options.encoding_version;
  job.logprobs = options.sampling.logprobs;
  job.think_end_token = think_end;
  job.prompt_param = plan.prompt_param;

  WriterContext w;
  w.exchange = exchange;
  w.tokenizer = ctx.tokenizer;
  w.ids = ctx.ids;
  w.meta.id = ctx.ids->Next(plan.id_prefix);
  w.meta.created = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  w.meta.model = options.model.empty() ? info.name : options.model;
  w.meta.system_fingerprint = ctx.options.system_fingerprint;
  w.stream = options.stream;
  w.include_usage = options.stream && options.include_usage;
  w.logprobs = options.sampling.logprobs;
  w.thinking = plan.thinking;
  w.prompt_tokens = static_cast<int64_t>(plan.prompt.size());
  w.headers = std::move(plan.headers);

  protocol::GenerateRequest request;
  request.id = w.meta.id;
  request.prompt = std::move(plan.prompt);
  request.images = std::move(plan.images);
  request.sampling = options.sampling;
  for (const auto& [token, bias] : ctx.options.default_logit_bias) {
    auto& own = request.sampling.logit_bias;
    if (std::none_of(own.begin(), own.end(), [token = token](const auto& b) { return b.first == token; }))
      own.emplace_back(token, bias);
  }
  request.n = options.n;
  request.max_tokens = *options.max_tokens;
  request.stop_token_ids = std::move(options.stop_token_ids);
  request.ignore_eos = options.ignore_eos;
  request.ttl_class = options.cache_ttl;
  std::optional<int64_t> budget = options.reasoning_budget;
  if (ctx.options.max_reasoning_tokens > 0) budget = std::min(budget.value_or(INT64_MAX), ctx.options.max_reasoning_tokens);
  if (plan.thinking && budget) {
    request.reasoning_budget = *budget;
    request.think_end_token = think_end;
  }
  request.constraint = plan.constraint.constraint;
  if (request.constraint.active() && plan.thinking) {  // the reasoning is free; the answer follows the grammar
    request.constrain_after_think = true;
    request.think_end_token = think_end;
  }
  std::optional<meter::ApiKey> key;
  if (ctx.keys != nullptr && ctx.keys->enabled()) {
    key = ctx.keys->Find(exchange->request());
    // Revoked since the route table let it in (an image fetch can take seconds).
    if (!key) return exchange->Respond(net::ErrorResponse(net::Unauthorized(), plan.errors));
  }
  if (key) {
    request.cache_namespace = meter::ApiKeyRing::Namespace(*key);
    if (request.ttl_class.empty()) request.ttl_class = key->ttl_class;
  }
  // The prefill half of a disaggregated request (both headers).
  const bool prefill_half = !exchange->request().Header(protocol::kPrefillToHeader).empty() &&
                            !exchange->request().Header(protocol::kTransferHeader).empty();
  // The prefill half counts against the limits of the worker doing it; its record is the decode
  // worker's.
  if (ctx.ledger != nullptr) {
    job.meter = MeterFor(ctx, exchange, key, w.meta.model, request, options.stream, !prefill_half, plan.errors,
                         &w.headers);
    if (!job.meter) return;  // refused by the tenant's limits
  }

  struct Launch {  // the start, now or once the request's pictures have arrived from encode workers
    JobOptions job;
    JobDeps deps;
    std::unique_ptr<DialectWriter> writer;
    protocol::GenerateRequest request;
    std::string transfer;
  };
  auto launch = std::make_shared<Launch>(Launch{std::move(job), JobDeps{ctx.service, ctx.tokenizer, ctx.metrics},
                                                plan.make_writer(std::move(w)), std::move(request),
                                                exchange->request().Header(protocol::kTransferHeader)});
  auto start = [ctx = &ctx, exchange, launch] {
    Launch& l = *launch;
    if (!l.transfer.empty())
      return StartDisaggregated(*ctx, exchange, std::move(l.job), l.deps, std::move(l.writer), std::move(l.request),
                                l.transfer);
    GenerationJob::Create(std::move(l.job), l.deps, exchange, std::move(l.writer))->Start(std::move(l.request));
  };
  if (!AwaitEncodeTransfers(ctx, exchange, start, plan.errors)) start();
}

}  // namespace flashserve::api
