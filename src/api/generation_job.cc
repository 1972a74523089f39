// Token events -> text, tool calls, logprobs, stop strings -> JSON / SSE (api/generation_job.h).
#include "api/generation_job.h"

#include "net/http_wire.h"
#include "api/stop_matcher.h"
#include "base/clock.h"
#include "encoding/output_parser.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/utf8.h"

namespace flashserve::api {

using protocol::FinishReason;

struct GenerationJob::Choice {
  Choice(int i, const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops)
      : index(i), detok(tokenizer), stop(std::move(stops)) {}
  int index;
  tokenizer::IncrementalDetokenizer detok;
  std::optional<encoding::OutputParser> parser;  // chat only
  StopMatcher stop;
  std::string reasoning, content;  // accumulated (complete responses)
  Json tool_calls = Json::array();
  Json logprobs;                   // accumulated: chat entries array / completion object
  int num_tool_calls = 0;
  int64_t text_offset = 0;         // completions: bytes of token text so far
  std::string finish_reason;       // "" while open
  double last_token_seconds = 0;
};

struct GenerationJob::TextDelta {
  std::string reasoning, content;
  Json tool_calls = Json::array();
  bool stopped = false;  // a stop string ended the choice
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

namespace {

Json EmptyCompletionLogprobs() {
  return Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
}

void AppendCompletionLogprobs(const Json& from, Json& to) {
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const Json& v : from[key]) to[key].push_back(v);
}

}  // namespace

std::shared_ptr<GenerationJob> GenerationJob::Create(JobOptions options, JobDeps deps, std::shared_ptr<net::Exchange> exchange) {
  return std::shared_ptr<GenerationJob>(new GenerationJob(std::move(options), deps, std::move(exchange)));
}

GenerationJob::GenerationJob(JobOptions options, JobDeps deps, std::shared_ptr<net::Exchange> exchange)
    : options_(std::move(options)), deps_(deps), exchange_(std::move(exchange)) {}

GenerationJob::~GenerationJob() = default;

void GenerationJob::Start(protocol::GenerateRequest request) {
  request_id_ = request.id;
  if (exchange_->closed()) return;  // the client already left: nothing to compute for
  for (int i = 0; i < request.n; ++i) {
    auto c = std::make_unique<Choice>(i, *deps_.tokenizer, options_.stop);
    if (options_.dialect == Dialect::kChat) c->parser.emplace(options_.version, options_.thinking);
    c->logprobs = options_.dialect == Dialect::kChat ? Json::array() : EmptyCompletionLogprobs();
    choices_.push_back(std::move(c));
  }
  num_open_ = request.n;
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
    const bool context = s.error().code() == base::ErrorCode::kContextOverflow;
    exchange_->Respond(net::ErrorResponse(net::FromError(s.error(), context ? options_.prompt_param : "")));
    return;
  }
  if (!options_.stream) return;
  exchange_->StartStream(200, "text/event-stream");
  if (options_.dialect != Dialect::kChat) return;
  for (const auto& c : choices_) {
    Json choice = {{"index", c->index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                   {"finish_reason", nullptr}};
    WriteSse(ChatChunk(options_.meta, Json::array({std::move(choice)}), options_.include_usage));
  }
}

void GenerationJob::OnClientGone() {
  client_gone_ = true;
  if (!cancel_sent_ && !finished_) {
    cancel_sent_ = true;
    deps_.service->Cancel(request_id_);
  }
}

void GenerationJob::OnEvent(const protocol::GenerateEvent& e) {
  if (finished_) return;
  if (e.persisted_tokens > 0 && options_.on_persisted) options_.on_persisted(e.persisted_tokens);
  if (e.choice >= 0 && e.choice < static_cast<int>(choices_.size()) && !client_gone_ && !failure_) {
    Choice& c = *choices_[static_cast<size_t>(e.choice)];
    if (c.finish_reason.empty() && !e.tokens.empty()) OnTokens(c, e.tokens);
    if (c.finish_reason.empty() && (e.finish == FinishReason::kStop || e.finish == FinishReason::kLength)) {
      TextDelta d = Process(c, c.detok.Flush(), true);
      Emit(c, d, nullptr, "");
      std::string reason = "stop";
      if (!d.stopped && c.parser && c.parser->outcome() == encoding::OutputOutcome::kToolCalls) {
        reason = "tool_calls";
      } else if (!d.stopped && e.finish == FinishReason::kLength) {
        reason = "length";
      }
      FinishChoice(c, reason);
    } else if (c.finish_reason.empty() && e.finish == FinishReason::kCancelled) {
      Fail(net::Unavailable("the request was cancelled" + (e.error.empty() ? std::string() : ": " + e.error), 0,
                            "cancelled"));
    } else if (c.finish_reason.empty() && e.finish == FinishReason::kError) {
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
  std::string text;
  Json lp = nullptr;
  const bool chat = options_.dialect == Dialect::kChat;
  if (options_.logprobs) lp = chat ? Json::array() : EmptyCompletionLogprobs();
  for (const protocol::TokenOutput& t : tokens) {
    text += c.detok.Push(t.token);
    if (!options_.logprobs) continue;
    if (chat) {
      lp.push_back(ChatLogprobEntry(*deps_.tokenizer, t));
      continue;
    }
    const std::string_view bytes = deps_.tokenizer->TokenBytes(t.token);
    Json top = Json::object();
    for (const protocol::TokenLogprob& alt : t.top_logprobs)
      top[tokenizer::LossyUtf8(deps_.tokenizer->TokenBytes(alt.token))] = alt.logprob;
    lp["tokens"].push_back(tokenizer::LossyUtf8(bytes));
    lp["token_logprobs"].push_back(t.logprob);
    lp["top_logprobs"].push_back(std::move(top));
    lp["text_offset"].push_back(c.text_offset);
    c.text_offset += static_cast<int64_t>(bytes.size());
  }
  TextDelta d = Process(c, text, false);
  Emit(c, d, std::move(lp), "");
  if (d.stopped) {
    FinishChoice(c, "stop");
    if (num_open_ == 0 && !cancel_sent_) {
      cancel_sent_ = true;
      deps_.service->Cancel(request_id_);
    }
  }
}

GenerationJob::TextDelta GenerationJob::Process(Choice& c, const std::string& text, bool at_end) {
  TextDelta d;
  std::string content;
  std::vector<encoding::ParsedToolCall> calls;
  if (c.parser) {
    encoding::ParseDelta p = c.parser->Feed(text);
    if (at_end) {
      encoding::ParseDelta tail = c.parser->Finish();
      p.reasoning += tail.reasoning;
      p.content += tail.content;
      for (auto& call : tail.tool_calls) p.tool_calls.push_back(std::move(call));
      // A broken tool-call block is returned as text rather than lost.
      if (c.parser->error()) p.content += c.parser->error()->raw_text;
    }
    d.reasoning = std::move(p.reasoning);
    content = std::move(p.content);
    calls = std::move(p.tool_calls);
  } else {
    content = text;
  }
  if (c.stop.stopped()) return d;
  StopMatcher::Output out = c.stop.Feed(content);
  d.content = std::move(out.text);
  d.stopped = out.stopped;
  if (d.stopped) return d;
  if (at_end || !calls.empty()) d.content += c.stop.Finish();
  for (encoding::ParsedToolCall& call : calls) {
    d.tool_calls.push_back({{"index", c.num_tool_calls++},
                            {"id", deps_.ids ? deps_.ids->Next("call_") : "call_" + std::to_string(c.num_tool_calls)},
                            {"type", "function"},
                            {"function", {{"name", std::move(call.name)}, {"arguments", std::move(call.arguments)}}}});
  }
  return d;
}

void GenerationJob::FinishChoice(Choice& c, const std::string& reason) {
  c.finish_reason = reason;
  --num_open_;
  Emit(c, TextDelta{}, nullptr, reason);
}

void GenerationJob::Emit(Choice& c, const TextDelta& d, Json logprobs, const std::string& finish_reason) {
  const bool chat = options_.dialect == Dialect::kChat;
  if (!options_.stream) {
    c.reasoning += d.reasoning;
    c.content += d.content;
    for (const Json& call : d.tool_calls) {
      Json entry = call;
      entry.erase("index");  // message.tool_calls carry no index; stream deltas do
      c.tool_calls.push_back(std::move(entry));
    }
    if (logprobs.is_array()) {
      for (Json& entry : logprobs) c.logprobs.push_back(std::move(entry));
    } else if (logprobs.is_object()) {
      AppendCompletionLogprobs(logprobs, c.logprobs);
    }
    return;
  }
  if (d.empty() && logprobs.is_null() && finish_reason.empty()) return;
  Json finish = finish_reason.empty() ? Json() : Json(finish_reason);
  if (!chat) {
    Json choice = {{"index", c.index}, {"text", d.content}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish}};
    WriteSse(TextCompletion(options_.meta, Json::array({std::move(choice)}), nullptr, options_.include_usage));
    return;
  }
  Json delta = Json::object();
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) delta["tool_calls"] = d.tool_calls;
  Json lp = logprobs.is_null() ? Json() : Json{{"content", std::move(logprobs)}, {"refusal", nullptr}};
  Json choice = {{"index", c.index}, {"delta", std::move(delta)}, {"logprobs", std::move(lp)}, {"finish_reason", finish}};
  WriteSse(ChatChunk(options_.meta, Json::array({std::move(choice)}), options_.include_usage));
}

void GenerationJob::Fail(net::ApiError error) {
  if (!failure_) failure_ = std::move(error);
}

void GenerationJob::OnRequestDone(const protocol::Usage& usage) {
  finished_ = true;
  if (options_.on_done && !failure_) options_.on_done(usage);
  if (client_gone_ || exchange_->closed()) return;
  if (failure_) {
    if (!options_.stream) return exchange_->Respond(net::ErrorResponse(*failure_));
    exchange_->Write(net::SseData(net::ErrorBody(*failure_)));
    exchange_->Write(net::SseDone());
    return exchange_->EndStream();
  }
  for (auto& c : choices_) {
    if (!c->finish_reason.empty()) continue;
    Emit(*c, Process(*c, c->detok.Flush(), true), nullptr, "");
    FinishChoice(*c, "stop");
  }
  const bool chat = options_.dialect == Dialect::kChat;
  if (options_.stream) {
    if (options_.include_usage) {
      Json chunk = chat ? ChatChunk(options_.meta, Json::array(), false)
                        : TextCompletion(options_.meta, Json::array(), nullptr, false);
      chunk["usage"] = UsageJson(usage);
      WriteSse(chunk);
    }
    exchange_->Write(net::SseDone());
    return exchange_->EndStream();
  }
  Json choices = Json::array();
  for (const auto& c : choices_) choices.push_back(ChoiceJson(*c));
  net::HttpResponse r;
  r.body = Dump(chat ? ChatCompletion(options_.meta, std::move(choices), usage)
                     : TextCompletion(options_.meta, std::move(choices), &usage, false));
  exchange_->Respond(std::move(r));
}

Json GenerationJob::ChoiceJson(const Choice& c) const {
  Json finish = c.finish_reason;
  if (options_.dialect != Dialect::kChat) {
    return {{"index", c.index}, {"text", c.content}, {"logprobs", options_.logprobs ? c.logprobs : Json()},
            {"finish_reason", finish}};
  }
  Json message = {{"role", "assistant"}};
  message["content"] = c.content.empty() && !c.tool_calls.empty() ? Json() : Json(c.content);
  if (options_.thinking) message["reasoning_content"] = c.reasoning;
  if (!c.tool_calls.empty()) message["tool_calls"] = c.tool_calls;
  message["refusal"] = nullptr;
  Json lp = options_.logprobs ? Json{{"content", c.logprobs}, {"refusal", nullptr}} : Json();
  return {{"index", c.index}, {"message", std::move(message)}, {"logprobs", std::move(lp)}, {"finish_reason", finish}};
}

void GenerationJob::WriteSse(const Json& payload) { exchange_->Write(net::SseData(Dump(payload))); }

}  // namespace flashserve::api
