// Incremental reading of one DSML invoke (encoding/invoke_stream.h).
#include "encoding/invoke_stream.h"

#include <algorithm>
#include <initializer_list>

#include "encoding/prompt.h"
#include "encoding/python_json.h"

namespace flashserve::encoding {
namespace {

constexpr std::string_view kGap = ">\n";
constexpr std::string_view kParamName = " name=\"";
constexpr std::string_view kStringFlag = "\" string=\"";

// Length of the longest suffix of `text` that is a proper prefix of one of `terms`.
size_t HeldSuffix(std::string_view text, std::initializer_list<std::string_view> terms) {
  size_t held = 0;
  for (std::string_view term : terms) {
    for (size_t k = std::min(text.size(), term.size() - 1); k > held; --k) {
      if (term.starts_with(text.substr(text.size() - k))) {
        held = k;
        break;
      }
    }
  }
  return held;
}

// Bytes at the end of `text` that begin a UTF-8 sequence not yet complete.
size_t IncompleteUtf8Tail(std::string_view text) {
  for (size_t back = 1; back <= std::min<size_t>(3, text.size()); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// Where the first of `stops` starts at or after `from`, and which one.
size_t FindStop(std::string_view text, size_t from, std::initializer_list<std::string_view> stops,
                size_t* which) {
  size_t best = std::string_view::npos, index = 0;
  for (std::string_view stop : stops) {
    if (const size_t at = text.find(stop, from); at < best) {
      best = at;
      *which = index;
    }
    ++index;
  }
  return best;
}

// Where a search for `marker` may resume after `size` bytes were searched from `floor`.
size_t ResumeAt(size_t size, size_t floor, std::string_view marker) {
  return std::max(floor, size >= marker.size() ? size - marker.size() + 1 : 0);
}

std::string DsmlTag(std::string_view prefix, std::string_view name) {
  return std::string(prefix) + std::string(kDsmlToken) + std::string(name);
}

}  // namespace

InvokeStream::InvokeStream(const DsmlTags& tags)
    : invoke_start_(DsmlTag("<", tags.invoke)),
      invoke_end_(DsmlTag("</", tags.invoke)),
      param_start_(DsmlTag("<", tags.parameter)),
      param_end_(DsmlTag("/", tags.parameter)),
      gap_invoke_(std::string(kGap) + invoke_start_),
      gap_param_(std::string(kGap) + param_start_),
      gap_close_(std::string(kGap) + invoke_end_),
      value_end_("<" + param_end_),
      value_end_nl_("<\n" + param_end_) {}

void InvokeStream::Restart(size_t pos) {
  phase_ = Phase::kGap;
  pos_ = pos;
  num_params_ = 0;
  began_ = false;
  emitted_.clear();
}

InvokeStream::Progress InvokeStream::Advance(std::string_view text) {
  Progress out;
  for (bool moved = true; moved;) {
    switch (phase_) {
      case Phase::kGap: moved = StepGap(text); break;
      case Phase::kName: moved = StepName(text, out); break;
      case Phase::kParamHead: moved = StepParamHead(text, out); break;
      case Phase::kValue: moved = StepValue(text, out); break;
      case Phase::kAfterParam: moved = StepAfterParam(text); break;
      case Phase::kIdle: moved = false; break;
    }
  }
  return out;
}

void InvokeStream::Emit(std::string_view piece, Progress& out) {
  emitted_ += piece;
  out.arguments += piece;
}

void InvokeStream::EmitValue(std::string_view raw, Progress& out) {
  if (raw.empty()) return;
  if (!is_string_) return Emit(raw, out);
  std::string quoted;
  AppendPythonJsonString(raw, &quoted);  // escapes byte by byte, so pieces concatenate
  Emit(std::string_view(quoted).substr(1, quoted.size() - 2), out);
}

// ">\n<｜DSML｜invoke" starts a call; anything else (the block's end, or an error the
// authority reports) leaves nothing to stream.
bool InvokeStream::StepGap(std::string_view text) { return Enter(text, gap_invoke_, "", Phase::kName); }

// At pos_: `marker` moves to `then`; `other` (or a mismatch) ends the streaming of this call;
// a prefix of either waits for more text.
bool InvokeStream::Enter(std::string_view text, std::string_view marker, std::string_view other, Phase then) {
  const std::string_view rest = text.substr(std::min(pos_, text.size()));
  if (rest.starts_with(marker)) {
    pos_ += marker.size();
    scan_from_ = pos_;
    phase_ = then;
    return true;
  }
  const bool undecided = marker.starts_with(rest) || (!other.empty() && other.starts_with(rest));
  if (!undecided || (!other.empty() && rest.starts_with(other))) phase_ = Phase::kIdle;
  return false;
}

bool InvokeStream::StepName(std::string_view text, Progress& out) {
  size_t which = 0;
  const size_t stop = FindStop(text, scan_from_, {param_start_, invoke_end_}, &which);
  if (stop == std::string_view::npos) {
    scan_from_ = ResumeAt(text.size(), pos_, param_start_);  // the longer of the two stops
    return false;
  }
  std::optional<std::string> name = MatchInvokeName(text.substr(pos_, stop - pos_));
  if (!name) {
    phase_ = Phase::kIdle;
    return false;
  }
  began_ = out.began = true;
  out.name = std::move(*name);
  Emit("{", out);
  if (which == 1) {  // no parameters: the authority closes the call
    phase_ = Phase::kIdle;
    return false;
  }
  pos_ = stop + param_start_.size();
  scan_from_ = pos_;
  phase_ = Phase::kParamHead;
  return true;
}

// ` name="KEY" string="true|false">`: decided at the first `" string="` followed by a flag,
// as the authority's lazy match decides it.
bool InvokeStream::StepParamHead(std::string_view text, Progress& out) {
  if (const size_t end = text.find(param_end_, pos_); end != std::string_view::npos) {
    return FinishParam(text, end, out);  // the whole parameter arrived at once
  }
  const std::string_view rest = text.substr(pos_);
  if (!rest.starts_with(kParamName)) {
    if (!kParamName.starts_with(rest)) phase_ = Phase::kIdle;
    return false;
  }
  for (size_t at = text.find(kStringFlag, std::max(scan_from_, pos_ + kParamName.size()));
       at != std::string_view::npos; at = text.find(kStringFlag, at + 1)) {
    const std::string_view after = text.substr(at + kStringFlag.size());
    for (std::string_view flag : {std::string_view("true\">"), std::string_view("false\">")}) {
      if (after.starts_with(flag)) {
        const std::string_view key = text.substr(pos_ + kParamName.size(), at - pos_ - kParamName.size());
        is_string_ = flag[0] == 't';
        std::string head = num_params_ > 0 ? ", " : "";
        AppendPythonJsonString(key, &head);
        head += is_string_ ? ": \"" : ": ";
        Emit(head, out);
        value_at_ = value_sent_ = at + kStringFlag.size() + flag.size();
        scan_from_ = value_at_;
        phase_ = Phase::kValue;
        return true;
      }
      if (flag.starts_with(after)) {
        scan_from_ = at;  // the flag is still being written
        return false;
      }
    }
  }
  scan_from_ = ResumeAt(text.size(), pos_ + kParamName.size(), kStringFlag);
  return false;
}

// The value runs to `<` or `<\n` before `/｜DSML｜parameter`; bytes that could still become that
// ending (or an unfinished UTF-8 character) wait.
bool InvokeStream::StepValue(std::string_view text, Progress& out) {
  if (const size_t end = text.find(param_end_, scan_from_); end != std::string_view::npos) {
    return FinishParam(text, end, out);
  }
  scan_from_ = ResumeAt(text.size(), value_at_, param_end_);
  size_t upto = text.size() - HeldSuffix(text.substr(value_at_), {value_end_, value_end_nl_});
  upto = std::max(upto, value_sent_);
  upto -= IncompleteUtf8Tail(text.substr(value_sent_, upto - value_sent_));
  EmitValue(text.substr(value_sent_, upto - value_sent_), out);
  value_sent_ = upto;
  return false;
}

// The parameter closed at `end`: emit the rest of its value as the authority reads it.
bool InvokeStream::FinishParam(std::string_view text, size_t end, Progress& out) {
  std::optional<DsmlParam> param = MatchParam(text.substr(pos_, end - pos_));
  if (!param) {
    phase_ = Phase::kIdle;
    return false;
  }
  if (phase_ == Phase::kParamHead) {  // nothing of it was emitted yet
    std::string head = num_params_ > 0 ? ", " : "";
    AppendPythonJsonString(param->name, &head);
    head += param->is_string ? ": \"" : ": ";
    Emit(head, out);
    is_string_ = param->is_string;
    value_at_ = value_sent_ = 0;
  }
  const size_t sent = value_sent_ - value_at_;
  EmitValue(std::string_view(param->value).substr(std::min(sent, param->value.size())), out);
  if (is_string_) Emit("\"", out);
  ++num_params_;
  pos_ = end + param_end_.size();
  phase_ = Phase::kAfterParam;
  return true;
}

bool InvokeStream::StepAfterParam(std::string_view text) {
  return Enter(text, gap_param_, gap_close_, Phase::kParamHead);
}

}  // namespace flashserve::encoding
