// Sealed reasoning: the reasoning text a stateless client hands back on its next turn (a
// Messages thinking block's `signature`, a Responses reasoning item's `encrypted_content`),
// encrypted and authenticated with AES-256-GCM under one key shared by the fleet, so any worker
// opens what another sealed and a tampered or foreign blob is refused. Immutable after load;
// Seal and Open are safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashserve::dialect {

class ReasoningSeal {
 public:
  static constexpr size_t kKeyBytes = 32;

  explicit ReasoningSeal(const std::array<uint8_t, kKeyBytes>& key) : key_(key) {}

  // Reads the key file (64 hex digits); when it does not exist and `create` is set, writes a
  // new random key there first (mode 0600, written to a temporary file and renamed, so two
  // workers starting at once agree on one key).
  static base::Result<ReasoningSeal> FromKeyFile(const std::string& path, bool create);

  // "fsr1." + base64url(nonce | ciphertext | tag).
  std::string Seal(std::string_view text) const;
  // The text, or kInvalidArgument when the blob is not one this key sealed (tampered, foreign,
  // truncated).
  base::Result<std::string> Open(std::string_view blob) const;

 private:
  std::array<uint8_t, kKeyBytes> key_;
};

}  // namespace flashserve::dialect
