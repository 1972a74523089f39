// The generation core of every dialect: submits one request to serve, turns its token events
// into reasoning, content, tool calls, logprobs and stop-string ends, and hands them to the
// request's DialectWriter. Created by the generation routes; runs on its exchange's strand
// (engine-thread sinks only Post events there).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "api/dialect_writer.h"
#include "api/metrics.h"
#include "api/request_meter.h"
#include "encoding/version.h"
#include "net/api_error.h"
#include "net/exchange.h"
#include "protocol/generate.h"
#include "serve/service.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::api {

struct JobOptions {
  std::vector<std::string> stop;  // stop strings (content only)
  bool parse_output = false;      // chat-encoded prompt: split reasoning, content, tool calls
  bool thinking = false;          // the prompt opened a thinking block
  encoding::EncodingVersion version = encoding::EncodingVersion::kV4;
  bool logprobs = false;          // pass content tokens' logprobs to the writer
  int32_t think_end_token = -1;   // "</think>": ends the reasoning tokens (-1 = none)
  const char* prompt_param = "messages";  // names the prompt in context-length errors
  double keepalive_seconds = 10;          // streams: a keep-alive this often until the first token (0 = off)
  // Called on the strand when the request finished without error (disaggregated prefill: ship
  // the prompt state). May be empty.
  std::function<void(const protocol::Usage&)> on_done;
  // Called on the strand for each GenerateEvent::persisted_tokens (report_persisted requests).
  std::function<void(int64_t)> on_persisted;
  // The request's usage-ledger record (null: not metered).
  std::shared_ptr<RequestMeter> meter;
};

struct JobDeps {
  serve::Service* service = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  ApiMetrics* metrics = nullptr;  // may be null
};

// Retry-After for a request refused because the queue is full: about the time half the
// requests waiting now take to finish at the rate they have been finishing (1 s to 60 s), so
// refused clients come back as room appears rather than every second.
int QueueRetryAfterSeconds(const serve::ServiceStats& stats);

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  static std::shared_ptr<GenerationJob> Create(JobOptions options, JobDeps deps, std::shared_ptr<net::Exchange> exchange,
                                               std::unique_ptr<DialectWriter> writer);
  ~GenerationJob();

  // On the exchange strand: submits `request`. A refused submit is answered by the writer
  // with the mapped error (429 + Retry-After for a full queue).
  void Start(protocol::GenerateRequest request);

 private:
  struct Choice;

  GenerationJob(JobOptions options, JobDeps deps, std::shared_ptr<net::Exchange> exchange,
                std::unique_ptr<DialectWriter> writer);
  void OnEvent(const protocol::GenerateEvent& event);
  void OnClientGone();
  void ScheduleKeepAlive();
  void OnTokens(Choice& c, const std::vector<protocol::TokenOutput>& tokens);
  bool ReadTokens(Choice& c, std::span<const protocol::TokenOutput> tokens);  // true: a stop string ended it
  // Parses and stop-matches `text` into d (d.choice set); returns true when a stop string hit.
  bool Process(Choice& c, const std::string& text, bool at_end, ChoiceDelta& d);
  // Moves into d the logprobs of content tokens whose text the parser no longer holds back (all
  // at the end); drops those of a tool-call block.
  void ReleaseLogprobs(Choice& c, bool at_end, ChoiceDelta& d);
  void EndChoice(Choice& c, Finish finish);
  void OnRequestDone(const protocol::Usage& reported);
  void Fail(net::ApiError error);
  // Output tokens handed to the writer so far (none after a stop string), and of them reasoning.
  int64_t DeliveredTokens() const;
  int64_t DeliveredReasoning() const;
  void MeterEnd(const protocol::Usage& usage);

  JobOptions options_;
  JobDeps deps_;
  std::shared_ptr<net::Exchange> exchange_;
  std::unique_ptr<DialectWriter> writer_;
  std::string request_id_;
  std::vector<std::unique_ptr<Choice>> choices_;
  int num_open_ = 0;
  bool begun_ = false;
  bool cancel_sent_ = false;
  bool client_gone_ = false;
  bool first_token_seen_ = false;
  bool finished_ = false;
  bool any_length_ = false;        // a choice ended at max_tokens
  int64_t delivered_at_gone_ = 0;  // output tokens the client had when it went away
  int64_t reasoning_at_gone_ = 0;
  std::optional<net::ApiError> failure_;
};

}  // namespace flashserve::api
