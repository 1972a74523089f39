// DSML rendering and reading (encoding/dsml.h).
#include "encoding/dsml.h"

#include <initializer_list>
#include <optional>

#include <fmt/format.h>

#include "encoding/python_json.h"

namespace flashserve::encoding {
namespace {

// prefix + "｜DSML｜" + name + suffix.
std::string Tag(std::string_view prefix, std::string_view name, std::string_view suffix = "") {
  std::string tag;
  tag.reserve(prefix.size() + kDsmlToken.size() + name.size() + suffix.size());
  tag.append(prefix).append(kDsmlToken).append(name).append(suffix);
  return tag;
}

std::string ToolsSectionHead(const DsmlTags& tags) {
  const std::string block = Tag("", tags.block), invoke = Tag("", tags.invoke),
                    param = Tag("", tags.parameter);
  std::string s =
      "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can "
      "invoke tools by writing a \"<" +
      block + ">\" block like the following:\n\n";
  s += "<" + block + ">\n";
  s += "<" + invoke + " name=\"$TOOL_NAME\">\n";
  s += "<" + param + " name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + param +
       ">\n";
  s += "...\n</" + invoke + ">\n";
  s += "<" + invoke + " name=\"$TOOL_NAME2\">\n...\n</" + invoke + ">\n";
  s += "</" + block + ">\n\n";
  s += "String parameters should be specified as is and set `string=\"true\"`. For all other types "
       "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
       "`string=\"false\"`.\n\n";
  s +=
      "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
      "inside <think>...</think> BEFORE any tool calls or final response.\n\n";
  s += "Otherwise, output directly after </think> with tool calls or final response.\n\n";
  s += "### Available Tool Schemas\n\n";
  return s;
}

constexpr std::string_view kToolsSectionTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool "
    "calls.\n";

// The earliest occurrence of any stop at or after pos (the reference's _read_until_stop).
struct Found {
  size_t pos = std::string_view::npos;  // where the stop starts
  size_t stop = 0;                      // index into the stop list
  size_t end = 0;                       // just past the stop
};

std::optional<Found> FindFirst(std::string_view text, size_t pos,
                               std::initializer_list<std::string_view> stops) {
  Found best;
  size_t index = 0;
  for (std::string_view stop : stops) {
    size_t at = text.find(stop, pos);
    if (at < best.pos) best = {at, index, at + stop.size()};
    ++index;
  }
  if (best.pos == std::string_view::npos) return std::nullopt;
  return best;
}

// Error quotes are this long (or end at the end of the text), so they never depend on how the
// text was streamed.
constexpr size_t kQuoteBytes = 40;

std::string Snippet(std::string_view text) {
  if (text.size() <= kQuoteBytes) return std::string(text);
  size_t cut = kQuoteBytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;  // UTF-8 boundary
  return std::string(text.substr(0, cut)) + "...";
}

enum class GapResult { kFound, kNeedMore, kError };

// Between DSML elements the reference allows exactly ">\n" followed by one of `stops`.
GapResult ReadGap(std::string_view text, size_t pos, std::initializer_list<std::string_view> stops,
                  bool at_end, Found* found, std::string* error) {
  const std::string_view rest = text.substr(pos);
  if (!rest.starts_with(">\n")) {
    if (std::string_view(">\n").starts_with(rest)) return GapResult::kNeedMore;
  } else {
    const std::string_view after = rest.substr(2);
    bool partial = false;
    size_t index = 0;
    for (std::string_view stop : stops) {
      if (after.starts_with(stop)) {
        *found = {pos + 2, index, pos + 2 + stop.size()};
        return GapResult::kFound;
      }
      partial = partial || stop.starts_with(after);
      ++index;
    }
    if (partial) return GapResult::kNeedMore;
  }
  if (!at_end && rest.size() <= kQuoteBytes) return GapResult::kNeedMore;  // wait for a full quote
  *error = fmt::format("expected '>\\n' and a DSML tag between tool-call elements, got '{}'",
                       Snippet(rest));
  return GapResult::kError;
}

bool IsPySpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

DsmlStep Error(std::string message) {
  DsmlStep step;
  step.kind = DsmlStep::Kind::kError;
  step.error = std::move(message);
  return step;
}

}  // namespace

std::optional<std::string> MatchInvokeName(std::string_view content) {
  size_t i = 0;
  while (i < content.size() && IsPySpace(content[i])) ++i;
  // \s* backtracks, but `name="` starts with a non-space, so the longest run is the only choice.
  if (!content.substr(i).starts_with("name=\"")) return std::nullopt;
  std::string_view rest = content.substr(i + 6);
  if (rest.ends_with("\">\n\n")) return std::string(rest.substr(0, rest.size() - 4));
  if (rest.ends_with("\">\n")) return std::string(rest.substr(0, rest.size() - 3));
  return std::nullopt;
}

std::optional<DsmlParam> MatchParam(std::string_view content) {
  if (!content.starts_with(" name=\"")) return std::nullopt;
  std::string_view body = content.substr(7);
  std::string_view tail = body.ends_with("<\n") ? "<\n" : body.ends_with("<") ? "<" : "";
  if (tail.empty()) return std::nullopt;
  for (size_t at = body.find("\" string=\""); at != std::string_view::npos;
       at = body.find("\" string=\"", at + 1)) {
    for (std::string_view flag : {std::string_view("true\">"), std::string_view("false\">")}) {
      size_t value_at = at + 10 + flag.size();
      if (body.substr(at + 10).starts_with(flag) && value_at + tail.size() <= body.size()) {
        return DsmlParam{std::string(body.substr(0, at)), flag == "true\">",
                         std::string(body.substr(value_at, body.size() - tail.size() - value_at))};
      }
    }
  }
  return std::nullopt;
}

DsmlTags TagsFor(EncodingVersion version) {
  if (version == EncodingVersion::kV4) return {"tool_calls", "invoke", "parameter"};
  return {" calls", " invoke", " parameter"};
}

std::string BlockStartMarker(const DsmlTags& tags) { return Tag("<", tags.block); }

void AppendToolsSection(PieceList& pieces, const DsmlTags& tags,
                        const std::vector<std::string>& schema_lines) {
  AppendMarkup(pieces, ToolsSectionHead(tags));
  for (size_t i = 0; i < schema_lines.size(); ++i) {
    if (i > 0) AppendText(pieces, "\n");
    AppendText(pieces, schema_lines[i]);
  }
  AppendMarkup(pieces, kToolsSectionTail);
}

void AppendToolCallsBlock(PieceList& pieces, const DsmlTags& tags,
                          const std::vector<DsmlCall>& calls) {
  const std::string invoke = Tag("", tags.invoke), param = Tag("", tags.parameter);
  AppendMarkup(pieces, Tag("\n\n<", tags.block, ">\n"));
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) AppendText(pieces, "\n");
    AppendMarkup(pieces, "<" + invoke + " name=\"");
    AppendText(pieces, calls[i].name);
    AppendText(pieces, "\">\n");
    for (size_t j = 0; j < calls[i].params.size(); ++j) {
      const DsmlParam& p = calls[i].params[j];
      if (j > 0) AppendText(pieces, "\n");
      AppendMarkup(pieces, "<" + param + " name=\"");
      AppendText(pieces, p.name);
      AppendText(pieces, p.is_string ? "\" string=\"true\">" : "\" string=\"false\">");
      AppendText(pieces, p.value);
      AppendMarkup(pieces, "</" + param + ">");
    }
    AppendMarkup(pieces, "\n</" + invoke + ">");
  }
  AppendMarkup(pieces, Tag("\n</", tags.block, ">"));
}

