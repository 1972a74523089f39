// Token events -> reasoning, content, tool calls, logprobs, stop strings -> the dialect writer
// (api/generation_job.h).
#include "api/generation_job.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "api/stop_matcher.h"
#include "base/clock.h"
#include "encoding/output_parser.h"
#include "tokenizer/detokenizer.h"

namespace flashserve::api {

using protocol::FinishReason;

struct GenerationJob::Choice {
  Choice(int i, const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops, bool reasoning)
      : index(i), detok(tokenizer), stop(std::move(stops)), in_reasoning(reasoning) {}
  int index;
  tokenizer::IncrementalDetokenizer detok;
  std::optional<encoding::OutputParser> parser;  // chat-encoded prompts only
  StopMatcher stop;
  bool in_reasoning;             // tokens so far belong to the thinking block
  bool open = true;
  // Content tokens whose logprobs wait until their text is out of the parser's hold-back: the
  // tokens of a tool-call block's marker are not content. bytes: what the token decoded to.
  std::deque<std::pair<protocol::TokenOutput, size_t>> pending_logprobs;
  size_t pending_bytes = 0;
  int64_t reasoning_tokens = 0;  // generated tokens up to and including </think>
  int64_t tokens_received = 0;   // in the service's events, read or not
  int64_t tokens_read = 0;
  int64_t tokens_kept = -1;      // up to the one that completed a stop string (-1: all)
  double last_token_seconds = 0;
};

std::shared_ptr<GenerationJob> GenerationJob::Create(JobOptions options, JobDeps deps,
                                                     std::shared_ptr<net::Exchange> exchange,
                                                     std::unique_ptr<DialectWriter> writer) {
  return std::shared_ptr<GenerationJob>(
      new GenerationJob(std::move(options), deps, std::move(exchange), std::move(writer)));
}

GenerationJob::GenerationJob(JobOptions options, JobDeps deps, std::shared_ptr<net::Exchange> exchange,
                             std::unique_ptr<DialectWriter> writer)
    : options_(std::move(options)), deps_(deps), exchange_(std::move(exchange)), writer_(std::move(writer)) {}

GenerationJob::~GenerationJob() = default;

int QueueRetryAfterSeconds(const serve::ServiceStats& stats) {
  if (stats.finished_per_second <= 0) return 1;
  // Half the queue's drain time: refused clients that come back spread over the next such
  // interval keep the queue fed without retrying every second.
  const double half_drain = 0.5 * static_cast<double>(stats.waiting) / stats.finished_per_second;
  return static_cast<int>(std::clamp(std::ceil(half_drain), 1.0, 60.0));
}

void GenerationJob::Start(protocol::GenerateRequest request) {
  request_id_ = request.id;
  if (exchange_->closed()) return;  // the client already left: nothing to compute for
  const bool reasoning = options_.parse_output && options_.thinking;
  for (int i = 0; i < request.n; ++i) {
    auto c = std::make_unique<Choice>(i, *deps_.tokenizer, options_.stop, reasoning);
    if (options_.parse_output) c->parser.emplace(options_.version, options_.thinking);
    choices_.push_back(std::move(c));
  }
  num_open_ = request.n;
  const int n = request.n;
  std::weak_ptr<GenerationJob> weak = weak_from_this();
  exchange_->SetCloseHandler([weak] {
    if (auto self = weak.lock()) self->OnClientGone();
  });
  auto self = shared_from_this();
  std::shared_ptr<net::Exchange> exchange = exchange_;
  base::Status s = deps_.service->Submit(std::move(request), [self, exchange](const protocol::GenerateEvent& e) {
    exchange->Post([self, e] { self->OnEvent(e); });
  });
  if (!s.ok()) {
    finished_ = true;
    // The loop's refusals that name a field: the context (the prompt) and the choice count.
    const bool context = s.error().code() == base::ErrorCode::kContextOverflow;
    const bool choices = s.error().message().rfind("n must", 0) == 0;
    net::ApiError error = net::FromError(s.error(), context ? options_.prompt_param : choices ? "n" : "");
    if (s.error().code() == base::ErrorCode::kResourceExhausted) {
      error.retry_after_s = QueueRetryAfterSeconds(deps_.service->Stats());
    }
    writer_->Fail(std::move(error), false);
    if (options_.meter) options_.meter->Refused();
    return;
  }
  if (options_.meter) options_.meter->Accepted();
  begun_ = true;
  writer_->Begin(n);
  ScheduleKeepAlive();
}

// Until the first token, a long prefill would leave a stream silent for minutes, and proxies
// (and clients' idle timeouts) cut silent connections.
void GenerationJob::ScheduleKeepAlive() {
  if (options_.keepalive_seconds <= 0) return;
  std::weak_ptr<GenerationJob> weak = weak_from_this();
  exchange_->PostAfter(options_.keepalive_seconds, [weak] {
    auto self = weak.lock();
    if (!self || self->finished_ || self->first_token_seen_ || self->client_gone_ || self->exchange_->closed()) return;
    self->writer_->KeepAlive();
    self->ScheduleKeepAlive();
  });
}

void GenerationJob::OnClientGone() {
  if (!client_gone_) {
    delivered_at_gone_ = DeliveredTokens();
    reasoning_at_gone_ = DeliveredReasoning();
  }
  client_gone_ = true;
  if (!cancel_sent_ && !finished_) {
    cancel_sent_ = true;
    deps_.service->Cancel(request_id_);
  }
}

void GenerationJob::OnEvent(const protocol::GenerateEvent& e) {
  if (finished_) return;
  if (e.persisted_tokens > 0 && options_.on_persisted) options_.on_persisted(e.persisted_tokens);
  if (e.choice >= 0 && e.choice < static_cast<int>(choices_.size()))
    choices_[static_cast<size_t>(e.choice)]->tokens_received += static_cast<int64_t>(e.tokens.size());
  if (e.choice >= 0 && e.choice < static_cast<int>(choices_.size()) && !client_gone_ && !failure_) {
    Choice& c = *choices_[static_cast<size_t>(e.choice)];
    if (c.open && !e.tokens.empty()) OnTokens(c, e.tokens);
    if (c.open && (e.finish == FinishReason::kStop || e.finish == FinishReason::kLength)) {
      ChoiceDelta d;
      const bool stopped = Process(c, c.detok.Flush(), true, d);
      ReleaseLogprobs(c, true, d);
      if (!d.empty()) writer_->Delta(d);
      Finish finish = Finish::kEnd;
      if (stopped) finish = Finish::kStopString;
      else if (c.parser && c.parser->outcome() == encoding::OutputOutcome::kToolCalls) finish = Finish::kToolCalls;
      else if (e.finish == FinishReason::kLength) finish = Finish::kLength;
      EndChoice(c, finish);
    } else if (c.open && e.finish == FinishReason::kCancelled) {
      Fail(net::Unavailable("the request was cancelled" + (e.error.empty() ? std::string() : ": " + e.error), 0,
                            "cancelled"));
    } else if (c.open && e.finish == FinishReason::kError) {
      Fail(net::FromError(base::Error(base::ErrorCode::kInternal, e.error.empty() ? "generation failed" : e.error)));
    }
  }
  if (e.request_done) OnRequestDone(e.usage);
}

void GenerationJob::OnTokens(Choice& c, const std::vector<protocol::TokenOutput>& tokens) {
  const double now = base::MonotonicSeconds();
  if (deps_.metrics) {
    if (!first_token_seen_) deps_.metrics->RecordTimeToFirstToken(now - exchange_->start_seconds());
    else if (c.last_token_seconds > 0) deps_.metrics->RecordInterTokenLatency((now - c.last_token_seconds) / tokens.size());
  }
  first_token_seen_ = true;
  c.last_token_seconds = now;
  // With stop strings, the tokens of one event (a speculative step makes several) are read one
  // at a time, so the one that completes a stop is known: usage counts the tokens up to it.
  const size_t group = options_.stop.empty() ? tokens.size() : 1;
  for (size_t begin = 0; begin < tokens.size(); begin += group) {
    if (!ReadTokens(c, std::span(tokens).subspan(begin, std::min(group, tokens.size() - begin)))) continue;
    c.tokens_kept = c.tokens_read;
    EndChoice(c, Finish::kStopString);
    if (num_open_ == 0 && !cancel_sent_) {
      cancel_sent_ = true;
      deps_.service->Cancel(request_id_);
    }
    return;
  }
}

bool GenerationJob::ReadTokens(Choice& c, std::span<const protocol::TokenOutput> tokens) {
  std::string text;
  ChoiceDelta d;
  for (const protocol::TokenOutput& t : tokens) {
    const std::string piece = c.detok.Push(t.token);
    text += piece;
    if (c.in_reasoning) {
      ++c.reasoning_tokens;
      if (t.token == options_.think_end_token) c.in_reasoning = false;
    } else if (options_.logprobs) {
      c.pending_logprobs.emplace_back(t, piece.size());
      c.pending_bytes += piece.size();
    }
  }
  c.tokens_read += static_cast<int64_t>(tokens.size());
  if (options_.meter) options_.meter->Delivered(DeliveredTokens(), DeliveredReasoning());
  const bool stopped = Process(c, text, false, d);
  ReleaseLogprobs(c, false, d);
  if (!d.empty()) writer_->Delta(d);
  return stopped;
}

bool GenerationJob::Process(Choice& c, const std::string& text, bool at_end, ChoiceDelta& d) {
  d.choice = c.index;
  std::string content;
  std::vector<encoding::ToolCallPiece> calls;
  if (c.parser) {
    encoding::ParseDelta p = c.parser->Feed(text);
    if (at_end) {
      p.Append(c.parser->Finish());
      // A broken tool-call block is returned as text rather than lost.
      if (c.parser->error()) p.content += c.parser->error()->raw_text;
    }
    d.reasoning = std::move(p.reasoning);
    content = std::move(p.content);
    calls = std::move(p.tool_calls);
  } else {
    content = text;
  }
  if (c.stop.stopped()) return false;
  StopMatcher::Output out = c.stop.Feed(content);
  d.content = std::move(out.text);
  if (out.stopped) return true;
  if (at_end || !calls.empty()) d.content += c.stop.Finish();
  d.tool_calls = std::move(calls);
  return false;
}

void GenerationJob::ReleaseLogprobs(Choice& c, bool at_end, ChoiceDelta& d) {
  d.choice = c.index;
  if (c.parser && c.parser->entered_tool_calls()) {  // the block's tokens are not content
    c.pending_logprobs.clear();
    c.pending_bytes = 0;
    return;
  }
  const size_t held = at_end || !c.parser ? 0 : c.parser->held_back_bytes();
  while (!c.pending_logprobs.empty() && c.pending_bytes - c.pending_logprobs.front().second >= held) {
    c.pending_bytes -= c.pending_logprobs.front().second;
    d.logprobs.push_back(std::move(c.pending_logprobs.front().first));
    c.pending_logprobs.pop_front();
  }
}

void GenerationJob::EndChoice(Choice& c, Finish finish) {
  c.open = false;
  if (finish == Finish::kLength) any_length_ = true;
  --num_open_;
  ChoiceEnd end;
  end.choice = c.index;
  end.finish = finish;
  if (finish == Finish::kStopString) end.stop_string = c.stop.matched();
  writer_->End(end);
}

void GenerationJob::Fail(net::ApiError error) {
  if (!failure_) failure_ = std::move(error);
}

void GenerationJob::OnRequestDone(const protocol::Usage& reported) {
  finished_ = true;
  protocol::Usage usage = reported;  // less the tokens made after a stop string, before the cancel landed
  for (const auto& c : choices_)
    if (c->tokens_kept >= 0) usage.completion_tokens -= std::max<int64_t>(0, c->tokens_received - c->tokens_kept);
  usage.completion_tokens = std::max<int64_t>(usage.completion_tokens, 0);
  if (options_.on_done && !failure_) options_.on_done(usage);
  MeterEnd(usage);
  if (client_gone_ || exchange_->closed()) return;
  if (failure_) return writer_->Fail(*failure_, begun_);
  RequestDone done;
  done.usage = usage;
  for (auto& c : choices_) {
    if (c->open) {
      ChoiceDelta d;
      Process(*c, c->detok.Flush(), true, d);
      ReleaseLogprobs(*c, true, d);
      if (!d.empty()) writer_->Delta(d);
      EndChoice(*c, Finish::kEnd);
    }
    done.reasoning_tokens += c->reasoning_tokens;
  }
  writer_->Done(done);
}

int64_t GenerationJob::DeliveredTokens() const {
  int64_t n = 0;
  for (const auto& c : choices_) n += c->tokens_kept >= 0 ? std::min(c->tokens_kept, c->tokens_read) : c->tokens_read;
  return n;
}

int64_t GenerationJob::DeliveredReasoning() const {
  int64_t n = 0;
  for (const auto& c : choices_) n += c->reasoning_tokens;
  return n;
}

void GenerationJob::MeterEnd(const protocol::Usage& usage) {
  if (!options_.meter) return;
  using meter::UsageStatus;
  if (client_gone_ || exchange_->closed()) {
    const bool gone_before = client_gone_;
    options_.meter->Ended(UsageStatus::kCancelled, usage, gone_before ? delivered_at_gone_ : DeliveredTokens(),
                          gone_before ? reasoning_at_gone_ : DeliveredReasoning());
  } else if (failure_) {
    options_.meter->Ended(UsageStatus::kFailed, usage, DeliveredTokens(), DeliveredReasoning());
  } else {
    options_.meter->Ended(any_length_ ? UsageStatus::kLength : UsageStatus::kCompleted, usage, usage.completion_tokens,
                          DeliveredReasoning());
  }
}

}  // namespace flashserve::api
