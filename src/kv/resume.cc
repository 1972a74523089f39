// The prefix-cache rule's out-of-line parts (kv/resume.h).
#include "kv/resume.h"

#include <algorithm>

namespace flashserve::kv {

size_t ObjectKeyHasher::operator()(const ObjectKey& key) const {
  return BlockHashHasher()(key.hash) ^ (static_cast<size_t>(key.kind) * 0x9E3779B97F4A7C15ull);
}

int64_t MaxResumeBlocks(int64_t prompt_tokens) {
  return prompt_tokens > 0 ? (prompt_tokens - 1) / kBlockTokens : 0;
}

Tier ResumePoint::slowest() const {
  if (blocks == 0) return Tier::kMemory;
  Tier slowest = boundary_tier;
  for (int t = 0; t < kNumTiers; ++t) {
    if (blocks_by_tier[t] > 0) slowest = std::max(slowest, static_cast<Tier>(t));
  }
  return slowest;
}

}  // namespace flashserve::kv
