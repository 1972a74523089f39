// The OpenAI-compatible route handlers and what they share. Called by the Router on an HTTP
// I/O strand; each answers its exchange (directly or through a GenerationJob). The context is
// immutable after start-up; the service, tokenizer, metrics and ids are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "meter/api_keys.h"
#include "net/exchange.h"
#include "api/metrics.h"
#include "api/generation_job.h"
#include "api/request_options.h"
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
  std::string system_fingerprint = "fp_flashserve";
  protocol::WorkerRole role = protocol::WorkerRole::kBoth;  // reported to the router
  std::string transfer_address;  // host:port of this worker's transfer receiver ("" = none)
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
};

using ExchangePtr = std::shared_ptr<net::Exchange>;

void HandleChatCompletions(const RouteContext& ctx, const ExchangePtr& exchange);  // POST /v1/chat/completions
void HandleCompletions(const RouteContext& ctx, const ExchangePtr& exchange);      // POST /v1/completions
void HandleListModels(const RouteContext& ctx, const ExchangePtr& exchange);       // GET /v1/models
void HandleGetModel(const RouteContext& ctx, const ExchangePtr& exchange);         // GET /v1/models/{id}
void HandleHealth(const RouteContext& ctx, const ExchangePtr& exchange);           // GET /health
void HandleMetrics(const RouteContext& ctx, const ExchangePtr& exchange);          // GET /metrics
// APIs that clients may try but this server does not serve yet (Anthropic Messages, OpenAI
// Responses): 501 naming the route and the one to use instead.
void HandleNotImplemented(const RouteContext& ctx, const ExchangePtr& exchange);  // POST /v1/messages, /v1/responses
// The router's view of this worker (protocol/cluster.h): load report, KV events since
// ?after=N (&limit=M), index snapshot. Without a prefix cache the KV routes answer 404.
void HandleLoad(const RouteContext& ctx, const ExchangePtr& exchange);             // GET /v1/load
void HandleKvEvents(const RouteContext& ctx, const ExchangePtr& exchange);         // GET /v1/kv/events
void HandleKvSnapshot(const RouteContext& ctx, const ExchangePtr& exchange);       // GET /v1/kv/snapshot

// Shared by the two generation routes. ReadGenerationBody checks UTF-8, parses the JSON and
// the generation fields and the model name; on failure it answers the exchange and returns
// false. StartGeneration checks the prompt against the context, picks max_tokens and starts
// a GenerationJob. `prompt_param` names the prompt field in errors ("messages" / "prompt").
bool ReadGenerationBody(const RouteContext& ctx, net::Exchange& exchange, Dialect dialect, Json* body,
                        GenerationOptions* options);
void StartGeneration(const RouteContext& ctx, const ExchangePtr& exchange, Dialect dialect,
                     GenerationOptions options, std::vector<int32_t> prompt, bool thinking,
                     const char* prompt_param);

// Disaggregated serving (disagg_route.cc). The router names a transfer in
// protocol::kTransferHeader on both halves of a request. With protocol::kPrefillToHeader
// (host:port of the decode worker's receiver) this worker computes the prompt (one token) while
// serve::StateShipper streams the prompt state there; without it this worker waits for that
// transfer (imported into its prefix cache), then generates, resuming from the received state,
// or recomputing when the transfer failed.
void StartDisaggregated(const RouteContext& ctx, const ExchangePtr& exchange, JobOptions job, JobDeps deps,
                        protocol::GenerateRequest request, const std::string& transfer_id);

}  // namespace flashserve::api
