#include "base/bytes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace flashserve::base {
namespace {

std::string Pattern(size_t n) {
  std::string d;
  for (size_t i = 0; i < n; ++i) d.push_back(static_cast<char>(i * 37 + 11));
  return d;
}

// Values of the KV store's original Checksum64: stored object files must keep verifying.
TEST(BytesTest, Checksum64KeepsItsValues) {
  const std::string d = Pattern(300);
  const std::vector<std::pair<size_t, uint64_t>> golden = {
      {0, 0x3d8dceaf5332243aull},  {1, 0x3ebc791acea6eeddull},  {7, 0x1a7dd0177038bcf0ull},
      {8, 0x524b4362e4662ee8ull},  {31, 0x32627b724e92fa3bull}, {32, 0x66729a96e2f1c871ull},
      {33, 0x35ac34c3c50fe4a2ull}, {63, 0xd5dcb07e23f19232ull}, {64, 0xb337e0380fd45142ull},
      {100, 0xeb01cad921280199ull}, {299, 0x56697c41d592ffc7ull}};
  for (const auto& [n, want] : golden) EXPECT_EQ(Checksum64(std::string_view(d).substr(0, n)), want) << n;
}

TEST(BytesTest, StreamEqualsOneShotForEverySplit) {
  const std::string d = Pattern(200);
  for (size_t n : {0, 1, 31, 32, 33, 95, 200}) {
    const std::string_view data = std::string_view(d).substr(0, n);
    for (size_t a = 0; a <= n; ++a) {
      Checksum64Stream s;
      s.Update(data.substr(0, a));
      s.Update(data.substr(a));
      ASSERT_EQ(s.Finish(), Checksum64(data)) << n << " split at " << a;
    }
  }
}

TEST(BytesTest, StreamEqualsOneShotForRandomPieces) {
  std::mt19937_64 rng(7);
  std::string d(1 << 20, '\0');
  for (char& c : d) c = static_cast<char>(rng());
  Checksum64Stream s;
  size_t pos = 0;
  for (int i = 0; pos < d.size(); ++i) {
    const size_t n = std::min<size_t>(d.size() - pos, rng() % 5000);
    s.Update(std::string_view(d).substr(pos, n));
    pos += n;
    if (i % 64 == 0) {
      ASSERT_EQ(s.Finish(), Checksum64(std::string_view(d).substr(0, pos))) << pos;
    }
  }
  EXPECT_EQ(s.Finish(), Checksum64(d));
  EXPECT_EQ(s.Finish(), s.Finish());
}

}  // namespace
}  // namespace flashserve::base

namespace flashserve::base {
namespace {

TEST(HexTest, EncodesLowerCaseAndDecodesEitherCaseOfExactLength) {
  const uint8_t bytes[] = {0x00, 0x9f, 0xab, 0xff};
  EXPECT_EQ(HexEncode(bytes), "009fabff");
  uint8_t out[4] = {};
  ASSERT_TRUE(HexDecode("009FabFF", out));
  EXPECT_EQ(0, std::memcmp(out, bytes, 4));
  EXPECT_FALSE(HexDecode("009fab", out));     // too short
  EXPECT_FALSE(HexDecode("009fabff00", out)); // too long
  EXPECT_FALSE(HexDecode("009fabfg", out));   // not a digit
}

}  // namespace
}  // namespace flashserve::base
