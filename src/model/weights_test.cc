#include "model/weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "base/file_util.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"

namespace flashserve::model {
namespace {

namespace fs = std::filesystem;

ModelConfig SmallConfig() {
  ModelConfig c = TinyPreset();
  c.vocab_size = 512;
  return c;
}

class WeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fs_weights_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Copies every tensor of the generated checkpoint through `edit` into a new single file.
  void Rewrite(const std::function<bool(const TensorInfo&, SafetensorsWriter*)>& edit) {
    auto ckpt = Checkpoint::Open(dir_).value();
    SafetensorsWriter w;
    for (const auto& name : ckpt->Names()) {
      const TensorInfo* t = ckpt->Find(name);
      if (!edit(*t, &w)) w.Add(name, t->dtype, t->shape, std::string(reinterpret_cast<const char*>(t->data), t->num_bytes));
    }
    ckpt.reset();
    fs::remove(dir_ + "/model.safetensors.index.json");
    for (auto& e : fs::directory_iterator(dir_))
      if (e.path().extension() == ".safetensors") fs::remove(e.path());
    ASSERT_TRUE(w.Write(dir_ + "/model.safetensors").ok());
  }

  base::Status Load() {
    FS_ASSIGN_OR_RETURN(ModelConfig c, LoadModelConfig(dir_));
    FS_ASSIGN_OR_RETURN(auto ckpt, Checkpoint::Open(dir_));
    auto w = LoadModelWeights(*ckpt, c, BuildLayerPlan(c));
    if (!w.ok()) return w.error();
    unused_ = ckpt->num_tensors() - w->num_tensors;
    return base::Status::Ok();
  }

  std::string dir_;
  size_t unused_ = 0;
  base::ThreadPool pool_{2};
};

TEST_F(WeightsTest, GeneratedCheckpointLoadsCompletelyInAllFormats) {
  for (bool bf16 : {false, true}) {
    RandomCheckpointOptions opt;
    opt.bf16 = bf16;
    ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, opt, pool_).ok());
    base::Status s = Load();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(unused_, 0u);  // the writer's tensor list and the loader agree
    fs::remove_all(dir_);
  }
}

// Quantized matrices carry the range of their scale bytes from the load (the products read it
// on every call instead of scanning the scales); a row slice's own range is not known.
TEST_F(WeightsTest, QuantizedMatricesRecordTheirScaleRange) {
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, RandomCheckpointOptions{}, pool_).ok());
  ModelConfig c = LoadModelConfig(dir_).value();
  auto ckpt = Checkpoint::Open(dir_).value();
  auto w = LoadModelWeights(*ckpt, c, BuildLayerPlan(c));
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  const LayerWeights& layer = w->layers[0];
  for (const Matrix* m : {&layer.moe.experts[0].w1, &layer.moe.experts[1].w2, &layer.attn.wq_b}) {
    SCOPED_TRACE(m->Describe());
    ASSERT_TRUE(m->quantized());
    const uint8_t* end = m->scale + m->NumScales();
    EXPECT_EQ(m->scale_lo, *std::min_element(m->scale, end));
    EXPECT_EQ(m->scale_hi, *std::max_element(m->scale, end));
    // FP4: a scale per 32 random weights, which differ, so both ends are checked.
    if (m->format == MatrixFormat::kFp4) {
      EXPECT_LT(m->scale_lo, m->scale_hi);
    }
    const Matrix slice = m->RowSlice(0, m->tile_rows);
    EXPECT_EQ(slice.scale_lo, -1);
    EXPECT_EQ(slice.scale_hi, -1);
  }
  EXPECT_EQ(w->head.scale_lo, -1);  // not quantized: no scales
}

