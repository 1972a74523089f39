// Chat Completions and Completions writers: JSON responses, `data:` chunks, [DONE]
// (api/writers.h).
#include "api/writers.h"

#include <utility>
#include <vector>

#include "net/http_wire.h"
#include "tokenizer/utf8.h"

namespace flashserve::api {
namespace {

const char* ChatFinishName(Finish f) {
  switch (f) {
    case Finish::kLength: return "length";
    case Finish::kToolCalls: return "tool_calls";
    default: return "stop";
  }
}

// What both OpenAI writers share: SSE output, errors, the per-choice accumulators.
class OpenAiWriter : public DialectWriter {
 protected:
  explicit OpenAiWriter(WriterContext ctx) : ctx_(std::move(ctx)) {}

  void Fail(const net::ApiError& error, bool begun) override {
    if (!ctx_.stream || !begun) return ctx_.exchange->Respond(net::ErrorResponse(error));
    ctx_.exchange->Write(net::SseData(net::ErrorBody(error)));
    ctx_.exchange->Write(net::SseDone());
    ctx_.exchange->EndStream();
  }
  void WriteSse(const Json& payload) { ctx_.exchange->Write(net::SseData(Dump(payload))); }
  void KeepAlive() override {
    if (ctx_.stream) ctx_.exchange->Write(": keep-alive\n\n");
  }
  void EndSse() {
    ctx_.exchange->Write(net::SseDone());
    ctx_.exchange->EndStream();
  }
  void Respond(const Json& body) {
    net::HttpResponse r;
    r.body = Dump(body);
    r.headers = ctx_.headers;
    ctx_.exchange->Respond(std::move(r));
  }

  WriterContext ctx_;
};

class ChatWriter final : public OpenAiWriter {
 public:
  explicit ChatWriter(WriterContext ctx) : OpenAiWriter(std::move(ctx)) {}

  void Begin(int n) override {
    choices_.resize(static_cast<size_t>(n));
    if (!ctx_.stream) return;
    ctx_.exchange->StartStream(200, "text/event-stream", ctx_.headers);
    for (int i = 0; i < n; ++i) {
      Json choice = {{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                     {"finish_reason", nullptr}};
      WriteSse(ChatChunk(ctx_.meta, Json::array({std::move(choice)}), ctx_.include_usage));
    }
  }

  void Delta(const ChoiceDelta& d) override {
    Acc& a = choices_[static_cast<size_t>(d.choice)];
    Json lp = Json::array();
    for (const protocol::TokenOutput& t : d.logprobs) lp.push_back(ChatLogprobEntry(*ctx_.tokenizer, t));
    if (!ctx_.stream) {
      a.reasoning += d.reasoning;
      a.content += d.content;
      for (const ToolCallOut& piece : d.tool_calls) Collect(a, piece);
      for (Json& e : lp) a.logprobs.push_back(std::move(e));
      return;
    }
    Json delta = Json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) delta["content"] = d.content;
    Json logprobs = ctx_.logprobs && !lp.empty() ? Json{{"content", std::move(lp)}, {"refusal", nullptr}} : Json();
    if (!delta.empty() || !logprobs.is_null()) WriteChoice(d.choice, std::move(delta), std::move(logprobs), Json());
    for (const ToolCallOut& piece : d.tool_calls) StreamToolCall(d.choice, a, piece);
  }

  void End(const ChoiceEnd& end) override {
    Acc& a = choices_[static_cast<size_t>(end.choice)];
    a.finish = ChatFinishName(end.finish);
    if (ctx_.stream) WriteChoice(end.choice, Json::object(), Json(), a.finish);
  }

  void Done(const RequestDone& done) override {
    if (ctx_.stream) {
      if (ctx_.include_usage) {
        Json chunk = ChatChunk(ctx_.meta, Json::array(), false);
        chunk["usage"] = UsageJson(done.usage, ReasoningTokens(done));
        WriteSse(chunk);
      }
      return EndSse();
    }
    Json choices = Json::array();
    for (size_t i = 0; i < choices_.size(); ++i) choices.push_back(ChoiceJson(static_cast<int>(i)));
    Json body = ChatCompletion(ctx_.meta, std::move(choices), done.usage);
    body["usage"] = UsageJson(done.usage, ReasoningTokens(done));
    Respond(body);
  }

 private:
  struct Acc {
    std::string reasoning, content, finish;
    Json tool_calls = Json::array();  // completed calls
    Json open_call;                   // the call being written (complete responses)
    Json logprobs = Json::array();
    int num_calls = 0;
  };

  Json CallHead(const ToolCallOut& piece) {
    return {{"id", ctx_.ids->Next("call_")}, {"type", "function"}, {"function", {{"name", piece.name}, {"arguments", ""}}}};
  }

  // A complete response lists completed calls only.
  void Collect(Acc& a, const ToolCallOut& piece) {
    if (piece.begins) a.open_call = CallHead(piece);
    if (a.open_call.is_null()) return;
    a.open_call["function"]["arguments"].get_ref<std::string&>() += piece.arguments;
    if (piece.completes) a.tool_calls.push_back(std::exchange(a.open_call, Json()));
  }

