// PromptHasher: the router's copy of a worker's prompt building (Chat, Messages and Responses
// bodies through the workers' own dialect parsers -> DeepSeek encoding -> token ids; completion
// prompt -> BOS + ids), cut into the same chained block hashes the workers' prefix caches use
// (kv/block_hash.h). Immutable after construction; called from any HTTP I/O thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "dialect/reasoning_seal.h"
#include "encoding/version.h"
#include "kv/block_hash.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::router {

// kOpaque: a body the router does not tokenize (token counting, tokenize routes): routed by its
// affinity key and load only.
enum class PromptKind { kChat, kCompletion, kMessages, kResponses, kOpaque };

struct PromptBlocks {
  int64_t num_tokens = 0;
  std::vector<kv::BlockHash> blocks;  // every full 128-token block
};

class PromptHasher {
 public:
  // `seal`: the fleet's reasoning seal (null: reasoning handed back sealed is estimated by its
  // visible text, see dialect::DialectContext::estimate_sealed). Outlives the hasher.
  explicit PromptHasher(const tokenizer::Tokenizer& tokenizer, const dialect::ReasoningSeal* seal = nullptr);

  // The prompt's tokens as the worker will build them (chat requests in `version`'s format;
  // pictures count as their placeholder token only). An error when the body is not a valid
  // request (the router then lets a worker produce the exact error response).
  base::Result<std::vector<int32_t>> Tokens(PromptKind kind, const nlohmann::ordered_json& body,
                                            encoding::EncodingVersion version) const;
  // Hashes seeded by (fingerprint, cache namespace), as the worker seeds them.
  static PromptBlocks Blocks(std::span<const int32_t> tokens, std::string_view fingerprint,
                             std::string_view cache_namespace);

 private:
  base::Result<std::vector<int32_t>> DialectTokens(PromptKind kind, const nlohmann::ordered_json& body,
                                                   encoding::EncodingVersion version) const;

  const tokenizer::Tokenizer& tokenizer_;
  const dialect::ReasoningSeal* seal_ = nullptr;
  int32_t bos_id_ = 0;
};

}  // namespace flashserve::router
