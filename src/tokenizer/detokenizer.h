// Streaming detokenizer: turns ids fed one at a time into text pieces that are never broken UTF-8.
// Callers: api/serve output streams. One instance per stream, single-threaded; the Tokenizer it
// reads must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace flashserve::tokenizer {

// Invariant: concat(Push(id_1), ..., Push(id_n), Flush()) == tokenizer.Decode({id_1..id_n}).
// Push holds back only the trailing bytes of a character that may still complete; bytes that can
// never complete are emitted at once as U+FFFD (same rule as Decode, see utf8.h).
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // Appends the bytes of `id` (unknown ids add nothing) and returns the text now complete.
  std::string Push(int32_t id);
  // Emits whatever is held back (an incomplete character becomes U+FFFD) and resets.
  std::string Flush();
  // Number of bytes currently held back (0..3).
  size_t num_pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace flashserve::tokenizer
