// Engram hashing layout against values printed by numpy 1.24 / the HF41 formulas: the
// numpy-compatible generator, the per-layer multipliers, the prime buckets of the spec's tiny
// config (6126 rows) and the row ids of one 4-gram.
#include "model/engram_layout.h"

#include <gtest/gtest.h>

namespace flashserve::model {
namespace {

ModelConfig SpecTinyEngram() {
  ModelConfig c;
  c.engram.layer_ids = {1};
  c.engram.num_embeddings = {6126};
  c.engram.max_ngram_size = 4;
  c.engram.vocab_size = 1000;
  c.engram.num_heads = 2;
  c.engram.head_dim = 32;
  c.engram.compressed_vocab_size = 99092;
  return c;
}

TEST(EngramLayoutTest, GeneratorMatchesNumpyDefaultRng) {
  // numpy.random.default_rng(10007).bit_generator.random_raw(3)
  NumpyDefaultRng rng(10007);
  EXPECT_EQ(rng.NextUint64(), 15187255322829266483ull);
  EXPECT_EQ(rng.NextUint64(), 959186003677246517ull);
  EXPECT_EQ(rng.NextUint64(), 7126631698937927467ull);
}

TEST(EngramLayoutTest, MultipliersMatchNumpyForTheReleasedLayers) {
  // default_rng(10007 * layer).integers(0, (int64 max // 99092) // 2, 4) * 2 + 1
  ModelConfig c = SpecTinyEngram();
  c.engram.layer_ids = {1, 14, 0, 2};
  c.engram.num_embeddings.assign(4, 1 << 20);
  EngramHasher h(c);
  EXPECT_EQ(h.multipliers(0), (std::vector<int64_t>{76632096046245, 4839876093313, 35959672319349, 73987337458391}));
  EXPECT_EQ(h.multipliers(1), (std::vector<int64_t>{67716810739261, 51510806800915, 30921347202721, 82619226485591}));
  EXPECT_EQ(h.multipliers(2), (std::vector<int64_t>{59287678272599, 25111444230055, 3813769577005, 1538373747317}));
  EXPECT_EQ(h.multipliers(3), (std::vector<int64_t>{76507469730479, 37097805264573, 22647385550623, 71424551940645}));
  // Primes are never reused across layers: the second layer's start above the first's.
  EXPECT_EQ(h.primes(0).front(), 1009);
  EXPECT_GT(h.primes(1).front(), h.primes(0).back());
}

TEST(EngramLayoutTest, SpecTinyBucketsAndRowIds) {
  EngramHasher h(SpecTinyEngram());
  EXPECT_EQ(h.primes(0), (std::vector<int64_t>{1009, 1013, 1019, 1021, 1031, 1033}));
  EXPECT_EQ(h.TableRows(0), 6126);  // the spec's engram_num_embeddings
  EXPECT_EQ(h.num_columns(), 6);
  EXPECT_EQ(h.lookback(), 3);
  // Token 5 preceded by 7, 11, 13 (compressed ids), hashed as HF41 does (checked in numpy).
  std::vector<int64_t> grams = {5, 7, 11, 13};
  int64_t rows[6];
  h.RowIds(0, grams, rows);
  EXPECT_EQ(std::vector<int64_t>(rows, rows + 6), (std::vector<int64_t>{94, 1332, 2666, 3727, 4293, 5672}));
}

}  // namespace
}  // namespace flashserve::model
