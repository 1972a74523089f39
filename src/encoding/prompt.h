// An encoded prompt: its text plus the pieces it is made of, so that control tokens never come
// from user text. Produced by the encoders (encoding/encoder.h), turned into ids here. Plain
// values; ToTokenIds is const and safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::encoding {

// The control tokens the V4 / V4.1 templates emit (U+FF5C and U+2581, not ASCII).
inline constexpr std::string_view kBosToken = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEosToken = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUserToken = "<｜User｜>";
inline constexpr std::string_view kAssistantToken = "<｜Assistant｜>";
inline constexpr std::string_view kSystemToken = "<｜System｜>";
inline constexpr std::string_view kLatestReminderToken = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkStartToken = "<think>";
inline constexpr std::string_view kThinkEndToken = "</think>";
inline constexpr std::string_view kDsmlToken = "｜DSML｜";
inline constexpr std::string_view kImageToken = "<｜deepseek_image｜>";

enum class PieceKind {
  kText,     // plain text: always tokenized as plain BPE
  kControl,  // one control token
  kImage,    // an image placeholder (kImageToken); `text` holds the image source
};

struct PromptPiece {
  PieceKind kind = PieceKind::kText;
  std::string text;
};

// The prompt exactly as the reference encoder writes it, and the same text split into pieces.
// Invariants: concat(PieceText(p) for p in pieces) == text; no two text pieces are adjacent;
// no piece is empty.
struct EncodedPrompt {
  std::string text;
  std::vector<PromptPiece> pieces;
};

using PieceList = std::vector<PromptPiece>;

// Builders for piece lists. Empty text adds nothing; text merges into a preceding text piece.
void AppendText(PieceList& pieces, std::string_view text);
void AppendControl(PieceList& pieces, std::string_view token);
void AppendImage(PieceList& pieces, std::string_view source);
void AppendPieces(PieceList& pieces, const PieceList& more);
// Template text: the control-token literals it contains (｜DSML｜, <think>, ...) become control
// pieces, the rest text. Never call this on user-provided text.
void AppendMarkup(PieceList& pieces, std::string_view markup);

// The text a piece contributes to the prompt (kImageToken for an image).
std::string_view PieceText(const PromptPiece& piece);
EncodedPrompt MakePrompt(PieceList pieces);
// Sources of the images, in prompt order.
std::vector<std::string> ImageSources(const EncodedPrompt& prompt);

// Ids = concatenation of TokenId(control) and EncodePlain(text) over the pieces. Equals HF
// `tokenizer.encode(prompt.text)` whenever no user text contains a control-token literal.
// kBadTokenizer when the tokenizer lacks a control token the prompt uses.
base::Result<std::vector<int32_t>> ToTokenIds(const EncodedPrompt& prompt,
                                              const tokenizer::Tokenizer& tokenizer);

}  // namespace flashserve::encoding
