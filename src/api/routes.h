// The OpenAI-compatible route handlers and what they share. Called by the Router on an HTTP
// I/O strand; each answers its exchange (directly or through a GenerationJob). The context is
// immutable after start-up; the service, tokenizer, metrics and ids are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "meter/api_keys.h"
#include "meter/key_directory.h"
#include "meter/ledger.h"
#include "meter/limiter.h"
#include "net/exchange.h"
#include "api/constraint_fields.h"
#include "dialect/dialect_request.h"
#include "dialect/reasoning_seal.h"
#include "dialect/request_options.h"
#include "api/metrics.h"
#include "api/generation_job.h"
#include "api/image_inputs.h"
#include "api/writers.h"
#include "api/response_json.h"
#include "encoding/version.h"
#include "serve/service.h"
#include "serve/transfer_inbox.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::api {

struct RouteOptions {
  encoding::EncodingVersion encoding_version = encoding::EncodingVersion::kV4;
  // max_tokens when the request gives none; clipped to the context left after the prompt.
  int64_t default_max_tokens = 4096;
  // Reasoning tokens per choice at most (0 = no cap): </think> is forced after them, whatever
  // budget the request asks for.
  int64_t max_reasoning_tokens = 0;
  // Logit biases every request gets unless it biases the same token itself (llama.cpp's
  // --logit-bias).
  std::vector<std::pair<int32_t, float>> default_logit_bias;
  std::string system_fingerprint = "fp_flashserve";
  protocol::WorkerRole role = protocol::WorkerRole::kBoth;  // reported to the router
  std::string transfer_address;  // host:port of this worker's transfer receiver ("" = none)
  // More model names clients may send for the served model: exact names, or prefixes ending
  // in '*' ("claude-*"). Responses repeat the name the client sent.
  std::vector<std::string> model_aliases;
  dialect::HostedTools hosted_tools = dialect::HostedTools::kDrop;
  ImageOptions images;  // image inputs (disabled: a text-only model, images are a 400)
};

struct RouteContext {
  serve::Service* service = nullptr;
  const meter::ApiKeyRing* keys = nullptr;  // null or empty: no authentication
  const tokenizer::Tokenizer* tokenizer = nullptr;
  ApiMetrics* metrics = nullptr;
  IdSource* ids = nullptr;
  RouteOptions options;
  int64_t created = 0;  // server start (Unix seconds), reported by /v1/models
  serve::TransferInbox* inbox = nullptr;  // decode side of disaggregated serving (null = off)
  const dialect::ReasoningSeal* seal = nullptr;     // seals reasoning handed to stateless clients (null = none)
  grammar::GrammarCache* grammars = nullptr;  // structured outputs (null = refused with a 400)
  meter::Ledger* ledger = nullptr;            // usage ledger (null = requests are not metered)
  const meter::KeyDirectory* tenants = nullptr;  // the keys' tenants and price books (null = none)
  meter::TenantLimiter* limiter = nullptr;       // tenants' limits (null = not enforced)
};

using ExchangePtr = std::shared_ptr<net::Exchange>;

void HandleChatCompletions(const RouteContext& ctx, const ExchangePtr& exchange);  // POST /v1/chat/completions
void HandleCompletions(const RouteContext& ctx, const ExchangePtr& exchange);      // POST /v1/completions
void HandleListModels(const RouteContext& ctx, const ExchangePtr& exchange);       // GET /v1/models
void HandleGetModel(const RouteContext& ctx, const ExchangePtr& exchange);         // GET /v1/models/{id}
void HandleHealth(const RouteContext& ctx, const ExchangePtr& exchange);           // GET /health
void HandleMetrics(const RouteContext& ctx, const ExchangePtr& exchange);          // GET /metrics
void HandleMessages(const RouteContext& ctx, const ExchangePtr& exchange);          // POST /v1/messages (Anthropic)
void HandleCountTokens(const RouteContext& ctx, const ExchangePtr& exchange);       // POST /v1/messages/count_tokens
void HandleResponses(const RouteContext& ctx, const ExchangePtr& exchange);         // POST /v1/responses (stateless)
void HandleTokenize(const RouteContext& ctx, const ExchangePtr& exchange);          // POST /tokenize (vLLM)
void HandleDetokenize(const RouteContext& ctx, const ExchangePtr& exchange);        // POST /detokenize (vLLM)
// The router's view of this worker (protocol/cluster.h): load report, KV events since
// ?after=N (&limit=M), index snapshot. Without a prefix cache the KV routes answer 404.
void HandleLoad(const RouteContext& ctx, const ExchangePtr& exchange);             // GET /v1/load
void HandleKvEvents(const RouteContext& ctx, const ExchangePtr& exchange);         // GET /v1/kv/events
void HandleKvSnapshot(const RouteContext& ctx, const ExchangePtr& exchange);       // GET /v1/kv/snapshot

