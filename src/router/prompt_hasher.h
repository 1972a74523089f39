// PromptHasher: the router's copy of a worker's prompt building (chat messages -> DeepSeek
// encoding -> token ids; completion prompt -> BOS + ids), cut into the same chained block
// hashes the workers' prefix caches use (kv/block_hash.h). Immutable after construction;
// called from any HTTP I/O thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "encoding/version.h"
#include "kv/block_hash.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::router {

// kOpaque: a body the router does not tokenize (Messages, Responses, tokenize routes): routed by
// its affinity key and load only.
enum class PromptKind { kChat, kCompletion, kOpaque };

struct PromptBlocks {
  int64_t num_tokens = 0;
  std::vector<kv::BlockHash> blocks;  // every full 128-token block
};

class PromptHasher {
 public:
  explicit PromptHasher(const tokenizer::Tokenizer& tokenizer);

  // The prompt's tokens as the worker will build them (chat requests in `version`'s format).
  // An error when the body is not a valid request (the router then lets a worker produce the
  // exact error response).
  base::Result<std::vector<int32_t>> Tokens(PromptKind kind, const nlohmann::ordered_json& body,
                                            encoding::EncodingVersion version) const;
  // Hashes seeded by (fingerprint, cache namespace), as the worker seeds them.
  static PromptBlocks Blocks(std::span<const int32_t> tokens, std::string_view fingerprint,
                             std::string_view cache_namespace);

 private:
  const tokenizer::Tokenizer& tokenizer_;
  int32_t bos_id_ = 0;
};

}  // namespace flashserve::router
