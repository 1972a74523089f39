// The prefix-cache model (design.md section 4): the objects a prompt's cached state is made of
// and the one rule for what a prompt can resume from. The worker's admission and fetch planning,
// the router's index and the route simulator all apply this rule, so the router's predicted hit
// and the worker's actual hit cannot drift apart. Pure values and functions, any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "kv/block_hash.h"
#include "protocol/cluster.h"

namespace flashserve::kv {

// Where an object is read from: L1 (this process's DRAM), L2 (its local disk), L3 (the shared
// directory every worker reads). Smaller is faster: the order is the preference order.
using Tier = protocol::KvTier;
constexpr int kNumTiers = 3;
// kBlock: the compressed state one 128-token block produced (keyed H_k). kBoundary: what a
// resume right after block k needs besides the blocks (raw rings, overlap halves; also keyed H_k).
using ObjectKind = protocol::KvObjectKind;

struct ObjectKey {
  ObjectKind kind = ObjectKind::kBlock;
  BlockHash hash{};
  auto operator<=>(const ObjectKey&) const = default;
};

struct ObjectKeyHasher {
  size_t operator()(const ObjectKey& key) const;
};

// The most blocks a prompt of `prompt_tokens` tokens may resume from: its last token is always
// computed (its logits start the generation), so at most prompt_tokens - 1 tokens come from the
// cache: (prompt_tokens - 1) / 128 blocks.
int64_t MaxResumeBlocks(int64_t prompt_tokens);

// A cached prefix a sequence can resume from: blocks 0 .. blocks-1 and the boundary after
// block blocks-1, each read from the best tier the reader has it in.
struct ResumePoint {
  int64_t blocks = 0;                      // 0: nothing to resume from
  int64_t blocks_by_tier[kNumTiers] = {};  // how many of those blocks each tier serves
  Tier boundary_tier = Tier::kMemory;      // meaningful when blocks > 0
  int64_t tokens() const { return blocks * kBlockTokens; }
  // The slowest tier any of its objects is read from (kMemory when nothing is resumed).
  Tier slowest() const;
};

// The rule: the longest prefix whose blocks 0..k-1 and the boundary after block k-1 are all
// readable, within the first `num_blocks` blocks. `locate(kind, i)` returns the best tier the
// reader holds object (kind, block i) in, or nullopt; it is asked for block 0, boundary 0,
// block 1, boundary 1, ... in that order and never past the first block it cannot read, so a
// caller may gather payloads or tiers in it.
template <typename Locate>
ResumePoint LongestResumePoint(int64_t num_blocks, Locate&& locate) {
  ResumePoint best, run;
  for (int64_t i = 0; i < num_blocks; ++i) {
    const std::optional<Tier> block = locate(ObjectKind::kBlock, i);
    if (!block) break;
    ++run.blocks_by_tier[static_cast<int>(*block)];
    const std::optional<Tier> boundary = locate(ObjectKind::kBoundary, i);
    if (!boundary) continue;
    best = run;
    best.blocks = i + 1;
    best.boundary_tier = *boundary;
  }
  return best;
}

// The rule over an explicit key list: `blocks` are a prompt's block hashes (at most
// MaxResumeBlocks of them count) and `locate(key)` the reader's best tier for a key.
template <typename LocateKey>
ResumePoint LongestResumePoint(std::span<const BlockHash> blocks, LocateKey&& locate) {
  return LongestResumePoint(static_cast<int64_t>(blocks.size()), [&](ObjectKind kind, int64_t i) {
    return locate(ObjectKey{kind, blocks[static_cast<size_t>(i)]});
  });
}

// What the scheduler asks when it admits a sequence: the prefix of `tokens`, hashed under
// `seed` (HashSeed of the model and the sequence's cache namespace), that can be restored
// without I/O, at most MaxResumeBlocks(tokens.size()) blocks. Implemented by the worker's
// prefix cache; called on the engine thread.
class ResumeIndex {
 public:
  virtual ~ResumeIndex() = default;
  virtual ResumePoint Lookup(const BlockHash& seed, std::span<const int32_t> tokens,
                             std::span<const ImageExtent> images) const = 0;
};

}  // namespace flashserve::kv
