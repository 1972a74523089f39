// Data URLs, file:// under a root, and refusals (vision/source.h).
#include "vision/source.h"

#include <openssl/evp.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "base/file_util.h"
#include "vision/fetch.h"

namespace flashserve::vision {
namespace {

using base::ErrorCode;

base::Error Refused(std::string message) { return base::MakeError(ErrorCode::kInvalidArgument, std::move(message)); }

base::Error TooLarge(int64_t size, int64_t limit) {
  return base::MakeError(ErrorCode::kResourceExhausted,
                         fmt::format("the image is about {} bytes, over the limit of {}", size, limit));
}

base::Result<std::vector<uint8_t>> DecodeBase64(std::string_view text, int64_t max_bytes) {
  if (static_cast<int64_t>(text.size() / 4 * 3) > max_bytes + 3) return TooLarge(text.size() / 4 * 3, max_bytes);
  std::vector<uint8_t> out(text.size() / 4 * 3 + 3);
  EVP_ENCODE_CTX* ctx = EVP_ENCODE_CTX_new();
  if (ctx == nullptr) return base::MakeError(ErrorCode::kResourceExhausted, "out of memory");
  EVP_DecodeInit(ctx);
  int n = 0, tail = 0;
  const bool ok = text.size() <= INT_MAX &&
                  EVP_DecodeUpdate(ctx, out.data(), &n, reinterpret_cast<const unsigned char*>(text.data()),
                                   static_cast<int>(text.size())) >= 0 &&
                  EVP_DecodeFinal(ctx, out.data() + n, &tail) == 1;
  EVP_ENCODE_CTX_free(ctx);
  if (!ok) return Refused("the data URL's payload is not valid base64");
  out.resize(static_cast<size_t>(n) + tail);
  if (static_cast<int64_t>(out.size()) > max_bytes) return TooLarge(out.size(), max_bytes);
  return out;
}

base::Result<std::vector<uint8_t>> FromDataUrl(std::string_view url, const SourcePolicy& policy) {
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) return Refused("a data URL needs a ',' before its payload");
  const std::string_view meta = url.substr(5, comma - 5);
  if (!meta.ends_with(";base64")) {
    return Refused("only base64 data URLs are accepted (data:image/png;base64,...)");
  }
  if (!meta.starts_with("image/") && meta != ";base64") {
    return Refused(fmt::format("the data URL's media type '{}' is not an image type", meta.substr(0, meta.size() - 7)));
  }
  return DecodeBase64(url.substr(comma + 1), policy.max_bytes);
}

base::Result<std::vector<uint8_t>> FromFileUrl(std::string_view url, const SourcePolicy& policy) {
  if (policy.file_root.empty()) {
    return Refused("file:// image URLs are disabled; the operator enables them with --image-file-root DIR");
  }
  std::error_code root_ec, path_ec;
  const std::filesystem::path root = std::filesystem::weakly_canonical(policy.file_root, root_ec);
  const std::filesystem::path path = std::filesystem::weakly_canonical(std::string(url.substr(7)), path_ec);
  // A root that cannot be resolved (gone, no permission) allows nothing: an empty root would
  // match every path.
  if (root_ec || root.empty() || !root.is_absolute())
    return Refused("the directory allowed for images (--image-file-root) cannot be resolved");
  const auto [root_end, path_it] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  if (path_ec || root_end != root.end()) return Refused("the file:// URL is outside the directory allowed for images");
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return base::MakeError(ErrorCode::kNotFound, fmt::format("cannot read the image file: {}", ec.message()));
  if (static_cast<int64_t>(size) > policy.max_bytes) return TooLarge(static_cast<int64_t>(size), policy.max_bytes);
  FS_ASSIGN_OR_RETURN(std::string bytes, base::ReadFileToString(path.string()));
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

}  // namespace

base::Result<std::vector<uint8_t>> LoadImageSource(std::string_view source, const SourcePolicy& policy) {
  if (source.starts_with("data:")) return FromDataUrl(source, policy);
  if (source.starts_with("file://")) return FromFileUrl(source, policy);
  // Remote URLs are fetched ahead of prompt encoding when the operator allows it (api/image_fetch.h).
  if (source.starts_with("http://") || source.starts_with("https://")) return RemoteFetchDisabled();
  return Refused("an image source must be a data URL (data:image/png;base64,...)");
}

}  // namespace flashserve::vision
