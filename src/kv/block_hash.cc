// Block hashing with OpenSSL SHA-256 (kv/block_hash.h).
#include "kv/block_hash.h"

#include "base/bytes.h"

#include <openssl/evp.h>

#include <cstring>

#include "base/check.h"

namespace flashserve::kv {
namespace {

class Sha256Ctx {
 public:
  Sha256Ctx() : ctx_(EVP_MD_CTX_new()) {
    FS_CHECK(ctx_ != nullptr && EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1, "SHA-256 init failed");
  }
  ~Sha256Ctx() { EVP_MD_CTX_free(ctx_); }
  void Update(const void* data, size_t n) { FS_CHECK(EVP_DigestUpdate(ctx_, data, n) == 1, "SHA-256 update failed"); }
  BlockHash Final() {
    BlockHash out{};
    unsigned int len = 0;
    FS_CHECK(EVP_DigestFinal_ex(ctx_, out.data(), &len) == 1 && len == 32, "SHA-256 final failed");
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

void UpdateField(Sha256Ctx& ctx, std::string_view field) {
  uint64_t len = field.size();  // length-prefixed so fields cannot run into each other
  ctx.Update(&len, sizeof len);
  ctx.Update(field.data(), field.size());
}

void UpdateLe64(Sha256Ctx& ctx, int64_t v) {
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
  ctx.Update(le, 8);
}

}  // namespace

size_t BlockHashHasher::operator()(const BlockHash& h) const {
  size_t v;
  std::memcpy(&v, h.data(), sizeof v);
  return v;
}

BlockHash Sha256(std::string_view data) {
  Sha256Ctx ctx;
  ctx.Update(data.data(), data.size());
  return ctx.Final();
}

BlockHash HashSeed(std::string_view model_fingerprint, std::string_view cache_namespace, int encoding_version) {
  Sha256Ctx ctx;
  UpdateField(ctx, "flashserve-prefix-v1");
  UpdateField(ctx, model_fingerprint);
  UpdateField(ctx, cache_namespace);
  int32_t version = encoding_version;
  ctx.Update(&version, sizeof version);
  return ctx.Final();
}

BlockHash ChainBlock(const BlockHash& previous, std::span<const int32_t> block_tokens,
                     std::span<const ImageExtent> images) {
  Sha256Ctx ctx;
  ctx.Update(previous.data(), previous.size());
  for (int32_t t : block_tokens) {
    uint8_t le[4] = {static_cast<uint8_t>(t), static_cast<uint8_t>(t >> 8), static_cast<uint8_t>(t >> 16),
                     static_cast<uint8_t>(t >> 24)};
    ctx.Update(le, 4);
  }
  for (const ImageExtent& image : images) {  // after the tokens: text-only blocks hash as before
    ctx.Update("img", 3);
    UpdateLe64(ctx, image.start);
    UpdateLe64(ctx, image.length);
    ctx.Update(image.key.data(), image.key.size());
  }
  return ctx.Final();
}

std::vector<BlockHash> BlockHashes(const BlockHash& seed, std::span<const int32_t> tokens,
                                   std::span<const ImageExtent> images) {
  std::vector<BlockHash> out;
  BlockHash prev = seed;
  std::vector<ImageExtent> overlapping;
  size_t first_image = 0;
  for (size_t b = 0; (b + 1) * kBlockTokens <= tokens.size(); ++b) {
    const int64_t begin = static_cast<int64_t>(b) * kBlockTokens, end = begin + kBlockTokens;
    while (first_image < images.size() && images[first_image].start + images[first_image].length <= begin) {
      ++first_image;
    }
    overlapping.clear();
    for (size_t i = first_image; i < images.size() && images[i].start < end; ++i) {
      if (images[i].start + images[i].length > begin) overlapping.push_back(images[i]);
    }
    prev = ChainBlock(prev, tokens.subspan(b * kBlockTokens, kBlockTokens), overlapping);
    out.push_back(prev);
  }
  return out;
}

std::string ToHex(const BlockHash& hash) { return base::HexEncode(hash); }

bool FromHex(std::string_view hex, BlockHash* out) {
  // Lower case only: these name object files, and one hash must have one name.
  for (char c : hex)
    if (c >= 'A' && c <= 'F') return false;
  return base::HexDecode(hex, *out);
}

}  // namespace flashserve::kv
