// ReasoningSeal: round trips, refusal of tampered, truncated and foreign blobs, and the key file
// (created once with mode 0600, read back by every later start, malformed files refused).
#include "dialect/reasoning_seal.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace flashserve::dialect {
namespace {

std::array<uint8_t, ReasoningSeal::kKeyBytes> Key(uint8_t seed) {
  std::array<uint8_t, ReasoningSeal::kKeyBytes> k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed + i);
  return k;
}

TEST(ReasoningSealTest, OpensWhatItSealedAndNothingElse) {
  ReasoningSeal seal(Key(1));
  const std::vector<std::string> texts = {"", "short", std::string(5000, 'x').append("\xE4\xB8\xAD")};
  for (const std::string& text : texts) {
    const std::string blob = seal.Seal(text);
    EXPECT_EQ(blob.rfind("fsr1.", 0), 0u);
    EXPECT_EQ(seal.Open(blob).value(), text);
    EXPECT_NE(seal.Seal(text), blob);  // a fresh nonce each time
  }
  const std::string blob = seal.Seal("secret");
  EXPECT_FALSE(ReasoningSeal(Key(2)).Open(blob).ok());  // another fleet's key
  for (size_t i = 5; i < blob.size(); i += 3) {
    std::string bad = blob;
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(seal.Open(bad).ok()) << i;
  }
  EXPECT_FALSE(seal.Open(blob.substr(0, 20)).ok());
  // Only the canonical spelling opens: the last character's unused bits set is refused, though
  // it decodes to the same bytes (34 bytes = 46 characters with 4 unused bits).
  std::string padded = blob;
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  padded.back() = alphabet[alphabet.find(padded.back()) | 1];
  EXPECT_FALSE(seal.Open(padded).ok());
  EXPECT_FALSE(seal.Open("EqoBCkYIBRgCKkD").ok());  // a signature from another provider
  EXPECT_FALSE(seal.Open("fsr1.!!!").ok());
}

TEST(ReasoningSealTest, KeyFileIsCreatedOnceAndSharedByLaterStarts) {
  const std::string dir = ::testing::TempDir() + "seal-" + std::to_string(getpid());
  const std::string path = dir + "/sub/reasoning-seal.key";
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(ReasoningSeal::FromKeyFile(path, false).ok());  // not created unless asked
  auto first = ReasoningSeal::FromKeyFile(path, true);
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto second = ReasoningSeal::FromKeyFile(path, true);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->Open(first->Seal("shared")).value(), "shared");
  std::ofstream(path) << "not a key\n";
  auto bad = ReasoningSeal::FromKeyFile(path, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("64 hex digits"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace flashserve::dialect
