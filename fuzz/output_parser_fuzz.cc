// Model output text through the streaming output parser (reasoning, content, DSML tool calls):
// the first byte picks the encoding, thinking mode and piece size; however the text is split,
// the deltas add up to the same reasoning, content, completed tool calls, outcome and error
// (encoding/output_parser.h's invariant), and the one-shot ParseCompletion never crashes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "encoding/output_parser.h"

namespace {

using flashserve::encoding::EncodingVersion;
using flashserve::encoding::OutputParser;
using flashserve::encoding::ParseDelta;

struct Run {
  ParseDelta total;
  flashserve::encoding::OutputOutcome outcome;
  std::string error;
};

Run Parse(std::string_view text, EncodingVersion version, bool thinking, size_t piece) {
  OutputParser parser(version, thinking);
  Run run;
  for (size_t at = 0; at < text.size(); at += piece) run.total.Append(parser.Feed(text.substr(at, piece)));
  run.total.Append(parser.Finish());
  run.outcome = parser.outcome();
  run.error = parser.error() ? parser.error()->message + "|" + parser.error()->raw_text : "";
  return run;
}

// The completed calls (a call of a block that turns out malformed streams its name and first
// arguments, then never completes: how far it got depends on the split).
std::vector<flashserve::encoding::ToolCallPiece> Completed(const ParseDelta& d) {
  std::vector<flashserve::encoding::ToolCallPiece> out;
  for (const auto& c : d.tool_calls)
    if (c.completes) out.push_back(c);
  return out;
}

bool SameCalls(const ParseDelta& a, const ParseDelta& b) {
  const auto x = Completed(a), y = Completed(b);
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].index != y[i].index || x[i].name != y[i].name || x[i].arguments != y[i].arguments) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const EncodingVersion version = (mode & 1) ? EncodingVersion::kV41 : EncodingVersion::kV4;
  const bool thinking = (mode & 2) != 0;
  const size_t piece = 1 + (mode >> 2);  // 1..64 bytes per Feed
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const Run whole = Parse(text, version, thinking, text.size() + 1);
  const Run split = Parse(text, version, thinking, piece);
  if (whole.total.reasoning != split.total.reasoning || whole.total.content != split.total.content ||
      !SameCalls(whole.total, split.total) || whole.outcome != split.outcome || whole.error != split.error) {
    std::fprintf(stderr, "split into %zu-byte pieces differs:\n reasoning %d content %d calls %zu/%zu outcome %d/%d\n"
                 " error whole: %s\n error split: %s\n", piece, whole.total.reasoning == split.total.reasoning,
                 whole.total.content == split.total.content, whole.total.tool_calls.size(), split.total.tool_calls.size(),
                 static_cast<int>(whole.outcome), static_cast<int>(split.outcome), whole.error.c_str(), split.error.c_str());
    for (const auto* run : {&whole, &split})
      for (const auto& c : run->total.tool_calls)
        std::fprintf(stderr, " call %zu completes %d name %s args %s\n", c.index, c.completes, c.name.c_str(),
                     c.arguments.c_str());
    __builtin_trap();
  }
  (void)flashserve::encoding::ParseCompletion(text, version, thinking);
  return 0;
}
