// Prefix-cache keys (design.md section 4): a prompt is cut into 128-token blocks and block k is
// keyed by H_k = SHA-256(H_{k-1} || little-endian int32 tokens of block k || the images block k
// shows), with H_{-1} = SHA-256 of (model fingerprint, cache namespace, encoding version).
// Tenants in different namespaces never share keys, and every image position carries the same
// placeholder id, so a block that shows part of a picture also covers that picture's content
// key: two pictures at the same place never share a block. Used by serve, kvstore and the
// router. Pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashserve::kv {

constexpr int64_t kBlockTokens = 128;

using BlockHash = std::array<uint8_t, 32>;

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const;  // first 8 bytes
};

BlockHash HashSeed(std::string_view model_fingerprint, std::string_view cache_namespace, int encoding_version = 1);
// A picture in the prompt: the placeholder positions [start, start + length) and its content key
// (vision::ContentKey: decoded pixels, preprocessing, tower).
struct ImageExtent {
  int64_t start = 0;
  int64_t length = 0;
  std::array<uint8_t, 32> key{};
};

// `images`: those overlapping the block, with prompt positions; text-only blocks pass none and
// hash exactly as before images existed.
BlockHash ChainBlock(const BlockHash& previous, std::span<const int32_t> block_tokens,
                     std::span<const ImageExtent> images = {});

// Hashes of every full block of tokens (floor(n / 128) entries). `images` sorted by start.
std::vector<BlockHash> BlockHashes(const BlockHash& seed, std::span<const int32_t> tokens,
                                   std::span<const ImageExtent> images = {});

std::string ToHex(const BlockHash& hash);
bool FromHex(std::string_view hex, BlockHash* out);

// SHA-256 of arbitrary bytes (fingerprints).
BlockHash Sha256(std::string_view data);

}  // namespace flashserve::kv
