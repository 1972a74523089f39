// One generation request in the api: submits it to serve, turns token events into text, tool
// calls, logprobs and stop strings, and writes a response or SSE stream. Created by the chat and
// completions routes; runs on its exchange's strand (engine-thread sinks only Post events there).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/api_error.h"
#include "net/exchange.h"
#include "api/metrics.h"
#include "api/request_options.h"
#include "api/response_json.h"
#include "encoding/version.h"
#include "protocol/generate.h"
#include "serve/service.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::api {

struct JobOptions {
  Dialect dialect = Dialect::kChat;
  bool stream = false;
  bool include_usage = false;
  std::vector<std::string> stop;  // stop strings
  bool logprobs = false;          // report token logprobs
  const char* prompt_param = "messages";  // names the prompt in context-length errors
  bool thinking = false;          // chat: the prompt opened a thinking block
  encoding::EncodingVersion version = encoding::EncodingVersion::kV4;
  ResponseMeta meta;
  // Called on the strand when the request finished without error (disaggregated prefill: ship
  // the prompt state). May be empty.
  std::function<void(const protocol::Usage&)> on_done;
  // Called on the strand for each GenerateEvent::persisted_tokens (report_persisted requests).
  std::function<void(int64_t)> on_persisted;
};

struct JobDeps {
  serve::Service* service = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  ApiMetrics* metrics = nullptr;  // may be null
  IdSource* ids = nullptr;        // tool-call ids
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  static std::shared_ptr<GenerationJob> Create(JobOptions options, JobDeps deps, std::shared_ptr<net::Exchange> exchange);
  ~GenerationJob();

  // On the exchange strand: submits `request` (its id must be meta.id). A refused submit is
  // answered with the mapped error (429 + Retry-After for a full queue).
  void Start(protocol::GenerateRequest request);

 private:
  struct Choice;
  struct TextDelta;

  GenerationJob(JobOptions options, JobDeps deps, std::shared_ptr<net::Exchange> exchange);
  void OnEvent(const protocol::GenerateEvent& event);
  void OnClientGone();
  void OnTokens(Choice& c, const std::vector<protocol::TokenOutput>& tokens);
  TextDelta Process(Choice& c, const std::string& text, bool at_end);
  void FinishChoice(Choice& c, const std::string& reason);
  void Emit(Choice& c, const TextDelta& delta, Json logprobs, const std::string& finish_reason);
  void OnRequestDone(const protocol::Usage& usage);
  void Fail(net::ApiError error);
  Json ChoiceJson(const Choice& c) const;
  void WriteSse(const Json& payload);

  JobOptions options_;
  JobDeps deps_;
  std::shared_ptr<net::Exchange> exchange_;
  std::string request_id_;
  std::vector<std::unique_ptr<Choice>> choices_;
  int num_open_ = 0;
  bool cancel_sent_ = false;
  bool client_gone_ = false;
  bool first_token_seen_ = false;
  bool finished_ = false;
  std::optional<net::ApiError> failure_;
};

}  // namespace flashserve::api
