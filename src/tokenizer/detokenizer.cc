// IncrementalDetokenizer (tokenizer/detokenizer.h).
#include "tokenizer/detokenizer.h"

#include "tokenizer/utf8.h"

namespace flashserve::tokenizer {

std::string IncrementalDetokenizer::Push(int32_t id) {
  pending_ += tokenizer_->TokenBytes(id);
  const size_t stable = StableUtf8PrefixLength(pending_);
  if (stable == 0) return std::string();
  std::string out = LossyUtf8(std::string_view(pending_).substr(0, stable));
  pending_.erase(0, stable);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out = LossyUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace flashserve::tokenizer
