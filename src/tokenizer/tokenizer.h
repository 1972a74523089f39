// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (DeepSeek's kind), producing
// the same ids as HF `tokenizers`. Callers: encoding, api, app. Immutable after Load; every method
// is const and safe to call from any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace flashserve::tokenizer {

struct TokenizerParts;  // tokenizer/tokenizer_parts.h (internal)

struct LoadOptions {
  // Demo models only: every V4 control token (kV4ControlTokens) that the file lacks is defined on
  // the lowest-numbered unused `<｜place▁holder▁no▁N｜>` added token, in kV4ControlTokens order
  // (N ascending, skipping placeholders that are already renamed). Real checkpoints leave it off.
  bool define_missing_v4_tokens = false;
  // Where given, receives the names define_missing_v4_tokens put on placeholders (one load tells
  // the caller what the file lacked).
  std::vector<std::string>* defined_v4_tokens = nullptr;
};

// The DeepSeek-V4 control tokens, in the order LoadOptions::define_missing_v4_tokens assigns them.
inline constexpr std::string_view kV4ControlTokens[] = {
    "<think>",        "</think>",          "<｜latest_reminder｜>", "｜DSML｜",
    "<｜System｜>",   "<｜User｜>",         "<｜Assistant｜>",       "<｜deepseek_image｜>",
    "<｜action｜>",   "<｜query｜>",        "<｜authority｜>",       "<｜domain｜>",
    "<｜title｜>",    "<｜read_url｜>",
};

class Tokenizer {
 public:
  // Reads and validates a tokenizer.json; kBadTokenizer (with the reason) for anything this
  // implementation does not reproduce exactly, kNotFound / kIoError when the file cannot be read.
  static base::Result<std::unique_ptr<Tokenizer>> Load(const std::string& path,
                                                       const LoadOptions& options = {});
  // Same, from the JSON text itself (tests, embedded tokenizers).
  static base::Result<std::unique_ptr<Tokenizer>> LoadFromJson(std::string_view json,
                                                               const LoadOptions& options = {});
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // HF `encode(text, add_special_tokens=False)`: added/special token strings inside the text
  // become their ids (honouring lstrip/rstrip/single_word), the rest is byte-level BPE. No BOS.
  // Text must be valid UTF-8 (check with ValidateUtf8 at the boundary); invalid bytes are
  // encoded as if replaced by U+FFFD (lossy decode), never a crash.
  std::vector<int32_t> Encode(std::string_view text) const;
  // The whole text is plain text: `<｜User｜>` typed by a user gives plain-BPE ids, never the
  // control token. Same UTF-8 rule as Encode.
  std::vector<int32_t> EncodePlain(std::string_view text) const;

  // Id of a vocab entry or added token, by its exact tokenizer.json text (e.g. "<｜User｜>",
  // "Ġthe"); nullopt when absent.
  std::optional<int32_t> TokenId(std::string_view token) const;
  // The tokenizer.json text of an id (byte-level form for vocab entries, e.g. "Ġthe"); nullopt
  // when the id is unknown.
  std::optional<std::string> TokenText(int32_t id) const;
  // The bytes an id decodes to (may be a partial UTF-8 character); empty when unknown.
  std::string_view TokenBytes(int32_t id) const;
  // True for added tokens flagged "special" in the file (BOS, EOS, placeholders, ...).
  bool IsSpecial(int32_t id) const;
  // True for every added token (special or not: <think>, DSML tags, placeholders), which the
  // byte-level vocabulary would never produce from text.
  bool IsAdded(int32_t id) const;

  // HF `decode(ids, skip_special_tokens=False)`: the bytes of all tokens (added tokens render as
  // their text), then a lossy UTF-8 decode (each maximal invalid subpart -> U+FFFD, see utf8.h).
  // Unknown ids are skipped, as HF does.
  std::string Decode(std::span<const int32_t> ids) const;

  // One past the largest id (vocab entries and added tokens); embedding rows may be more.
  int32_t vocab_size() const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerParts> parts);
  std::unique_ptr<TokenizerParts> parts_;
};

}  // namespace flashserve::tokenizer