// What the generation routes share. ReadJsonBody checks UTF-8 and parses the JSON object;
// ModelServed says whether `name` is the served model or one of its aliases. On failure
// they answer the exchange (in `errors`' shape) and return false.
bool ReadJsonBody(net::Exchange& exchange, net::ErrorDialect errors, Json* body);
bool ServesModel(const RouteContext& ctx, const std::string& name);  // the model's id or an alias
bool ModelServed(const RouteContext& ctx, net::Exchange& exchange, const std::string& name, net::ErrorDialect errors);
// Completions: ReadJsonBody, the generation fields and ModelServed.
bool ReadGenerationBody(const RouteContext& ctx, net::Exchange& exchange, dialect::Dialect dialect, Json* body,
                        dialect::GenerationOptions* options);

// One generation as a route plans it: the prompt, its options, how to read the output and
// which dialect writes it.
struct GenerationPlan {
  dialect::GenerationOptions options;
  std::vector<int32_t> prompt;
  std::vector<protocol::ImageInput> images;  // the prompt's pictures (their spans are in `prompt`)
  bool chat = true;                        // chat-encoded prompt: parse reasoning and tool calls
  bool thinking = false;                   // the prompt opened a thinking block
  const char* prompt_param = "messages";   // names the prompt in context-length errors
  const char* max_tokens_param = "max_tokens";  // names the length limit in errors
  const char* id_prefix = "chatcmpl-";
  net::ErrorDialect errors = net::ErrorDialect::kOpenAI;
  net::HeaderList headers;                 // extra response headers
  std::function<std::unique_ptr<DialectWriter>(WriterContext)> make_writer;
  ConstraintSource constraint;             // structured output (api/constraint_fields.h)
};
// Checks the prompt against the context, picks max_tokens, builds the request and starts a
// GenerationJob with the plan's writer.
void StartGeneration(const RouteContext& ctx, const ExchangePtr& exchange, GenerationPlan plan);

// The x-flashserve-dropped-tools header naming the hosted tools left out of the prompt (printable
// ASCII only); nothing when none were.
void AddDroppedToolsHeader(const std::vector<std::string>& dropped, net::HeaderList* headers);

// The dialect::DialectContext of this server's routes.
dialect::DialectContext DialectContextOf(const RouteContext& ctx);
// Encodes a chat request into token ids (kBadChatRequest: 400 naming the field). A final
// assistant message is continued (encoding::EncodeChatContinuation). *thinking: whether the
// output starts inside the reasoning. Pictures become their spans in *ids and ImageInputs in
// *images (api/image_inputs.h).
std::optional<net::ApiError> EncodePrompt(const RouteContext& ctx, const protocol::ChatRequest& chat,
                                          std::vector<int32_t>* ids, std::vector<protocol::ImageInput>* images,
                                          bool* thinking);

// Disaggregated serving (disagg_route.cc). The router names a transfer in
// protocol::kTransferHeader on both halves of a request. With protocol::kPrefillToHeader
// (host:port of the decode worker's receiver) this worker computes the prompt (one token) while
// serve::StateShipper streams the prompt state there; without it this worker waits for that
// transfer (imported into its prefix cache), then generates, resuming from the received state,
// or recomputing when the transfer failed.
void StartDisaggregated(const RouteContext& ctx, const ExchangePtr& exchange, JobOptions job, JobDeps deps,
                        std::unique_ptr<DialectWriter> writer, protocol::GenerateRequest request,
                        const std::string& transfer_id);

// Pictures encoded by `--role encode` workers (encode_route.cc). StartEncodeHalf: on an encode
// worker, encodes the pictures protocol::kEncodeImagesHeader names (default all) and streams
// their tower outputs to protocol::kEncodeToHeader in transfer protocol::kTransferHeader, then
// answers {"object": "encode", "images": [...]}; without those headers a 400 (this worker does
// not generate). AwaitEncodeTransfers: when the request names encode transfers
// (protocol::kEncodeTransfersHeader), calls `then` on the exchange's strand once each has ended
// or failed and returns true (also true after answering a malformed header with a 400); false
// when there is nothing to wait for.
void StartEncodeHalf(const RouteContext& ctx, const ExchangePtr& exchange, std::vector<protocol::ImageInput> images,
                     net::ErrorDialect errors);
bool AwaitEncodeTransfers(const RouteContext& ctx, const ExchangePtr& exchange, std::function<void()> then,
                          net::ErrorDialect errors);

}  // namespace flashserve::api
