// Tokenizer (tokenizer/tokenizer.h): added-token split, pre-tokenization and BPE per piece, with
// a whole-piece vocab fast path and a per-call cache of repeated pieces; decoding by id bytes.
#include "tokenizer/tokenizer.h"

#include <unordered_map>

#include "base/file_util.h"
#include "tokenizer/tokenizer_parts.h"
#include "tokenizer/utf8.h"

namespace flashserve::tokenizer {
namespace {

// Working memory of one Encode call; nothing is shared between calls or threads.
struct EncodeScratch {
  PreTokenizerScratch pre;
  BpeScratch bpe;
  std::vector<std::string_view> pieces;
  // Pieces that needed merging -> their ids, stored as [offset, count) in cached_ids.
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
  std::vector<int32_t> cached_ids;
};

constexpr size_t kMaxCachedPieceBytes = 64;

void EncodePiece(const TokenizerParts& parts, std::string_view piece, EncodeScratch* scratch,
                 std::vector<int32_t>* out) {
  const int32_t whole = parts.bpe.FindBytes(piece);
  if (whole >= 0 && parts.bpe.IsWholeTokenStable(whole)) {
    out->push_back(whole);
    return;
  }
  if (piece.size() > kMaxCachedPieceBytes) {
    parts.bpe.Tokenize(piece, &scratch->bpe, out);
    return;
  }
  auto [it, inserted] = scratch->cache.try_emplace(piece);
  if (inserted) {
    const auto offset = static_cast<uint32_t>(scratch->cached_ids.size());
    parts.bpe.Tokenize(piece, &scratch->bpe, &scratch->cached_ids);
    it->second = {offset, static_cast<uint32_t>(scratch->cached_ids.size()) - offset};
  }
  const auto [offset, count] = it->second;
  out->insert(out->end(), scratch->cached_ids.begin() + offset, scratch->cached_ids.begin() + offset + count);
}

void EncodeText(const TokenizerParts& parts, std::string_view text, EncodeScratch* scratch,
                std::vector<int32_t>* out) {
  scratch->pieces.clear();
  parts.pre_tokenizer.Split(text, &scratch->pre, &scratch->pieces);
  for (std::string_view piece : scratch->pieces) EncodePiece(parts, piece, scratch, out);
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<TokenizerParts> parts) : parts_(std::move(parts)) {}
Tokenizer::~Tokenizer() = default;

base::Result<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path, const LoadOptions& options) {
  auto text = base::ReadFileToString(path);
  if (!text.ok()) return text.error().WithContext("reading tokenizer " + path);
  auto tokenizer = LoadFromJson(*text, options);
  if (!tokenizer.ok()) return tokenizer.error().WithContext(path);
  return tokenizer;
}

base::Result<std::unique_ptr<Tokenizer>> Tokenizer::LoadFromJson(std::string_view json, const LoadOptions& options) {
  FS_ASSIGN_OR_RETURN(std::unique_ptr<TokenizerParts> parts, ParseTokenizerJson(json, options));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(parts)));
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  std::string repaired;
  if (FindInvalidUtf8(text) != text.size()) {
    repaired = LossyUtf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  EncodeScratch scratch;
  std::vector<TextSegment> segments;
  parts_->added_tokens.Split(text, &segments);
  for (const TextSegment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      EncodeText(*parts_, text.substr(segment.begin, segment.end - segment.begin), &scratch, &ids);
    }
  }
  return ids;
}

std::vector<int32_t> Tokenizer::EncodePlain(std::string_view text) const {
  std::string repaired;
  if (FindInvalidUtf8(text) != text.size()) {
    repaired = LossyUtf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  EncodeScratch scratch;
  EncodeText(*parts_, text, &scratch, &ids);
  return ids;
}

std::optional<int32_t> Tokenizer::TokenId(std::string_view token) const {
  auto it = parts_->text_to_id.find(std::string(token));
  if (it == parts_->text_to_id.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Tokenizer::TokenText(int32_t id) const {
  if (id < 0 || id >= parts_->vocab_size || !(parts_->id_flags[id] & kIdKnown)) return std::nullopt;
  return parts_->id_text[id];
}

std::string_view Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= parts_->vocab_size) return {};
  const uint32_t begin = parts_->decode_offsets[id];
  return std::string_view(parts_->decode_bytes).substr(begin, parts_->decode_offsets[id + 1] - begin);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < parts_->vocab_size && (parts_->id_flags[id] & kIdSpecial);
}

bool Tokenizer::IsAdded(int32_t id) const {
  return id >= 0 && id < parts_->vocab_size && (parts_->id_flags[id] & kIdAdded);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids) bytes += TokenBytes(id);
  return LossyUtf8(bytes);
}

int32_t Tokenizer::vocab_size() const { return parts_->vocab_size; }

}  // namespace flashserve::tokenizer
