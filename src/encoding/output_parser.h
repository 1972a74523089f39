// Model output text -> reasoning_content, content and tool calls, incrementally while streaming.
// Callers: api (one parser per generated choice) and tests. Not thread-safe: one instance per
// stream, fed from one thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "encoding/dsml.h"
#include "encoding/invoke_stream.h"
#include "encoding/version.h"

namespace flashserve::encoding {

struct ParsedToolCall {
  std::string name;       // as written by the model (may be "namespace::name" on V4.1)
  std::string arguments;  // JSON object text, built as the reference parser builds it
};

// Part of one tool call as the output streams. A call's first piece `begins` and carries its
// name; its arguments arrive in fragments whose concatenation is the call's arguments text; its
// last piece `completes`. A call in a block that turns out malformed never completes.
struct ToolCallPiece {
  size_t index = 0;  // the call's position in the output: 0, 1, ...
  bool begins = false;
  bool completes = false;
  std::string name;       // with `begins`
  std::string arguments;  // the next fragment (may be empty)
};

struct ParseDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallPiece> tool_calls;  // at most one piece per call
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  // What `later` adds after this delta, merged (one piece per call kept).
  void Append(ParseDelta later);
};

enum class OutputOutcome {
  kStop,                // text only
  kToolCalls,           // at least one tool call, all well formed
  kMalformedToolCall,   // a tool-call block broke the DSML rules; see error()
  kIncompleteToolCall,  // the text ended inside a tool-call block; see error()
};

struct OutputError {
  std::string message;   // the same however the text was split into deltas
  std::string raw_text;  // the output from the tool-call block's start marker to the end
};

// Splits the text after the generation header, following the reference parser
// (parse_message_from_completion_text): in thinking mode reasoning runs to `</think>`; content
// runs to `\n\n<｜DSML｜tool_calls` (V4.1: `<｜DSML｜ calls`) or `<｜end▁of▁sentence｜>`; each
// completed `invoke` becomes a tool call. Streaming rules beyond the reference: a suffix that
// could start a marker is held back until it is decided, so no partial markup reaches content;
// a tool-call block (after zero, one or two newlines) also ends reasoning; a stray `</think>`
// in content is dropped; text after the tool-call block or after EOS is ignored. A malformed
// block stops parsing and is reported through outcome()/error(), never as content. While a call
// is written its name and the arguments text no later byte can change stream out (InvokeStream).
// Invariant: for any split of a text into pieces, concatenating the deltas of Feed(piece)... and
// Finish() gives the same reasoning, content and completed tool calls.
class OutputParser {
 public:
  OutputParser(EncodingVersion version, bool thinking);

  ParseDelta Feed(std::string_view text);
  // End of output: releases held-back text; an open tool-call block becomes kIncompleteToolCall.
  ParseDelta Finish();

  OutputOutcome outcome() const;
  // Whether the output has reached a tool-call block (what follows its marker is not content).
  bool entered_tool_calls() const { return entered_tool_calls_; }
  // Reasoning or content bytes fed but not emitted yet (they may start a marker).
  size_t held_back_bytes() const {
    return stage_ == Stage::kReasoning || stage_ == Stage::kContent ? pending_.size() : 0;
  }
  const std::optional<OutputError>& error() const { return error_; }

 private:
  enum class Stage { kReasoning, kContent, kToolCalls, kFailed, kDone };

  void ScanText(ParseDelta& delta, bool at_end);
  void ScanToolCalls(ParseDelta& delta, size_t old_size, bool at_end);
  void ReadToolSteps(ParseDelta& delta, size_t old_size, bool at_end);
  void EnterToolCalls(std::string_view marker_tail);
  void CompleteCall(ParseDelta& delta, const DsmlCall& call, size_t end);
  ToolCallPiece& PieceFor(ParseDelta& delta);

  DsmlTags tags_;
  std::vector<std::string> markers_;  // what ends reasoning/content, see ScanText
  Stage stage_;
  std::string pending_;   // reasoning/content text not emitted yet
  std::string tool_buf_;  // the tool-call block, from its start marker
  size_t tool_pos_ = 0;   // where the next DSML step starts in tool_buf_
  size_t num_tool_calls_ = 0;  // completed calls
  bool entered_tool_calls_ = false;
  InvokeStream stream_;        // the call being written
  std::optional<OutputError> error_;
  OutputOutcome error_outcome_ = OutputOutcome::kStop;
};

struct ParsedMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
};

// A whole completion at once (the trailing EOS may be present or not). A malformed or unfinished
// tool-call block is a kBadModelOutput.
base::Result<ParsedMessage> ParseCompletion(std::string_view text, EncodingVersion version,
                                            bool thinking);

}  // namespace flashserve::encoding
