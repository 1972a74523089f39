// DSML, the markup of DeepSeek tool calls: tag names per version, the "## Tools" prompt section,
// rendering of assistant tool-call blocks, and the reader of one `invoke` element used by the
// output parser. Callers: the encoders and encoding/output_parser. Pure functions, any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "encoding/prompt.h"
#include "encoding/version.h"

namespace flashserve::encoding {

// Tag names after the ｜DSML｜ token: V4 `tool_calls`/`invoke`/`parameter`, V4.1 the
// leading-space forms ` calls`/` invoke`/` parameter`.
struct DsmlTags {
  std::string_view block;
  std::string_view invoke;
  std::string_view parameter;
};
DsmlTags TagsFor(EncodingVersion version);

// "<｜DSML｜" + block: what starts a tool-call block in model output (after "\n\n").
std::string BlockStartMarker(const DsmlTags& tags);

struct DsmlParam {
  std::string name;
  bool is_string = false;  // string="true": value is raw text; otherwise JSON text
  std::string value;
};

struct DsmlCall {
  std::string name;
  std::vector<DsmlParam> params;
};

// "## Tools ..." with one JSON schema per line (already serialised).
void AppendToolsSection(PieceList& pieces, const DsmlTags& tags,
                        const std::vector<std::string>& schema_lines);
// "\n\n<｜DSML｜block>\n<invoke ...>...</invoke>\n...\n</｜DSML｜block>". Names, keys and values
// are user text and stay text pieces.
void AppendToolCallsBlock(PieceList& pieces, const DsmlTags& tags,
                          const std::vector<DsmlCall>& calls);

// The arguments JSON the reference parser builds: {"k": "string value", "n": <raw JSON text>}.
std::string ArgumentsJson(const std::vector<DsmlParam>& params);

// Reads one step of a tool-call block, starting where the block-start marker (or the previous
// `</｜DSML｜invoke`) ended. Follows the reference parser's rules exactly. `at_end`: no more text
// will come. The result (including the error text) does not depend on how much text beyond
// what decides it is available.
struct DsmlStep {
  enum class Kind {
    kNeedMore,  // `text` ends before the step is complete
    kCall,      // one invoke read; `end` is just past its closing `</｜DSML｜invoke`
    kBlockEnd,  // the block closed; `end` is just past `</｜DSML｜block>`
    kError,     // malformed; `error` says why
  };
  Kind kind = Kind::kNeedMore;
  size_t end = 0;
  DsmlCall call;
  std::string error;
};
DsmlStep ReadDsmlStep(std::string_view text, size_t pos, const DsmlTags& tags, bool at_end);

// The reader's two element matchers, shared with InvokeStream. An invoke's head, between
// `<｜DSML｜invoke` and the next tag: ^\s*name="(.*?)">\n$ (DOTALL; `$` may sit before a final
// newline). A parameter, between `<｜DSML｜parameter` and `/｜DSML｜parameter`:
// ^ name="(.*?)" string="(true|false)">(.*?)<$ (DOTALL).
std::optional<std::string> MatchInvokeName(std::string_view content);
std::optional<DsmlParam> MatchParam(std::string_view content);

}  // namespace flashserve::encoding
