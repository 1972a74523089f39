// Split pre-tokenizer stages on PCRE2 JIT (tokenizer/pre_tokenizer.h). Iteration follows HF's
// Oniguruma `find_iter`: leftmost matches, an empty match right after the previous match is
// skipped by one character, and gaps between matches are pieces too.
#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>


#include <fmt/format.h>

#include "base/check.h"

namespace flashserve::tokenizer {

// ---- scratch ----

struct PreTokenizerScratch::State {
  pcre2_match_data* match_data = nullptr;
  pcre2_match_context* match_context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ~State() {
    pcre2_match_data_free(match_data);
    pcre2_match_context_free(match_context);
    pcre2_jit_stack_free(jit_stack);
  }
};

PreTokenizerScratch::PreTokenizerScratch() : state_(std::make_unique<State>()) {
  state_->match_data = pcre2_match_data_create(1, nullptr);
  FS_CHECK(state_->match_data != nullptr, "pcre2_match_data_create failed");
}

PreTokenizerScratch::~PreTokenizerScratch() = default;

// ---- stages ----

struct PreTokenizer::Stage {
  pcre2_code* code = nullptr;
  bool jit = false;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  ~Stage() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;


namespace {

base::Error BadPattern(std::string_view pattern, std::string_view why) {
  return base::MakeError(base::ErrorCode::kBadTokenizer, fmt::format("Split regex \"{}\": {}", pattern, why));
}

using CompileContext = std::unique_ptr<pcre2_compile_context, decltype(&pcre2_compile_context_free)>;

base::Status CompileStage(const SplitSpec& spec, bool unicode16, pcre2_compile_context* ctx, PreTokenizer::Stage* stage) {
  std::string pattern = spec.pattern;
  uint32_t options = PCRE2_UTF | PCRE2_MULTILINE;
  if (spec.is_regex) {
    FS_ASSIGN_OR_RETURN(pattern, TranslateOnigurumaPattern(spec.pattern, unicode16));
  } else {
    options = PCRE2_UTF | PCRE2_LITERAL;  // a literal string (HF escapes it)
  }
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  stage->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                              &error_code, &error_offset, ctx);
  if (stage->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return BadPattern(spec.pattern, fmt::format("PCRE2 compile error at {}: {}", error_offset,
                                                reinterpret_cast<const char*>(message)));
  }
  stage->jit = pcre2_jit_compile(stage->code, PCRE2_JIT_COMPLETE) == 0;
  stage->behavior = spec.behavior;
  stage->invert = spec.invert;
  return base::Status::Ok();
}

}  // namespace

base::Result<PreTokenizer> PreTokenizer::Build(const std::vector<SplitSpec>& specs) {
  PreTokenizer pre;
  if (!specs.empty()) WarnIfPcre2UnicodeIsNewer();
  CompileContext ctx(pcre2_compile_context_create(nullptr), &pcre2_compile_context_free);
  pcre2_set_newline(ctx.get(), PCRE2_NEWLINE_LF);
  for (const SplitSpec& spec : specs) {
    if (spec.pattern.empty()) return base::MakeError(base::ErrorCode::kBadTokenizer, "Split with an empty pattern");
    for (bool unicode16 : {true, false}) {
      auto stage = std::make_unique<Stage>();
      FS_RETURN_IF_ERROR(CompileStage(spec, unicode16, ctx.get(), stage.get()));
      (unicode16 ? pre.stages_ : pre.fast_stages_).push_back(std::move(stage));
    }
  }
  return pre;
}

namespace {

// Finds the leftmost match at or after `from`; false when there is none.
bool FindMatch(pcre2_code* code, bool jit, std::string_view subject, size_t from,
               PreTokenizerScratch::State* state, size_t* start, size_t* end) {
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = jit ? pcre2_jit_match(code, data, subject.size(), from, 0, state->match_data, state->match_context)
               : pcre2_match(code, data, subject.size(), from, PCRE2_NO_UTF_CHECK, state->match_data,
                             state->match_context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT && state->jit_stack == nullptr) {
    // Deep backtracking on a long piece: retry once with a large JIT stack (grown lazily).
    state->jit_stack = pcre2_jit_stack_create(64 * 1024, 512 * 1024 * 1024, nullptr);
    state->match_context = pcre2_match_context_create(nullptr);
    FS_CHECK(state->jit_stack != nullptr && state->match_context != nullptr, "PCRE2 JIT stack allocation failed");
    pcre2_jit_stack_assign(state->match_context, nullptr, state->jit_stack);
    pcre2_set_heap_limit(state->match_context, 4u * 1024 * 1024);  // KiB, interpreter fallback
    pcre2_set_match_limit(state->match_context, UINT32_MAX);
    rc = pcre2_jit_match(code, data, subject.size(), from, 0, state->match_data, state->match_context);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  FS_CHECK(rc > 0, "pre-tokenizer regex match failed with PCRE2 error %d on a %zu-byte piece", rc,
           subject.size());
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state->match_data);
  *start = ovector[0];
  *end = ovector[1];
  return true;
}

size_t CharLength(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 1;
  const auto b = static_cast<uint8_t>(text[pos]);
  return b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
}

}  // namespace

void PreTokenizer::Split(std::string_view text, PreTokenizerScratch* scratch,
                         std::vector<std::string_view>* pieces) const {
  if (text.empty()) return;
  SplitStage(HasUnicodeDeltaChar(text) ? stages_ : fast_stages_, 0, text, scratch->state(), pieces);
}

void PreTokenizer::SplitStage(const Stages& stages, size_t stage_idx, std::string_view piece,
                              PreTokenizerScratch::State* state, std::vector<std::string_view>* pieces) const {
  if (stage_idx == stages.size()) {
    pieces->push_back(piece);
    return;
  }
  const Stage& stage = *stages[stage_idx];
  auto emit = [&](size_t begin, size_t end, bool is_match) {
    if (end <= begin) return;
    const bool keep = stage.behavior == SplitBehavior::kIsolated || is_match == stage.invert;
    if (keep) SplitStage(stages, stage_idx + 1, piece.substr(begin, end - begin), state, pieces);
  };
  size_t previous = 0, search_from = 0;
  size_t last_match_end = std::string_view::npos;
  size_t start = 0, end = 0;
  while (search_from <= piece.size() && FindMatch(stage.code, stage.jit, piece, search_from, state, &start, &end)) {
    if (start == end && end == last_match_end) {
      search_from += CharLength(piece, search_from);
      continue;
    }
    search_from = end;
    last_match_end = end;
    emit(previous, start, false);
    emit(start, end, true);
    previous = end;
  }
  emit(previous, piece.size(), false);
}

}  // namespace flashserve::tokenizer