std::string ArgumentsJson(const std::vector<DsmlParam>& params) {
  std::string out = "{";
  for (size_t i = 0; i < params.size(); ++i) {
    if (i > 0) out += ", ";
    AppendPythonJsonString(params[i].name, &out);
    out += ": ";
    if (params[i].is_string) {
      AppendPythonJsonString(params[i].value, &out);
    } else {
      out += params[i].value;
    }
  }
  return out + "}";
}

DsmlStep ReadDsmlStep(std::string_view text, size_t pos, const DsmlTags& tags, bool at_end) {
  const std::string invoke_start = Tag("<", tags.invoke), invoke_end = Tag("</", tags.invoke);
  const std::string param_start = Tag("<", tags.parameter), param_end = Tag("/", tags.parameter);
  const std::string block_end = Tag("</", tags.block, ">");
  Found found;
  std::string error;
  GapResult gap = ReadGap(text, pos, {invoke_start, block_end}, at_end, &found, &error);
  if (gap != GapResult::kFound) {
    return gap == GapResult::kError ? Error(std::move(error)) : DsmlStep{};
  }
  if (found.stop == 1) {
    DsmlStep step;
    step.kind = DsmlStep::Kind::kBlockEnd;
    step.end = found.end;
    return step;
  }
  std::optional<Found> stop = FindFirst(text, found.end, {param_start, invoke_end});
  if (!stop) return {};
  DsmlStep step;
  std::string_view name_content = text.substr(found.end, stop->pos - found.end);
  std::optional<std::string> name = MatchInvokeName(name_content);
  if (!name) return Error(fmt::format("malformed tool name: '{}'", Snippet(name_content)));
  step.call.name = std::move(*name);
  while (stop->stop == 0) {  // a parameter follows
    std::optional<Found> value_end = FindFirst(text, stop->end, {param_end});
    if (!value_end) return {};
    std::string_view content = text.substr(stop->end, value_end->pos - stop->end);
    std::optional<DsmlParam> param = MatchParam(content);
    if (!param) return Error(fmt::format("malformed parameter: '{}'", Snippet(content)));
    for (const DsmlParam& seen : step.call.params) {
      if (seen.name == param->name) {
        return Error(fmt::format("duplicate parameter name '{}'", seen.name));
      }
    }
    step.call.params.push_back(std::move(*param));
    gap = ReadGap(text, value_end->end, {param_start, invoke_end}, at_end, &found, &error);
    if (gap != GapResult::kFound) {
      return gap == GapResult::kError ? Error(std::move(error)) : DsmlStep{};
    }
    stop = found;
  }
  step.kind = DsmlStep::Kind::kCall;
  step.end = stop->end;
  return step;
}

}  // namespace flashserve::encoding
