// Piece lists and their conversion to token ids (encoding/prompt.h).
#include "encoding/prompt.h"

#include <array>
#include <optional>

#include <fmt/format.h>

namespace flashserve::encoding {
namespace {

// Control-token literals that template text may contain.
constexpr std::array<std::string_view, 10> kMarkupTokens = {
    kBosToken,        kEosToken,      kUserToken,
    kAssistantToken,  kSystemToken,   kLatestReminderToken,
    kThinkStartToken, kThinkEndToken, kDsmlToken,
    kImageToken,
};

}  // namespace

void AppendText(PieceList& pieces, std::string_view text) {
  if (text.empty()) return;
  if (!pieces.empty() && pieces.back().kind == PieceKind::kText) {
    pieces.back().text += text;
  } else {
    pieces.push_back({PieceKind::kText, std::string(text)});
  }
}

void AppendControl(PieceList& pieces, std::string_view token) {
  pieces.push_back({PieceKind::kControl, std::string(token)});
}

void AppendImage(PieceList& pieces, std::string_view source) {
  pieces.push_back({PieceKind::kImage, std::string(source)});
}

void AppendPieces(PieceList& pieces, const PieceList& more) {
  for (const PromptPiece& piece : more) {
    if (piece.kind == PieceKind::kText) {
      AppendText(pieces, piece.text);
    } else {
      pieces.push_back(piece);
    }
  }
}

void AppendMarkup(PieceList& pieces, std::string_view markup) {
  while (!markup.empty()) {
    size_t best_pos = std::string_view::npos;
    std::string_view best;
    for (std::string_view token : kMarkupTokens) {
      size_t pos = markup.find(token);
      if (pos < best_pos) {
        best_pos = pos;
        best = token;
      }
    }
    if (best_pos == std::string_view::npos) {
      AppendText(pieces, markup);
      return;
    }
    AppendText(pieces, markup.substr(0, best_pos));
    AppendControl(pieces, best);
    markup.remove_prefix(best_pos + best.size());
  }
}

std::string_view PieceText(const PromptPiece& piece) {
  return piece.kind == PieceKind::kImage ? kImageToken : std::string_view(piece.text);
}

EncodedPrompt MakePrompt(PieceList pieces) {
  EncodedPrompt prompt;
  for (const PromptPiece& piece : pieces) prompt.text += PieceText(piece);
  prompt.pieces = std::move(pieces);
  return prompt;
}

std::vector<std::string> ImageSources(const EncodedPrompt& prompt) {
  std::vector<std::string> sources;
  for (const PromptPiece& piece : prompt.pieces) {
    if (piece.kind == PieceKind::kImage) sources.push_back(piece.text);
  }
  return sources;
}

base::Result<std::vector<int32_t>> ToTokenIds(const EncodedPrompt& prompt,
                                              const tokenizer::Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  for (const PromptPiece& piece : prompt.pieces) {
    if (piece.kind == PieceKind::kText) {
      std::vector<int32_t> text_ids = tokenizer.EncodePlain(piece.text);
      ids.insert(ids.end(), text_ids.begin(), text_ids.end());
      continue;
    }
    std::string_view token = PieceText(piece);
    std::optional<int32_t> id = tokenizer.TokenId(token);
    if (!id.has_value()) {
      return base::MakeError(
          base::ErrorCode::kBadTokenizer,
          fmt::format("the tokenizer has no token '{}' (used by the prompt)", token));
    }
    ids.push_back(*id);
  }
  return ids;
}

}  // namespace flashserve::encoding