  // A call as OpenAI streams it: index, id, type and name with empty arguments, then the
  // arguments in the fragments the model wrote them in.
  void StreamToolCall(int choice, Acc& a, const ToolCallOut& piece) {
    if (piece.begins) {
      Json head = {{"index", a.num_calls++}};
      head.update(CallHead(piece));
      WriteChoice(choice, {{"tool_calls", Json::array({std::move(head)})}}, Json(), Json());
    }
    if (piece.arguments.empty()) return;
    Json fragment = {{"index", a.num_calls - 1}, {"function", {{"arguments", piece.arguments}}}};
    WriteChoice(choice, {{"tool_calls", Json::array({std::move(fragment)})}}, Json(), Json());
  }

  const int64_t* ReasoningTokens(const RequestDone& done) const { return ctx_.thinking ? &done.reasoning_tokens : nullptr; }

  void WriteChoice(int index, Json delta, Json logprobs, Json finish) {
    Json choice = {{"index", index}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
                   {"finish_reason", std::move(finish)}};
    WriteSse(ChatChunk(ctx_.meta, Json::array({std::move(choice)}), ctx_.include_usage));
  }

  Json ChoiceJson(int index) const {
    const Acc& a = choices_[static_cast<size_t>(index)];
    Json message = {{"role", "assistant"}};
    message["content"] = a.content.empty() && !a.tool_calls.empty() ? Json() : Json(a.content);
    if (ctx_.thinking) message["reasoning_content"] = a.reasoning;
    if (!a.tool_calls.empty()) message["tool_calls"] = a.tool_calls;
    message["refusal"] = nullptr;
    Json lp = ctx_.logprobs ? Json{{"content", a.logprobs}, {"refusal", nullptr}} : Json();
    return {{"index", index}, {"message", std::move(message)}, {"logprobs", std::move(lp)}, {"finish_reason", a.finish}};
  }

  std::vector<Acc> choices_;
};

class CompletionWriter final : public OpenAiWriter {
 public:
  explicit CompletionWriter(WriterContext ctx) : OpenAiWriter(std::move(ctx)) {}

  void Begin(int n) override {
    choices_.resize(static_cast<size_t>(n));
    for (Acc& a : choices_) a.logprobs = EmptyLogprobs();
    if (ctx_.stream) ctx_.exchange->StartStream(200, "text/event-stream", ctx_.headers);
  }

  void Delta(const ChoiceDelta& d) override {
    Acc& a = choices_[static_cast<size_t>(d.choice)];
    Json lp = ctx_.logprobs ? EmptyLogprobs() : Json();
    for (const protocol::TokenOutput& t : d.logprobs) {
      const std::string_view bytes = ctx_.tokenizer->TokenBytes(t.token);
      Json top = Json::object();
      for (const protocol::TokenLogprob& alt : t.top_logprobs)
        top[tokenizer::LossyUtf8(ctx_.tokenizer->TokenBytes(alt.token))] = alt.logprob;
      lp["tokens"].push_back(tokenizer::LossyUtf8(bytes));
      lp["token_logprobs"].push_back(t.logprob);
      lp["top_logprobs"].push_back(std::move(top));
      lp["text_offset"].push_back(a.text_offset);
      a.text_offset += static_cast<int64_t>(bytes.size());
    }
    if (!ctx_.stream) {
      a.text += d.content;
      if (lp.is_object())
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
          for (Json& v : lp[key]) a.logprobs[key].push_back(std::move(v));
      return;
    }
    if (d.content.empty() && d.logprobs.empty()) return;
    WriteChoice(d.choice, d.content, std::move(lp), Json());
  }

  void End(const ChoiceEnd& end) override {
    Acc& a = choices_[static_cast<size_t>(end.choice)];
    a.finish = end.finish == Finish::kLength ? "length" : "stop";
    if (ctx_.stream) WriteChoice(end.choice, "", Json(), a.finish);
  }

  void Done(const RequestDone& done) override {
    if (ctx_.stream) {
      if (ctx_.include_usage) {
        Json chunk = TextCompletion(ctx_.meta, Json::array(), nullptr, false);
        chunk["usage"] = UsageJson(done.usage);
        WriteSse(chunk);
      }
      return EndSse();
    }
    Json choices = Json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      const Acc& a = choices_[i];
      choices.push_back({{"index", static_cast<int>(i)}, {"text", a.text},
                         {"logprobs", ctx_.logprobs ? a.logprobs : Json()}, {"finish_reason", a.finish}});
    }
    Respond(TextCompletion(ctx_.meta, std::move(choices), &done.usage, false));
  }

 private:
  struct Acc {
    std::string text, finish;
    Json logprobs;
    int64_t text_offset = 0;  // bytes of token text so far
  };

  static Json EmptyLogprobs() {
    return Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
                {"text_offset", Json::array()}};
  }

  void WriteChoice(int index, const std::string& text, Json logprobs, Json finish) {
    Json choice = {{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish)}};
    WriteSse(TextCompletion(ctx_.meta, Json::array({std::move(choice)}), nullptr, ctx_.include_usage));
  }

  std::vector<Acc> choices_;
};

}  // namespace

std::unique_ptr<DialectWriter> MakeChatWriter(WriterContext ctx) { return std::make_unique<ChatWriter>(std::move(ctx)); }

std::unique_ptr<DialectWriter> MakeCompletionWriter(WriterContext ctx) {
  return std::make_unique<CompletionWriter>(std::move(ctx));
}

}  // namespace flashserve::api
