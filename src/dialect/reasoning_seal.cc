// AES-256-GCM sealing of reasoning text with OpenSSL (dialect/reasoning_seal.h).
#include "dialect/reasoning_seal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "base/check.h"

namespace flashserve::dialect {
namespace {

constexpr std::string_view kPrefix = "fsr1.";
constexpr std::string_view kAad = "flashserve sealed reasoning v1";
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string Base64Url(const std::vector<uint8_t>& bytes) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (uint8_t b : bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kB64[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kB64[(acc << (6 - bits)) & 63]);
  return out;
}

bool FromBase64Url(std::string_view text, std::vector<uint8_t>* out) {
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const char* p = c == '\0' ? nullptr : std::char_traits<char>::find(kB64, 64, c);
    if (p == nullptr) return false;
    acc = (acc << 6) | static_cast<uint32_t>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<uint8_t>((acc >> bits) & 0xff));
    }
  }
  // Canonical only: a leftover of 6+ bits is no byte, and unused bits must be zero (else two
  // texts would open as one blob).
  return bits < 6 && (acc & ((1u << bits) - 1)) == 0;
}

base::Error Refused(std::string_view why) {
  return base::Error(base::ErrorCode::kInvalidArgument,
                     fmt::format("not a reasoning blob this server sealed ({}); send back the value exactly as "
                                 "it was returned, or drop the block",
                                 why));
}

base::Result<std::array<uint8_t, ReasoningSeal::kKeyBytes>> ParseKey(const std::string& text, const std::string& path) {
  std::array<uint8_t, ReasoningSeal::kKeyBytes> key{};
  std::string hex;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) hex.push_back(c);
  if (hex.size() != 2 * key.size() || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    return base::Error(base::ErrorCode::kInvalidArgument,
                       fmt::format("{}: a reasoning seal key is 64 hex digits (32 bytes)", path));
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return key;
}

base::Status CreateKeyFile(const std::string& path) {
  std::array<uint8_t, ReasoningSeal::kKeyBytes> key{};
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1)
    return base::Error(base::ErrorCode::kInternal, "no random bytes for a reasoning seal key");
  std::string hex;
  for (uint8_t b : key) hex += fmt::format("{:02x}", b);
  hex += "\n";
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::array<uint8_t, 8> salt{};
  RAND_bytes(salt.data(), static_cast<int>(salt.size()));
  std::string suffix;
  for (uint8_t b : salt) suffix += fmt::format("{:02x}", b);
  const std::string tmp = fmt::format("{}.tmp-{}-{}", path, getpid(), suffix);
  // A fresh file of our own: never one planted in a shared directory, never through a link.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return base::Error(base::ErrorCode::kIoError, fmt::format("cannot create {}", tmp));
  const bool written = ::write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size()) && ::fsync(fd) == 0;
  ::close(fd);
  // link() fails when another process created the key first; both then read that one.
  const bool linked = written && ::link(tmp.c_str(), path.c_str()) == 0;
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (!written) return base::Error(base::ErrorCode::kIoError, fmt::format("cannot write {}", tmp));
  if (!linked && link_errno != EEXIST) return base::Error(base::ErrorCode::kIoError, fmt::format("cannot create {}", path));
  return base::Status::Ok();
}

}  // namespace

base::Result<ReasoningSeal> ReasoningSeal::FromKeyFile(const std::string& path, bool create) {
  std::error_code ec;
  if (create && !std::filesystem::exists(path, ec)) FS_RETURN_IF_ERROR(CreateKeyFile(path));
  std::ifstream in(path);
  if (!in) return base::Error(base::ErrorCode::kNotFound, fmt::format("cannot read the reasoning seal key {}", path));
  std::stringstream text;
  text << in.rdbuf();
  FS_ASSIGN_OR_RETURN(auto key, ParseKey(text.str(), path));
  return ReasoningSeal(key);
}

std::string ReasoningSeal::Seal(std::string_view text) const {
  std::vector<uint8_t> out(kNonceBytes + text.size() + kTagBytes);
  // A repeated nonce would break GCM: no random bytes, no seal (the process stops).
  FS_CHECK(RAND_bytes(out.data(), kNonceBytes) == 1, "no random bytes for a reasoning seal nonce");
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  FS_CHECK(ctx != nullptr, "EVP_CIPHER_CTX_new failed");
  int len = 0, tail = 0;
  const bool ok =
      EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key_.data(), out.data()) == 1 &&
      EVP_EncryptUpdate(ctx, nullptr, &len, reinterpret_cast<const uint8_t*>(kAad.data()), static_cast<int>(kAad.size())) == 1 &&
      EVP_EncryptUpdate(ctx, out.data() + kNonceBytes, &len, reinterpret_cast<const uint8_t*>(text.data()),
                        static_cast<int>(text.size())) == 1 &&
      EVP_EncryptFinal_ex(ctx, out.data() + kNonceBytes + len, &tail) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kTagBytes, out.data() + kNonceBytes + text.size()) == 1;
  EVP_CIPHER_CTX_free(ctx);
  FS_CHECK(ok, "AES-256-GCM sealing failed");
  return std::string(kPrefix) + Base64Url(out);
}

base::Result<std::string> ReasoningSeal::Open(std::string_view blob) const {
  if (!blob.starts_with(kPrefix)) return Refused("unknown format");
  std::vector<uint8_t> bytes;
  if (!FromBase64Url(blob.substr(kPrefix.size()), &bytes)) return Refused("not base64url");
  if (bytes.size() < kNonceBytes + kTagBytes) return Refused("truncated");
  const size_t n = bytes.size() - kNonceBytes - kTagBytes;
  std::string text(n, '\0');
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int len = 0;
  EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key_.data(), bytes.data());
  EVP_DecryptUpdate(ctx, nullptr, &len, reinterpret_cast<const uint8_t*>(kAad.data()), static_cast<int>(kAad.size()));
  EVP_DecryptUpdate(ctx, reinterpret_cast<uint8_t*>(text.data()), &len, bytes.data() + kNonceBytes, static_cast<int>(n));
  EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kTagBytes, bytes.data() + kNonceBytes + n);
  const bool ok = EVP_DecryptFinal_ex(ctx, reinterpret_cast<uint8_t*>(text.data()) + len, &len) == 1;
  EVP_CIPHER_CTX_free(ctx);
  if (!ok) return Refused("authentication failed");
  return text;
}

}  // namespace flashserve::dialect
