// OpenAI Responses writer: the response object, or the typed SSE events with sequence numbers
// (response.created ... output items with their parts and deltas ... response.completed /
// .incomplete / .failed) (api/writers.h).
#include <fmt/format.h>

#include "api/writers.h"
#include "net/http_wire.h"

namespace flashserve::api {
namespace {

Json ResponsesUsage(const protocol::Usage& u, int64_t reasoning_tokens) {
  return Json{{"input_tokens", u.prompt_tokens},
              {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
              {"output_tokens", u.completion_tokens},
              {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
              {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

Json OrDefault(const Json& v, Json fallback) { return v.is_null() ? std::move(fallback) : v; }

class ResponsesWriter final : public DialectWriter {
 public:
  ResponsesWriter(WriterContext ctx, ResponsesWriterOptions options) : ctx_(std::move(ctx)), options_(std::move(options)) {}

  void Begin(int) override {
    if (!ctx_.stream) return;
    ctx_.exchange->StartStream(200, "text/event-stream", ctx_.headers);
    Json r = ResponseObject("in_progress");
    r["usage"] = nullptr;
    Event("response.created", {{"response", r}});
    Event("response.in_progress", {{"response", r}});
  }

  void Delta(const ChoiceDelta& d) override {
    if (ctx_.thinking && !reasoning_done_ && (!d.reasoning.empty() || !d.content.empty() || !d.tool_calls.empty()))
      OpenItem(Kind::kReasoning);
    if (!d.reasoning.empty()) {
      reasoning_ += d.reasoning;
      Event("response.reasoning_text.delta", PartRef(0, {{"delta", d.reasoning}}));
    }
    Json lp = Logprobs(d);
    if (!d.content.empty() || (!lp.empty() && open_ != Kind::kFunctionCall)) {
      OpenItem(Kind::kMessage);
      text_ += d.content;
      for (Json& e : lp) logprobs_.push_back(e);
      Event("response.output_text.delta", PartRef(0, {{"delta", d.content}, {"logprobs", std::move(lp)}}));
    }
    for (const ToolCallOut& call : d.tool_calls) FunctionCall(call);
  }

  void End(const ChoiceEnd& end) override {
    if (ctx_.thinking && !reasoning_done_) OpenItem(Kind::kReasoning);  // an empty reasoning is still handed back
    CloseItem();
    incomplete_ = end.finish == Finish::kLength;
  }

  void Done(const RequestDone& done) override {
    Json r = ResponseObject(incomplete_ ? "incomplete" : "completed");
    r["usage"] = ResponsesUsage(done.usage, done.reasoning_tokens);
    if (!ctx_.stream) {
      net::HttpResponse http;
      http.body = Dump(r);
      http.headers = ctx_.headers;
      return ctx_.exchange->Respond(std::move(http));
    }
    Event(incomplete_ ? "response.incomplete" : "response.completed", {{"response", std::move(r)}});
    ctx_.exchange->EndStream();
  }

  void KeepAlive() override {
    if (ctx_.stream) ctx_.exchange->Write(": keep-alive\n\n");
  }

  void Fail(const net::ApiError& error, bool begun) override {
    if (!ctx_.stream || !begun) return ctx_.exchange->Respond(net::ErrorResponse(error));
    Event("error", {{"code", error.code.empty() ? Json() : Json(error.code)}, {"message", error.message},
                    {"param", error.param.empty() ? Json() : Json(error.param)}});
    Json r = ResponseObject("failed");
    r["error"] = {{"code", error.code.empty() ? "server_error" : error.code}, {"message", error.message}};
    Event("response.failed", {{"response", std::move(r)}});
    ctx_.exchange->EndStream();
  }

 private:
  enum class Kind { kNone, kReasoning, kMessage, kFunctionCall };

  Json ResponseObject(const char* status) const {
    const Json& e = options_.echo;
    Json r;
    r["id"] = ctx_.meta.id;
    r["object"] = "response";
    r["created_at"] = ctx_.meta.created;
    r["status"] = status;
    r["error"] = nullptr;
    r["incomplete_details"] = std::string(status) == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json();
    r["instructions"] = e.value("instructions", Json());
    r["max_output_tokens"] = e.value("max_output_tokens", Json());
    r["model"] = ctx_.meta.model;
    r["output"] = output_;
    r["parallel_tool_calls"] = OrDefault(e.value("parallel_tool_calls", Json()), true);
    r["previous_response_id"] = nullptr;
    r["reasoning"] = OrDefault(e.value("reasoning", Json()), Json{{"effort", nullptr}, {"summary", nullptr}});
    r["store"] = false;
    r["temperature"] = OrDefault(e.value("temperature", Json()), 1.0);
    r["text"] = OrDefault(e.value("text", Json()), Json{{"format", {{"type", "text"}}}});
    r["tool_choice"] = OrDefault(e.value("tool_choice", Json()), "auto");
    r["tools"] = OrDefault(e.value("tools", Json()), Json::array());
    r["top_p"] = OrDefault(e.value("top_p", Json()), 1.0);
    r["truncation"] = OrDefault(e.value("truncation", Json()), "disabled");
    r["usage"] = nullptr;
    r["user"] = e.value("user", Json());
    r["prompt_cache_key"] = e.value("prompt_cache_key", Json());
    r["metadata"] = OrDefault(e.value("metadata", Json()), Json::object());
    return r;
  }

  Json Logprobs(const ChoiceDelta& d) const {
    Json out = Json::array();
    for (const protocol::TokenOutput& t : d.logprobs) out.push_back(ChatLogprobEntry(*ctx_.tokenizer, t));
    return out;
  }

  void Event(const char* type, Json payload) {
    if (!ctx_.stream) return;
    Json j;
    j["type"] = type;
    for (auto it = payload.begin(); it != payload.end(); ++it) j[it.key()] = std::move(it.value());
    j["sequence_number"] = sequence_++;
    ctx_.exchange->Write(net::SseEvent(type, Dump(j)));
  }

  Json ItemRef(Json extra) const {
    Json j = {{"item_id", item_["id"]}, {"output_index", static_cast<int>(output_.size())}};
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
    return j;
  }
  Json PartRef(int index, Json extra) const {
    Json j = ItemRef(std::move(extra));
    j["content_index"] = index;
    return j;
  }

  void OpenItem(Kind kind) {
    if (open_ == kind && kind != Kind::kFunctionCall) return;
    CloseItem();
    open_ = kind;
    if (kind == Kind::kReasoning) {
      item_ = {{"id", ctx_.ids->Next("rs_")}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", Json::array()}};
      Event("response.output_item.added", {{"output_index", output_.size()}, {"item", item_}});
      Event("response.content_part.added", PartRef(0, {{"part", {{"type", "reasoning_text"}, {"text", ""}}}}));
    } else if (kind == Kind::kMessage) {
      text_.clear();
      logprobs_ = Json::array();
      item_ = {{"id", ctx_.ids->Next("msg_")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
               {"content", Json::array()}};
      Event("response.output_item.added", {{"output_index", output_.size()}, {"item", item_}});
      Event("response.content_part.added", PartRef(0, {{"part", TextPart("")}}));
    }
  }

  Json TextPart(const std::string& text) const {
    Json part = {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}};
    if (ctx_.logprobs) part["logprobs"] = text.empty() ? Json::array() : logprobs_;
    return part;
  }

  void CloseItem() {
    if (open_ == Kind::kReasoning) {
      Event("response.reasoning_text.done", PartRef(0, {{"text", reasoning_}}));
      const Json part = {{"type", "reasoning_text"}, {"text", reasoning_}};
      Event("response.content_part.done", PartRef(0, {{"part", part}}));
      item_["content"] = Json::array({part});
      if (options_.summary) Summary();
      if (options_.encrypted_reasoning && options_.seal) item_["encrypted_content"] = options_.seal->Seal(reasoning_);
      reasoning_done_ = true;
    } else if (open_ == Kind::kMessage) {
      Event("response.output_text.done", PartRef(0, {{"text", text_}, {"logprobs", logprobs_}}));
      const Json part = TextPart(text_);
      Event("response.content_part.done", PartRef(0, {{"part", part}}));
      item_["status"] = "completed";
      item_["content"] = Json::array({part});
    }
    if (open_ == Kind::kFunctionCall && item_["status"] != "completed") {
      item_["status"] = "incomplete";
      if (!ctx_.stream) open_ = Kind::kNone;
    }
    if (open_ == Kind::kNone) return;
    Event("response.output_item.done", {{"output_index", output_.size()}, {"item", item_}});
    output_.push_back(std::move(item_));
    open_ = Kind::kNone;
  }

  // reasoning.summary: the reasoning text itself, as one summary part.
  void Summary() {
    const Json part = {{"type", "summary_text"}, {"text", reasoning_}};
    Event("response.reasoning_summary_part.added", ItemRef({{"summary_index", 0}, {"part", {{"type", "summary_text"}, {"text", ""}}}}));
    Event("response.reasoning_summary_text.delta", ItemRef({{"summary_index", 0}, {"delta", reasoning_}}));
    Event("response.reasoning_summary_text.done", ItemRef({{"summary_index", 0}, {"text", reasoning_}}));
    Event("response.reasoning_summary_part.done", ItemRef({{"summary_index", 0}, {"part", part}}));
    item_["summary"] = Json::array({part});
  }

  // A function_call item opens when the call begins; its arguments stream as the model writes
  // them. One that never completes (a malformed block) is left out of a complete response and
  // closed as `incomplete` in a stream.
  void FunctionCall(const ToolCallOut& piece) {
    if (piece.begins) {
      CloseItem();
      open_ = Kind::kFunctionCall;
      std::string name = piece.name, ns;
      if (const size_t sep = name.find("::"); sep != std::string::npos) {
        ns = name.substr(0, sep);
        name = name.substr(sep + 2);
      }
      item_ = {{"id", ctx_.ids->Next("fc_")}, {"type", "function_call"}, {"status", "in_progress"},
               {"call_id", ctx_.ids->Next("call_")}, {"name", name}, {"arguments", ""}};
      if (!ns.empty()) item_["namespace"] = ns;
      Event("response.output_item.added", {{"output_index", output_.size()}, {"item", item_}});
    }
    if (open_ != Kind::kFunctionCall) return;
    if (!piece.arguments.empty()) {
      item_["arguments"].get_ref<std::string&>() += piece.arguments;
      Event("response.function_call_arguments.delta", ItemRef({{"delta", piece.arguments}}));
    }
    if (!piece.completes) return;
    Event("response.function_call_arguments.done", ItemRef({{"name", item_["name"]}, {"arguments", item_["arguments"]}}));
    item_["status"] = "completed";
    CloseItem();
  }

  WriterContext ctx_;
  ResponsesWriterOptions options_;
  Kind open_ = Kind::kNone;
  Json item_;                      // the open item
  Json output_ = Json::array();    // closed items
  bool reasoning_done_ = false;
  bool incomplete_ = false;
  std::string reasoning_, text_;
  Json logprobs_ = Json::array();
  int64_t sequence_ = 0;
};

}  // namespace

std::unique_ptr<DialectWriter> MakeResponsesWriter(WriterContext ctx, ResponsesWriterOptions options) {
  return std::make_unique<ResponsesWriter>(std::move(ctx), std::move(options));
}

}  // namespace flashserve::api
