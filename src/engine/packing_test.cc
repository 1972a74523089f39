// Model loading with the repacked matrices in a packed weights file: built on the first load,
// mapped on the next, rebuilt when corrupt, truncated or stale, repacked in memory where it
// cannot be written; the same logits every time, and the checkpoint's pages of the repacked
// matrices not resident.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/test_model.h"
#include "kernels/gemm/matmul.h"

namespace flashserve::engine {
namespace {

namespace fs = std::filesystem;
using testing::BitEqual;
using testing::RandomTokens;
using testing::RunChunked;

class PackingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("fs_packing_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    ckpt_ = root_ / "ckpt";
    model::ModelConfig c = model::TinyPreset();
    c.vocab_size = 1280;
    base::ThreadPool pool(2);
    ASSERT_TRUE(model::WriteRandomCheckpoint(c, ckpt_.string(), model::RandomCheckpointOptions{}, pool).ok());
    ModelLoadOptions plain;
    plain.fp4_lane_pairs = plain.head_in_huge_pages = false;
    auto m = Model::Load(ckpt_.string(), plain);
    ASSERT_TRUE(m.ok());
    plain_ = std::move(m).value();
    reference_ = Logits(*plain_);
  }
  void TearDown() override { fs::remove_all(root_); }

  ModelLoadOptions Packed() const {
    ModelLoadOptions o;
    o.packed_dir = (root_ / "packed").string();
    o.packed_file_min_bytes = 0;
    return o;
  }
  std::unique_ptr<Model> Load(const ModelLoadOptions& o) {
    auto m = Model::Load(ckpt_.string(), o);
    EXPECT_TRUE(m.ok()) << m.error().ToString();
    return m.ok() ? std::move(m).value() : nullptr;
  }
  static std::vector<float> Logits(const Model& m) {
    Engine e(m, EngineOptions{});
    auto s = e.NewSequence();
    return RunChunked(e, s.get(), RandomTokens(40, 3), {17, 23});
  }
  static fs::file_time_type Stamp(const std::string& path) { return fs::last_write_time(path); }

  fs::path root_, ckpt_;
  std::unique_ptr<Model> plain_;
  std::vector<float> reference_;
};

// Bytes of the whole 4 KiB pages inside the checkpoint's routed FP4 experts (codes and scales)
// and its output head: the pages only the repacked matrices use.
int64_t InteriorBytes(const model::Checkpoint& ckpt, bool fp4, bool head) {
  int64_t bytes = 0;
  for (const std::string& name : ckpt.Names()) {
    const model::TensorInfo* t = ckpt.Find(name);
    const bool expert = fp4 && name.find(".ffn.experts.") != std::string::npos &&
                        (t->dtype == model::DType::kI8 || name.ends_with(".scale"));
    if (!expert && !(head && name == "head.weight")) continue;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(t->data) + 4095) / 4096 * 4096;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(t->data) + t->num_bytes) / 4096 * 4096;
    if (end > begin) bytes += static_cast<int64_t>(end - begin);
  }
  return bytes;
}

bool FromFile(const Model& m) { return m.packing() == PackedFrom::kFile || m.packing() == PackedFrom::kFileCopied; }

TEST_F(PackingTest, BuiltOnceThenMappedWithTheSameLogits) {
  auto first = Load(Packed());
  ASSERT_TRUE(first);
  if (first->packing() == PackedFrom::kNone) GTEST_SKIP() << "nothing to repack here (no AVX-512, no huge pages)";
  EXPECT_TRUE(FromFile(*first));
  EXPECT_EQ(first->fp4_lane_pairs(), kernels::PrefersFp4LanePairs());
  const std::string path = first->packed_file_path();
  ASSERT_TRUE(fs::exists(path));
  const auto built = Stamp(path);
  EXPECT_TRUE(BitEqual(Logits(*first), reference_));

  auto second = Load(Packed());
  ASSERT_TRUE(second);
  EXPECT_TRUE(FromFile(*second));
  EXPECT_EQ(second->packed_file_path(), path);
  EXPECT_EQ(Stamp(path), built);  // mapped, not rewritten
  EXPECT_TRUE(BitEqual(Logits(*second), reference_));
  // The checkpoint's pages of the repacked matrices are not resident (all but the pages they
  // share with other tensors): one copy of each.
  const int64_t plain_rss = plain_->checkpoint().ResidentBytes();
  const int64_t packed_rss = second->checkpoint().ResidentBytes();
  const int64_t released = InteriorBytes(second->checkpoint(), second->fp4_lane_pairs(), second->head_in_huge_pages());
  ASSERT_GE(plain_rss, 0);
  EXPECT_GT(released, 0);
  EXPECT_LE(packed_rss, plain_rss - released) << plain_rss << " " << packed_rss << " " << released;
}

TEST_F(PackingTest, CorruptTruncatedAndStaleFilesAreRebuilt) {
  auto first = Load(Packed());
  ASSERT_TRUE(first);
  if (first->packing() == PackedFrom::kNone) GTEST_SKIP() << "nothing to repack here (no AVX-512, no huge pages)";
  const std::string path = first->packed_file_path();
  first.reset();
  const auto rebuilt_since = [&](fs::file_time_type t) { return Stamp(path) != t; };

  {  // a flipped payload byte
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2 << 20);
    f.put('\x5a');
  }
  fs::file_time_type t = Stamp(path);
  auto m = Load(Packed());
  ASSERT_TRUE(m && FromFile(*m));
  EXPECT_TRUE(rebuilt_since(t));
  EXPECT_TRUE(BitEqual(Logits(*m), reference_));

  fs::resize_file(path, fs::file_size(path) / 2);
  t = Stamp(path);
  m = Load(Packed());
  ASSERT_TRUE(m && FromFile(*m));
  EXPECT_TRUE(rebuilt_since(t));
  EXPECT_EQ(fs::file_size(path) % 4096, 0u);
  EXPECT_TRUE(BitEqual(Logits(*m), reference_));

  // A shard rewritten (here: only its time) makes the file stale.
  for (const fs::directory_entry& e : fs::directory_iterator(ckpt_))
    if (e.path().extension() == ".safetensors") fs::last_write_time(e.path(), Stamp(e.path().string()) + std::chrono::seconds(5));
  t = Stamp(path);
  m = Load(Packed());
  ASSERT_TRUE(m && FromFile(*m));
  EXPECT_TRUE(rebuilt_since(t));
  EXPECT_TRUE(BitEqual(Logits(*m), reference_));
}

TEST_F(PackingTest, AnUnwritableDirectoryFallsBackToMemory) {
  ModelLoadOptions o = Packed();
  std::ofstream((root_ / "a-file").string()) << "x";
  o.packed_dir = (root_ / "a-file" / "packed").string();  // cannot be created
  auto m = Load(o);
  ASSERT_TRUE(m);
  if (m->packing() == PackedFrom::kNone) GTEST_SKIP() << "nothing to repack here (no AVX-512, no huge pages)";
  EXPECT_EQ(m->packing(), PackedFrom::kMemory);
  EXPECT_TRUE(m->packed_file_path().empty());
  EXPECT_TRUE(BitEqual(Logits(*m), reference_));
  // Below the size threshold the memory path is taken without trying a file.
  o = Packed();
  o.packed_file_min_bytes = int64_t{1} << 40;
  m = Load(o);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->packing(), PackedFrom::kMemory);
  EXPECT_FALSE(fs::exists(root_ / "packed"));
}

}  // namespace
}  // namespace flashserve::engine