TEST_F(WeightsTest, GeneratedV41CheckpointLoadsCompletelyWithItsRoleTensors) {
  ModelConfig c = TinyV41Preset();
  c.vocab_size = 512;
  c.engram.compressed_vocab_size = 500;
  ASSERT_TRUE(WriteRandomCheckpoint(c, dir_, RandomCheckpointOptions{}, pool_).ok());
  base::Status s = Load();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(unused_, 0u);
  auto ckpt = Checkpoint::Open(dir_).value();
  // KV sources own the compressor (no ape; no wgate at ratio 1) and the index-key projection;
  // the reindexing layer 6 has an indexer without keys; reusing layers have neither; no hc_head.
  EXPECT_NE(ckpt->Find("layers.2.attn.compressor.wgate.weight"), nullptr);
  EXPECT_EQ(ckpt->Find("layers.4.attn.compressor.wgate.weight"), nullptr);
  EXPECT_EQ(ckpt->Find("layers.2.attn.compressor.ape"), nullptr);
  EXPECT_NE(ckpt->Find("layers.4.attn.indexer.wk.weight"), nullptr);
  EXPECT_NE(ckpt->Find("layers.6.attn.indexer.wq_b.weight"), nullptr);
  EXPECT_EQ(ckpt->Find("layers.6.attn.indexer.wk.weight"), nullptr);
  EXPECT_EQ(ckpt->Find("layers.5.attn.compressor.wkv.weight"), nullptr);
  EXPECT_EQ(ckpt->Find("layers.5.attn.indexer.wq_b.weight"), nullptr);
  EXPECT_NE(ckpt->Find("layers.3.ffn.gate.bias_vl"), nullptr);
  EXPECT_EQ(ckpt->Find("hc_head_fn"), nullptr);
  // Engram at layer 1: FP8 rows with a ue8m0 scale per 32 columns, the projection, the gates.
  const TensorInfo* table = ckpt->Find("layers.1.engram.embed.weight");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->shape, (std::vector<int64_t>{6126, 32}));
  EXPECT_EQ(ckpt->Find("layers.1.engram.embed.scale")->shape, (std::vector<int64_t>{6126, 1}));
  EXPECT_EQ(ckpt->Find("layers.1.engram.wkv.weight")->shape, (std::vector<int64_t>{5 * 256, 6 * 32}));
  EXPECT_NE(ckpt->Find("layers.1.engram.q_weight"), nullptr);
  EXPECT_EQ(ckpt->Find("layers.2.engram.embed.weight"), nullptr);
  const TensorInfo* scale = ckpt->Find("layers.0.attn.wq_a.scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->shape, (std::vector<int64_t>{128 / 32, 256 / 32}));  // 32x32 tiles
  // An Engram table smaller than its hash buckets (6126 rows here) is refused by name.
  {
    ModelConfig small = c;
    small.engram.num_embeddings = {6000};
    const std::string dir2 = dir_ + "_small";
    ASSERT_TRUE(WriteRandomCheckpoint(small, dir2, RandomCheckpointOptions{}, pool_).ok());
    auto cfg = LoadModelConfig(dir2).value();
    auto ck = Checkpoint::Open(dir2).value();
    auto w = LoadModelWeights(*ck, cfg, BuildLayerPlan(cfg));
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().message().find("hash buckets need 6126 rows"), std::string::npos) << w.error().ToString();
    ck.reset();
    fs::remove_all(dir2);
  }
  // A missing role tensor is named in the error.
  ckpt.reset();
  Rewrite([](const TensorInfo& t, SafetensorsWriter*) { return t.name == "layers.4.attn.indexer.k_norm.weight"; });
  s = Load();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("layers.4.attn.indexer.k_norm.weight"), std::string::npos) << s.ToString();
}

TEST_F(WeightsTest, ShardedCheckpointWithIndexLoads) {
  RandomCheckpointOptions opt;
  opt.shard_bytes = 4 << 20;
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, opt, pool_).ok());
  EXPECT_TRUE(fs::exists(dir_ + "/model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir_ + "/model.safetensors"));
  base::Status s = Load();
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// Tensor prefixes read from the shard files equal the mapped bytes; the fingerprint changes
// with a shard's modification time and not otherwise.
TEST_F(WeightsTest, PrefixesAndFingerprintOfAShardedCheckpoint) {
  RandomCheckpointOptions opt;
  opt.shard_bytes = 4 << 20;
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, opt, pool_).ok());
  auto ckpt = Checkpoint::Open(dir_).value();
  std::vector<const TensorInfo*> tensors;
  for (const std::string& name : ckpt->Names()) tensors.push_back(ckpt->Find(name));
  auto prefixes = ckpt->ReadPrefixes(tensors, 32);
  ASSERT_TRUE(prefixes.ok()) << prefixes.error().ToString();
  ASSERT_EQ(prefixes->size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t n = std::min<size_t>(32, tensors[i]->num_bytes);
    ASSERT_EQ((*prefixes)[i], std::string(reinterpret_cast<const char*>(tensors[i]->data), n)) << tensors[i]->name;
  }
  TensorInfo stranger = *tensors[0];
  const uint8_t outside[4] = {};
  stranger.data = outside;
  const TensorInfo* bad[] = {&stranger};
  EXPECT_EQ(ckpt->ReadPrefixes(bad, 4).error().code(), base::ErrorCode::kInvalidArgument);

  const uint64_t fingerprint = ckpt->Fingerprint();
  EXPECT_EQ(Checkpoint::Open(dir_).value()->Fingerprint(), fingerprint);
  for (const auto& e : fs::directory_iterator(dir_))
    if (e.path().extension() == ".safetensors") {
      fs::last_write_time(e.path(), fs::last_write_time(e.path()) + std::chrono::seconds(3));
      break;
    }
  EXPECT_NE(Checkpoint::Open(dir_).value()->Fingerprint(), fingerprint);
}

