// Pre-tokenizer: HF `Split` stages (regex or literal, Isolated/Removed, invert) applied in
// sequence, each to the pieces of the previous one, with PCRE2 JIT. Built once by the loader and
// immutable; Split may run on many threads, each with its own PreTokenizerScratch.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace flashserve::tokenizer {

enum class SplitBehavior { kIsolated, kRemoved };

struct SplitSpec {
  std::string pattern;  // Oniguruma syntax when is_regex (as HF compiles it), else a literal
  bool is_regex = true;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
};

// Rewrites an Oniguruma pattern (the engine HF uses) into PCRE2 syntax with the same meaning:
// \s/\S -> White_Space, \d -> Nd, \w -> L|M|Nd|Pc, \h -> hex digit, ^/$ per line, and (when
// unicode16) general-category classes widened/narrowed from PCRE2's Unicode 14 to Unicode 16.
// Constructs whose meaning differs and that cannot be rewritten (\b, \W inside [...], \X, POSIX
// brackets, class intersections, nested classes, \Q, scripts) are kBadTokenizer.
base::Result<std::string> TranslateOnigurumaPattern(std::string_view pattern, bool unicode16 = true);
// True when text holds a character whose general category differs between Unicode 14 and 16;
// only such text needs the (slower) unicode16 patterns.
bool HasUnicodeDeltaChar(std::string_view text);
// Logs a warning when PCRE2's Unicode tables are newer than the Unicode 16 of HF tokenizers.
void WarnIfPcre2UnicodeIsNewer();

// Per-thread PCRE2 match state (match data, JIT stack grown on demand).
class PreTokenizerScratch {
 public:
  PreTokenizerScratch();
  ~PreTokenizerScratch();
  PreTokenizerScratch(const PreTokenizerScratch&) = delete;
  PreTokenizerScratch& operator=(const PreTokenizerScratch&) = delete;
  struct State;
  State* state() { return state_.get(); }

 private:
  std::unique_ptr<State> state_;
};

class PreTokenizer {
 public:
  static base::Result<PreTokenizer> Build(const std::vector<SplitSpec>& stages);
  PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the non-empty pieces of `text` (valid UTF-8) to *pieces, as views into text.
  void Split(std::string_view text, PreTokenizerScratch* scratch,
             std::vector<std::string_view>* pieces) const;
  size_t num_stages() const { return stages_.size(); }

 struct Stage;  // a compiled stage (defined in pre_tokenizer.cc)

 private:
  using Stages = std::vector<std::unique_ptr<Stage>>;
  void SplitStage(const Stages& stages, size_t stage_idx, std::string_view piece,
                  PreTokenizerScratch::State* state, std::vector<std::string_view>* pieces) const;
  Stages stages_;       // exact for every character (Unicode 16 classes)
  Stages fast_stages_;  // PCRE2's own classes: identical unless HasUnicodeDeltaChar(text)
};

}  // namespace flashserve::tokenizer
