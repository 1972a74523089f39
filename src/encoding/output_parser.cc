// Streaming parser of model output (encoding/output_parser.h).
#include "encoding/output_parser.h"

#include <fmt/format.h>

namespace flashserve::encoding {
namespace {

// Indexes into OutputParser::markers_.
constexpr size_t kThinkEndMarker = 0;
constexpr size_t kEosMarker = 1;

// Bytes before the old end of the text in which a newly completed DSML marker can start.
constexpr size_t kToolScanOverlap = 40;
// A step this short is always re-read (it may be waiting for the bytes an error quote needs).
constexpr size_t kShortStep = 64;

// Length of the longest suffix of `text` that is a proper prefix of one of `markers`.
size_t HeldBackLength(std::string_view text, const std::vector<std::string>& markers) {
  size_t held = 0;
  for (const std::string& marker : markers) {
    for (size_t k = std::min(text.size(), marker.size() - 1); k > held; --k) {
      if (text.substr(text.size() - k) == std::string_view(marker).substr(0, k)) {
        held = k;
        break;
      }
    }
  }
  return held;
}

}  // namespace

void ParseDelta::Append(ParseDelta later) {
  reasoning += later.reasoning;
  content += later.content;
  for (ToolCallPiece& piece : later.tool_calls) {
    if (!tool_calls.empty() && tool_calls.back().index == piece.index) {
      ToolCallPiece& last = tool_calls.back();
      last.arguments += piece.arguments;
      last.completes = piece.completes;
      if (piece.begins) {
        last.begins = true;
        last.name = std::move(piece.name);
      }
    } else {
      tool_calls.push_back(std::move(piece));
    }
  }
}

OutputParser::OutputParser(EncodingVersion version, bool thinking)
    : tags_(TagsFor(version)),
      stage_(thinking ? Stage::kReasoning : Stage::kContent),
      stream_(tags_) {
  const std::string block_start = BlockStartMarker(tags_);
  markers_ = {std::string(kThinkEndToken), std::string(kEosToken), "\n\n" + block_start,
              "\n" + block_start, block_start};
}

void OutputParser::EnterToolCalls(std::string_view marker_tail) {
  stage_ = Stage::kToolCalls;
  entered_tool_calls_ = true;
  tool_buf_ = BlockStartMarker(tags_);
  tool_pos_ = tool_buf_.size();
  tool_buf_ += marker_tail;
  stream_.Restart(tool_pos_);
}

ToolCallPiece& OutputParser::PieceFor(ParseDelta& delta) {
  if (delta.tool_calls.empty() || delta.tool_calls.back().index != num_tool_calls_) {
    delta.tool_calls.emplace_back();
    delta.tool_calls.back().index = num_tool_calls_;
  }
  return delta.tool_calls.back();
}

// The authority read a whole call: send what the stream has not.
void OutputParser::CompleteCall(ParseDelta& delta, const DsmlCall& call, size_t end) {
  const std::string arguments = ArgumentsJson(call.params);
  const std::string& sent = stream_.emitted();
  if (!arguments.starts_with(sent)) {  // cannot happen (tests check every split); never hide it
    error_ = OutputError{"streamed tool-call arguments diverged from the call", tool_buf_};
    error_outcome_ = OutputOutcome::kMalformedToolCall;
    stage_ = Stage::kFailed;
    return;
  }
  ToolCallPiece& piece = PieceFor(delta);
  if (!stream_.began()) {
    piece.begins = true;
    piece.name = call.name;
  }
  piece.arguments += arguments.substr(sent.size());
  piece.completes = true;
  ++num_tool_calls_;
  tool_pos_ = end;
  stream_.Restart(end);
}

void OutputParser::ScanText(ParseDelta& delta, bool at_end) {
  while (stage_ == Stage::kReasoning || stage_ == Stage::kContent) {
    std::string& sink = stage_ == Stage::kReasoning ? delta.reasoning : delta.content;
    size_t best = std::string::npos, which = 0;
    for (size_t i = 0; i < markers_.size(); ++i) {
      size_t pos = pending_.find(markers_[i]);
      if (pos < best) {
        best = pos;
        which = i;
      }
    }
    if (best == std::string::npos) {
      const size_t emit = pending_.size() - (at_end ? 0 : HeldBackLength(pending_, markers_));
      sink.append(pending_, 0, emit);
      pending_.erase(0, emit);
      return;
    }
    sink.append(pending_, 0, best);
    std::string rest = pending_.substr(best + markers_[which].size());
    pending_.clear();
    if (which == kThinkEndMarker) {
      stage_ = Stage::kContent;  // in content, a stray </think> is dropped
      pending_ = std::move(rest);
    } else if (which == kEosMarker) {
      stage_ = Stage::kDone;
    } else {
      EnterToolCalls(rest);
    }
  }
}

void OutputParser::ScanToolCalls(ParseDelta& delta, size_t old_size, bool at_end) {
  ReadToolSteps(delta, old_size, at_end);
  if (stage_ != Stage::kToolCalls || at_end) return;
  InvokeStream::Progress progress = stream_.Advance(tool_buf_);
  if (!progress.began && progress.arguments.empty()) return;
  ToolCallPiece& piece = PieceFor(delta);
  piece.begins = piece.begins || progress.began;
  if (progress.began) piece.name = std::move(progress.name);
  piece.arguments += progress.arguments;
}

void OutputParser::ReadToolSteps(ParseDelta& delta, size_t old_size, bool at_end) {
  // A step can only complete once a DSML marker lands near the new text; skip long rescans
  // otherwise.
  if (!at_end && old_size > 0 && tool_buf_.size() - tool_pos_ > kShortStep) {
    const size_t from = old_size > kToolScanOverlap ? old_size - kToolScanOverlap : 0;
    if (tool_buf_.find(kDsmlToken, from) == std::string::npos) return;
  }
  while (stage_ == Stage::kToolCalls) {
    DsmlStep step = ReadDsmlStep(tool_buf_, tool_pos_, tags_, at_end);
    switch (step.kind) {
      case DsmlStep::Kind::kNeedMore:
        return;
      case DsmlStep::Kind::kCall:
        CompleteCall(delta, step.call, step.end);
        if (stage_ == Stage::kFailed) return;
        break;
      case DsmlStep::Kind::kBlockEnd:
        stage_ = Stage::kDone;
        return;
      case DsmlStep::Kind::kError:
        error_ = OutputError{"malformed tool call: " + step.error, tool_buf_};
        error_outcome_ = OutputOutcome::kMalformedToolCall;
        stage_ = Stage::kFailed;
        return;
    }
  }
}

ParseDelta OutputParser::Feed(std::string_view text) {
  ParseDelta delta;
  if (stage_ == Stage::kToolCalls) {
    const size_t old_size = tool_buf_.size();
    tool_buf_ += text;
    ScanToolCalls(delta, old_size, /*at_end=*/false);
  } else if (stage_ == Stage::kFailed) {
    error_->raw_text += text;
  } else if (stage_ != Stage::kDone) {
    pending_ += text;
    ScanText(delta, /*at_end=*/false);
    if (stage_ == Stage::kToolCalls) ScanToolCalls(delta, 0, /*at_end=*/false);
  }
  return delta;
}

ParseDelta OutputParser::Finish() {
  ParseDelta delta;
  if (stage_ == Stage::kReasoning || stage_ == Stage::kContent) ScanText(delta, /*at_end=*/true);
  if (stage_ == Stage::kToolCalls) {
    ScanToolCalls(delta, 0, /*at_end=*/true);
    if (stage_ == Stage::kToolCalls) {
      error_ = OutputError{"the output ended inside a tool-call block", tool_buf_};
      error_outcome_ = OutputOutcome::kIncompleteToolCall;
    }
  }
  stage_ = Stage::kDone;
  return delta;
}

OutputOutcome OutputParser::outcome() const {
  if (error_.has_value()) return error_outcome_;
  return num_tool_calls_ > 0 ? OutputOutcome::kToolCalls : OutputOutcome::kStop;
}

base::Result<ParsedMessage> ParseCompletion(std::string_view text, EncodingVersion version,
                                            bool thinking) {
  OutputParser parser(version, thinking);
  ParsedMessage message;
  for (ParseDelta delta : {parser.Feed(text), parser.Finish()}) {
    message.reasoning_content += delta.reasoning;
    message.content += delta.content;
    for (ToolCallPiece& piece : delta.tool_calls) {
      if (piece.begins || message.tool_calls.empty()) message.tool_calls.push_back({std::move(piece.name), ""});
      message.tool_calls.back().arguments += piece.arguments;
    }
  }
  if (parser.error().has_value()) {
    return base::MakeError(base::ErrorCode::kBadModelOutput, parser.error()->message);
  }
  return message;
}

}  // namespace flashserve::encoding