TEST_F(WeightsTest, GenerationIsDeterministicPerSeed) {
  RandomCheckpointOptions opt;
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, opt, pool_).ok());
  std::string a = base::ReadFileToString(dir_ + "/model.safetensors").value();
  base::ThreadPool one(1);
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, opt, one).ok());
  EXPECT_EQ(a, base::ReadFileToString(dir_ + "/model.safetensors").value());
  opt.seed = 99;
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, opt, pool_).ok());
  EXPECT_NE(a, base::ReadFileToString(dir_ + "/model.safetensors").value());
}

void ExpectError(base::Status s, base::ErrorCode code, const std::string& needle) {
  ASSERT_FALSE(s.ok()) << "expected failure mentioning " << needle;
  EXPECT_EQ(s.error().code(), code) << s.ToString();
  EXPECT_NE(s.error().message().find(needle), std::string::npos) << s.ToString();
}

TEST_F(WeightsTest, MissingWrongDtypeOrShapeIsReportedByName) {
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, {}, pool_).ok());
  Rewrite([](const TensorInfo& t, SafetensorsWriter*) { return t.name == "layers.3.attn.wkv.scale"; });
  ExpectError(Load(), base::ErrorCode::kMissingTensor, "layers.3.attn.wkv.scale");

  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, {}, pool_).ok());
  Rewrite([](const TensorInfo& t, SafetensorsWriter* w) {
    if (t.name != "layers.1.attn.compressor.ape") return false;
    w->Add(t.name, DType::kF32, {4, 999}, std::string(4 * 4 * 999, '\0'));
    return true;
  });
  ExpectError(Load(), base::ErrorCode::kBadTensor, "layers.1.attn.compressor.ape");

  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, {}, pool_).ok());
  Rewrite([](const TensorInfo& t, SafetensorsWriter* w) {
    if (t.name != "embed.weight") return false;
    w->Add(t.name, DType::kI64, {512, 64}, std::string(512 * 64 * 8, '\0'));
    return true;
  });
  ExpectError(Load(), base::ErrorCode::kBadTensor, "embed.weight");

  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, {}, pool_).ok());
  Rewrite([](const TensorInfo& t, SafetensorsWriter* w) {
    if (t.name != "layers.0.ffn.gate.tid2eid") return false;
    std::vector<int64_t> ids(512 * 4, 3);
    ids[17] = 16;  // expert id out of range
    w->Add(t.name, DType::kI64, {512, 4}, std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8));
    return true;
  });
  ExpectError(Load(), base::ErrorCode::kBadTensor, "tid2eid");
}

TEST_F(WeightsTest, CorruptOrTruncatedFilesAreCleanErrors) {
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), dir_, {}, pool_).ok());
  const std::string path = dir_ + "/model.safetensors";
  std::string bytes = base::ReadFileToString(path).value();
  ASSERT_TRUE(base::WriteFileAtomic(path, bytes.substr(0, bytes.size() / 2)).ok());
  ExpectError(Checkpoint::Open(dir_).status(), base::ErrorCode::kBadCheckpoint, "truncated");
  std::string corrupt = bytes;
  corrupt[12] = '\x01';  // inside the JSON header
  ASSERT_TRUE(base::WriteFileAtomic(path, corrupt).ok());
  ExpectError(Checkpoint::Open(dir_).status(), base::ErrorCode::kBadCheckpoint, "JSON");
  ASSERT_TRUE(base::WriteFileAtomic(path, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8)).ok());
  ExpectError(Checkpoint::Open(dir_).status(), base::ErrorCode::kBadCheckpoint, "header length");
  ASSERT_TRUE(base::WriteFileAtomic(path, "abc").ok());
  ExpectError(Checkpoint::Open(dir_).status(), base::ErrorCode::kBadCheckpoint, "too small");
  fs::remove(path);
  ExpectError(Checkpoint::Open(dir_).status(), base::ErrorCode::kNotFound, "model.safetensors");
  // An index naming a shard outside the directory is refused.
  ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/model.safetensors.index.json",
                                    R"({"weight_map": {"embed.weight": "../x.safetensors"}})").ok());
  ExpectError(Checkpoint::Open(dir_).status(), base::ErrorCode::kBadCheckpoint, "shard name");
}

}  // namespace
}  // namespace flashserve::model
