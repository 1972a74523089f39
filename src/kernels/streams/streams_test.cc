// The stream mix and collapse on every ISA this CPU has give the portable build's bits, in
// place, for any stream count and length (vector bodies and scalar tails), and equal the plain
// formula (engine/mhc.h's HcPost and collapse); stream counts out of range are refused.
#include "kernels/streams/streams.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace flashserve::kernels {
namespace {

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(StreamsTest, EveryIsaGivesThePortableBits) {
  std::mt19937 rng(3);
  for (int hc : {1, 4, 5, 16})
    for (int64_t n : {1, 7, 16, 17, 1027}) {
      const int64_t stride = n + 5;
      const std::vector<float> x = Random(hc * stride, rng), post = Random(hc, rng), comb = Random(hc * hc, rng),
                               y = Random(n, rng), w = Random(hc, rng);
      // The formula, element by element.
      std::vector<float> want(x), collapsed(static_cast<size_t>(n));
      for (int64_t c = 0; c < n; ++c) {
        for (int j = 0; j < hc; ++j) {
          float acc = post[j] * y[c];
          for (int i = 0; i < hc; ++i) acc += comb[i * hc + j] * x[i * stride + c];
          want[j * stride + c] = acc;
        }
        float acc = w[0] * x[c];
        for (int i = 1; i < hc; ++i) acc += w[i] * x[i * stride + c];
        collapsed[c] = acc;
      }
      for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
        if (!IsaSupported(isa)) continue;
        std::vector<float> got(x), out(static_cast<size_t>(n));
        MixStreamsWithIsa(isa, got.data(), hc, n, stride, post.data(), comb.data(), y.data());
        CollapseStreamsWithIsa(isa, x.data(), hc, n, stride, w.data(), out.data());
        for (int j = 0; j < hc; ++j)  // the gaps between streams are left alone
          ASSERT_EQ(0, std::memcmp(want.data() + j * stride, got.data() + j * stride, (stride) * sizeof(float)))
              << IsaName(isa) << " hc=" << hc << " n=" << n << " stream " << j;
        ASSERT_EQ(0, std::memcmp(collapsed.data(), out.data(), n * sizeof(float)))
            << IsaName(isa) << " hc=" << hc << " n=" << n;
      }
    }
}

// Stream counts outside 1..16 stop the process with a message, never read past the streams.
TEST(StreamsTest, RejectsStreamCountsOutOfRange) {
  std::vector<float> x(17 * 4, 1.0f), post(17, 1.0f), comb(17 * 17, 1.0f), y(4, 1.0f), out(4);
  EXPECT_DEATH(MixStreams(x.data(), 0, 4, 4, post.data(), comb.data(), y.data()), "0 streams");
  EXPECT_DEATH(MixStreams(x.data(), 17, 4, 4, post.data(), comb.data(), y.data()), "17 streams");
  EXPECT_DEATH(CollapseStreams(x.data(), 17, 4, 4, post.data(), out.data()), "17 streams");
}

}  // namespace
}  // namespace flashserve::kernels
