// UTF-8 validation and lossy decoding (tokenizer/utf8.h), following Unicode Table 3-7.
#include "tokenizer/utf8.h"

#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace flashserve::tokenizer {
namespace {

enum class StepKind { kValid, kInvalid, kIncomplete };

struct Step {
  StepKind kind;
  size_t length;  // bytes consumed: the character, the maximal invalid subpart, or the tail
};

// Valid range of the second byte for a lead byte (Table 3-7); later bytes are always 80..BF.
inline bool SecondByteOk(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

inline size_t SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // 80..C1, F5..FF can never start a character
}

// Decodes one step at `pos` (pos < bytes.size()).
Step DecodeStep(std::string_view bytes, size_t pos) {
  const auto lead = static_cast<uint8_t>(bytes[pos]);
  const size_t need = SequenceLength(lead);
  if (need == 0) return {StepKind::kInvalid, 1};
  for (size_t i = 1; i < need; ++i) {
    if (pos + i >= bytes.size()) return {StepKind::kIncomplete, i};
    const auto b = static_cast<uint8_t>(bytes[pos + i]);
    const bool ok = i == 1 ? SecondByteOk(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {StepKind::kInvalid, i};
  }
  return {StepKind::kValid, need};
}

// Skips ASCII 8 bytes at a time; returns the first position that holds a non-ASCII byte.
size_t SkipAscii(std::string_view bytes, size_t pos) {
  while (pos + 8 <= bytes.size()) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + pos, 8);
    if (word & 0x8080808080808080ull) break;
    pos += 8;
  }
  while (pos < bytes.size() && static_cast<uint8_t>(bytes[pos]) < 0x80) ++pos;
  return pos;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

size_t FindInvalidUtf8(std::string_view text) {
  size_t pos = 0;
  while (true) {
    pos = SkipAscii(text, pos);
    if (pos >= text.size()) return text.size();
    const Step step = DecodeStep(text, pos);
    if (step.kind != StepKind::kValid) return pos;
    pos += step.length;
  }
}

base::Status ValidateUtf8(std::string_view text) {
  const size_t bad = FindInvalidUtf8(text);
  if (bad == text.size()) return base::Status::Ok();
  return base::MakeError(base::ErrorCode::kInvalidUtf8,
                         fmt::format("invalid UTF-8 at byte offset {} (byte 0x{:02X})", bad,
                                     static_cast<uint8_t>(text[bad])));
}

std::string LossyUtf8(std::string_view bytes) {
  size_t pos = FindInvalidUtf8(bytes);
  if (pos == bytes.size()) return std::string(bytes);
  std::string out(bytes.substr(0, pos));
  out.reserve(bytes.size() + 8);
  while (pos < bytes.size()) {
    const Step step = DecodeStep(bytes, pos);
    if (step.kind == StepKind::kValid) {
      out.append(bytes.substr(pos, step.length));
    } else {
      out.append(kReplacement);
    }
    pos += step.length;
  }
  return out;
}

size_t StableUtf8PrefixLength(std::string_view bytes) {
  // Only the last (at most 3) bytes can belong to an incomplete character; start the scan at a
  // position that cannot be inside a character: at most 3 bytes before the end, moved back to a
  // byte that is not a continuation byte.
  size_t pos = bytes.size() > 4 ? bytes.size() - 4 : 0;
  while (true) {
    if (pos >= bytes.size()) return bytes.size();
    const Step step = DecodeStep(bytes, pos);
    if (step.kind == StepKind::kIncomplete) return pos;
    pos += step.length;
  }
}

}  // namespace flashserve::tokenizer
