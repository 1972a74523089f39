// Anthropic Messages writer: the message object, or the named SSE events message_start,
// content_block_start/delta/stop (thinking with its sealed signature, text, tool_use with
// input_json_delta fragments), message_delta and message_stop (api/writers.h).
#include <fmt/format.h>

#include "api/writers.h"
#include "net/http_wire.h"

namespace flashserve::api {
namespace {

const char* StopReason(Finish f) {
  switch (f) {
    case Finish::kStopString: return "stop_sequence";
    case Finish::kLength: return "max_tokens";
    case Finish::kToolCalls: return "tool_use";
    default: return "end_turn";
  }
}

// input_tokens = uncached prompt tokens; input + cache_read = the prompt.
Json MessagesUsage(const protocol::Usage& u) {
  return Json{{"input_tokens", u.cache_miss_tokens()}, {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", u.cached_tokens}, {"output_tokens", u.completion_tokens}};
}

class MessagesWriter final : public DialectWriter {
 public:
  MessagesWriter(WriterContext ctx, MessagesWriterOptions options) : ctx_(std::move(ctx)), options_(options) {}

  void Begin(int) override {
    if (!ctx_.stream) return;
    ctx_.exchange->StartStream(200, "text/event-stream", ctx_.headers);
    Json message = MessageHead();
    message["content"] = Json::array();
    message["usage"] = {{"input_tokens", ctx_.prompt_tokens}, {"cache_creation_input_tokens", 0},
                        {"cache_read_input_tokens", 0}, {"output_tokens", 0}};
    Event("message_start", {{"type", "message_start"}, {"message", std::move(message)}});
    Event("ping", {{"type", "ping"}});
  }

  void Delta(const ChoiceDelta& d) override {
    if (ctx_.thinking && !thinking_done_ && (!d.reasoning.empty() || !d.content.empty() || !d.tool_calls.empty()))
      OpenBlock(Block::kThinking);
    if (!d.reasoning.empty()) {
      reasoning_ += d.reasoning;
      if (!options_.omit_thinking) BlockDelta({{"type", "thinking_delta"}, {"thinking", d.reasoning}});
    }
    if (!d.content.empty()) {
      OpenBlock(Block::kText);
      text_ += d.content;
      BlockDelta({{"type", "text_delta"}, {"text", d.content}});
    }
    for (const ToolCallOut& call : d.tool_calls) ToolUse(call);
  }

  void End(const ChoiceEnd& end) override {
    if (ctx_.thinking && !thinking_done_) OpenBlock(Block::kThinking);  // an empty reasoning is still handed back
    CloseBlock();
    stop_reason_ = StopReason(end.finish);
    if (end.finish == Finish::kStopString) stop_sequence_ = end.stop_string;
  }

  void Done(const RequestDone& done) override {
    if (ctx_.stream) {
      Event("message_delta", {{"type", "message_delta"},
                              {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", StopSequence()}}},
                              {"usage", MessagesUsage(done.usage)}});
      Event("message_stop", {{"type", "message_stop"}});
      return ctx_.exchange->EndStream();
    }
    Json message = MessageHead();
    message["content"] = std::move(content_);
    message["stop_reason"] = stop_reason_;
    message["stop_sequence"] = StopSequence();
    message["usage"] = MessagesUsage(done.usage);
    net::HttpResponse r;
    r.body = Dump(message);
    r.headers = ctx_.headers;
    ctx_.exchange->Respond(std::move(r));
  }

  void KeepAlive() override { Event("ping", {{"type", "ping"}}); }

  void Fail(const net::ApiError& error, bool begun) override {
    if (!ctx_.stream || !begun) return ctx_.exchange->Respond(net::ErrorResponse(error, net::ErrorDialect::kAnthropic));
    ctx_.exchange->Write(net::SseEvent("error", net::ErrorBody(error, net::ErrorDialect::kAnthropic)));
    ctx_.exchange->EndStream();
  }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };

  Json MessageHead() const {
    return Json{{"id", ctx_.meta.id}, {"type", "message"}, {"role", "assistant"}, {"model", ctx_.meta.model},
                {"content", Json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr}};
  }
  Json StopSequence() const { return stop_sequence_.empty() ? Json() : Json(stop_sequence_); }

  void Event(const char* name, const Json& payload) {
    if (ctx_.stream) ctx_.exchange->Write(net::SseEvent(name, Dump(payload)));
  }
  void BlockDelta(Json delta) {
    Event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
  }

  void OpenBlock(Block kind, Json block = Json()) {
    if (open_ == kind && kind != Block::kToolUse) return;
    CloseBlock();
    if (kind == Block::kThinking) block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
    if (kind == Block::kText) {
      block = {{"type", "text"}, {"text", ""}};
      text_.clear();
    }
    open_ = kind;
    ++index_;
    Event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
    if (!ctx_.stream) content_.push_back(std::move(block));
  }

  void CloseBlock() {
    if (open_ == Block::kNone) return;
    if (open_ == Block::kThinking) {
      const std::string signature = options_.seal ? options_.seal->Seal(reasoning_) : "";
      BlockDelta({{"type", "signature_delta"}, {"signature", signature}});
      if (!ctx_.stream) {
        content_.back()["thinking"] = options_.omit_thinking ? "" : reasoning_;
        content_.back()["signature"] = signature;
      }
      thinking_done_ = true;
    }
    if (open_ == Block::kText && !ctx_.stream) content_.back()["text"] = text_;
    Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_ = Block::kNone;
  }

  // A stream opens the tool_use block when the call begins and sends its input as the model
  // writes it; a complete message carries completed calls only, with the parsed input.
  void ToolUse(const ToolCallOut& piece) {
    if (piece.begins) {
      tool_id_ = ctx_.ids->Next("toolu_");
      tool_name_ = piece.name;
      tool_input_.clear();
      if (ctx_.stream)
        OpenBlock(Block::kToolUse, {{"type", "tool_use"}, {"id", tool_id_}, {"name", tool_name_}, {"input", Json::object()}});
    }
    tool_input_ += piece.arguments;
    if (ctx_.stream) {
      if (open_ == Block::kToolUse && !piece.arguments.empty())
        BlockDelta({{"type", "input_json_delta"}, {"partial_json", piece.arguments}});
      if (piece.completes) CloseBlock();
      return;
    }
    if (!piece.completes) return;
    Json input = Json::parse(tool_input_, nullptr, false);
    if (!input.is_object()) input = Json::object();
    OpenBlock(Block::kToolUse, {{"type", "tool_use"}, {"id", tool_id_}, {"name", tool_name_}, {"input", std::move(input)}});
    CloseBlock();
  }

  WriterContext ctx_;
  MessagesWriterOptions options_;
  Block open_ = Block::kNone;
  int index_ = -1;
  bool thinking_done_ = false;
  std::string reasoning_, text_;
  std::string tool_id_, tool_name_, tool_input_;  // the call being written
  Json content_ = Json::array();  // non-streaming
  std::string stop_reason_ = "end_turn";
  std::string stop_sequence_;
};

}  // namespace

std::unique_ptr<DialectWriter> MakeMessagesWriter(WriterContext ctx, MessagesWriterOptions options) {
  return std::make_unique<MessagesWriter>(std::move(ctx), options);
}

}  // namespace flashserve::api
