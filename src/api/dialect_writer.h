// What the generation core (GenerationJob) hands a dialect: per-choice deltas of reasoning,
// content and tool calls, each choice's end, the request's usage, or a failure; and the writer
// interface each dialect (Chat Completions, Completions, Messages, Responses) implements to turn
// them into its JSON and SSE. A writer lives on its exchange's strand, like the job that feeds it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "encoding/output_parser.h"
#include "net/api_error.h"
#include "net/exchange.h"
#include "protocol/generate.h"

namespace flashserve::api {

// A piece of one tool call (encoding/output_parser.h): the first `begins` with the name as the
// model wrote it ("namespace::name" on V4.1), arguments text follows in fragments, the last
// `completes`. A call that never completes (its block turned out malformed) is dropped from
// complete responses; a stream has already shown its start.
using ToolCallOut = encoding::ToolCallPiece;

struct ChoiceDelta {
  int choice = 0;
  std::string reasoning, content;
  std::vector<ToolCallOut> tool_calls;         // at most one piece per call
  std::vector<protocol::TokenOutput> logprobs;  // content tokens with their logprobs (when asked)
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty() && logprobs.empty(); }
};

enum class Finish {
  kEnd,         // end of sequence (or a stop token)
  kStopString,  // a stop string matched (ChoiceEnd::stop_string)
  kLength,      // max tokens
  kToolCalls,   // the model called tools
};

struct ChoiceEnd {
  int choice = 0;
  Finish finish = Finish::kEnd;
  std::string stop_string;  // kStopString
};

struct RequestDone {
  protocol::Usage usage;
  int64_t reasoning_tokens = 0;  // generated tokens up to and including </think>, all choices
};

class DialectWriter {
 public:
  virtual ~DialectWriter() = default;
  // The request was accepted: a stream sends its headers and opening events.
  virtual void Begin(int num_choices) = 0;
  virtual void Delta(const ChoiceDelta& delta) = 0;
  virtual void End(const ChoiceEnd& end) = 0;
  // Every choice ended: the complete response, or the stream's closing events.
  virtual void Done(const RequestDone& done) = 0;
  // The request failed: before Begin, a complete error response in the dialect's shape; after
  // it, the dialect's in-stream error, then the end of the stream.
  virtual void Fail(const net::ApiError& error, bool begun) = 0;
  // A stream waiting for its first token (a long prefill) shows it is alive: Messages' `ping`
  // event, an SSE comment elsewhere (clients skip it). Only after Begin, only when streaming.
  virtual void KeepAlive() = 0;
};

}  // namespace flashserve::api
