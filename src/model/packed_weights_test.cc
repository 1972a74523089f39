// Packed weights files: written and mapped back to the same matrices as packing in memory;
// missing, stale, truncated and corrupt files recognised as such; a failed write leaves nothing;
// orphaned files removed.
#include "model/packed_weights.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace flashserve::model {
namespace {

namespace fs = std::filesystem;

class PackedWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fs_packed_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::mt19937 rng(7);
    for (auto* v : {&fp4_codes_, &fp4_scales_, &bf16_}) {
      const size_t n = v == &fp4_codes_ ? 64 * 96 / 2 : v == &fp4_scales_ ? 64 * 3 : 40 * 24 * 2;
      v->resize(n);
      for (uint8_t& b : *v) b = static_cast<uint8_t>(v == &fp4_scales_ ? 120 + rng() % 16 : rng());
    }
    Matrix fp4;
    fp4.format = MatrixFormat::kFp4;
    fp4.rows = 64;
    fp4.cols = 96;
    fp4.data = fp4_codes_.data();
    fp4.scale = fp4_scales_.data();
    fp4.tile_cols = 32;
    fp4.scale_cols = 3;
    Matrix bf16;
    bf16.format = MatrixFormat::kBF16;
    bf16.rows = 40;
    bf16.cols = 24;
    bf16.data = bf16_.data();
    entries_ = {{"layer 0 expert 0 w1", fp4, PackKind::kFp4LanePairs}, {"head", bf16, PackKind::kVerbatim}};
    source_ = {"/checkpoints/a", 1234};
    path_ = (dir_ / "a.fspack").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  base::Status Write() {
    base::ThreadPool pool(2);
    return PackedWeightsFile::Write(path_, source_, entries_, pool, nullptr, nullptr);
  }
  // Flips one byte of the file at `offset`.
  void Flip(int64_t offset) {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    const char c = static_cast<char>(f.get() ^ 0x5A);
    f.seekp(offset);
    f.put(c);
  }

  fs::path dir_;
  std::string path_;
  std::vector<uint8_t> fp4_codes_, fp4_scales_, bf16_;
  std::vector<PackEntry> entries_;
  PackSource source_;
};

TEST_F(PackedWeightsTest, MappedMatricesEqualTheOnesPackedInMemory) {
  std::vector<size_t> packed_in_order;
  std::vector<int64_t> progress;
  base::ThreadPool pool(2);
  ASSERT_TRUE(PackedWeightsFile::Write(
                  path_, source_, entries_, pool, [&](int64_t done, int64_t) { progress.push_back(done); },
                  [&](size_t i) { packed_in_order.push_back(i); })
                  .ok());
  EXPECT_EQ(packed_in_order.size(), 2u);
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_EQ(progress.back(), PackedBytes(entries_[0]) + PackedBytes(entries_[1]));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);  // no temporary left
  auto file = PackedWeightsFile::Open(path_, source_, entries_);
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  file->Preload();
  EXPECT_TRUE(file->Verify(pool).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(file->payload_begin()) % (2 << 20), 0u);  // 2 MiB pages can map it

  std::vector<uint8_t> in_memory(static_cast<size_t>(PackedBytes(entries_[0])));
  const Matrix expected = entries_[0].source.RepackFp4LanePairs(in_memory.data());
  const Matrix fp4 = file->View(0);
  EXPECT_EQ(fp4.fp4_layout, Fp4Layout::kLanePairs);
  EXPECT_EQ(0, std::memcmp(fp4.data, in_memory.data(), in_memory.size()));
  for (int64_t r = 0; r < fp4.rows; r += 7)
    for (int64_t c = 0; c < fp4.cols; c += 5) ASSERT_EQ(fp4.At(r, c), expected.At(r, c)) << r << "," << c;
  const Matrix head = file->View(1);
  EXPECT_EQ(head.format, MatrixFormat::kBF16);
  EXPECT_EQ(head.scale, nullptr);
  EXPECT_EQ(0, std::memcmp(head.data, bf16_.data(), bf16_.size()));
  // The same views over a copy of the payload.
  std::vector<uint8_t> copy(file->payload_begin(), file->payload_begin() + file->payload_bytes());
  EXPECT_EQ(0, std::memcmp(file->View(1, copy.data()).data, bf16_.data(), bf16_.size()));
  EXPECT_EQ(file->View(0, copy.data()).At(9, 33), expected.At(9, 33));
}

TEST_F(PackedWeightsTest, MissingStaleTruncatedAndCorruptFilesAreNamed) {
  EXPECT_EQ(PackedWeightsFile::Open(path_, source_, entries_).error().code(), base::ErrorCode::kNotFound);
  ASSERT_TRUE(Write().ok());
  PackSource other = source_;
  other.checkpoint_fingerprint = 99;  // a shard changed
  EXPECT_EQ(PackedWeightsFile::Open(path_, other, entries_).error().code(), base::ErrorCode::kFailedPrecondition);
  other = source_;
  other.checkpoint_dir = "/checkpoints/b";
  EXPECT_EQ(PackedWeightsFile::Open(path_, other, entries_).error().code(), base::ErrorCode::kFailedPrecondition);
  std::vector<PackEntry> renamed = entries_;
  renamed[1].name = "embed";
  EXPECT_EQ(PackedWeightsFile::Open(path_, source_, renamed).error().code(), base::ErrorCode::kFailedPrecondition);
  std::vector<PackEntry> reshaped = entries_;
  reshaped[1].source.rows = 20;
  EXPECT_EQ(PackedWeightsFile::Open(path_, source_, reshaped).error().code(), base::ErrorCode::kFailedPrecondition);
  reshaped.pop_back();
  EXPECT_EQ(PackedWeightsFile::Open(path_, source_, reshaped).error().code(), base::ErrorCode::kFailedPrecondition);

  base::ThreadPool pool(2);
  Flip(2 << 20);  // the payload's first byte (entry 0's): the header still matches, the checksum does not
  auto corrupt = PackedWeightsFile::Open(path_, source_, entries_);
  ASSERT_TRUE(corrupt.ok());
  const base::Status v = corrupt->Verify(pool);
  EXPECT_EQ(v.error().code(), base::ErrorCode::kDataLoss);
  EXPECT_NE(v.error().message().find("entry 0"), std::string::npos) << v.error().message();

  ASSERT_TRUE(Write().ok());
  Flip(30);  // inside the header
  EXPECT_EQ(PackedWeightsFile::Open(path_, source_, entries_).error().code(), base::ErrorCode::kDataLoss);

  ASSERT_TRUE(Write().ok());
  fs::resize_file(path_, fs::file_size(path_) - 4096);
  EXPECT_EQ(PackedWeightsFile::Open(path_, source_, entries_).error().code(), base::ErrorCode::kDataLoss);
  fs::resize_file(path_, 100);
  EXPECT_EQ(PackedWeightsFile::Open(path_, source_, entries_).error().code(), base::ErrorCode::kDataLoss);
}

// A write that runs out of room (here a file-size limit, as a full disk) fails with a clear
// error and leaves neither the file nor its temporary.
TEST_F(PackedWeightsTest, AFailedWriteLeavesNothing) {
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 1 << 20;  // the payload starts at 2 MiB
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const base::Status st = Write();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find(".tmp."), std::string::npos) << st.error().message();
  EXPECT_TRUE(fs::is_empty(dir_));
  base::ThreadPool pool(1);
  EXPECT_FALSE(PackedWeightsFile::Write((dir_ / "missing" / "x.fspack").string(), source_, entries_, pool, nullptr,
                                        nullptr)
                   .ok());
}

TEST_F(PackedWeightsTest, OrphanedFilesAndDeadTemporariesAreRemoved) {
  const fs::path live_ckpt = dir_ / "ckpt";
  fs::create_directories(live_ckpt);
  source_.checkpoint_dir = live_ckpt.string();
  ASSERT_TRUE(Write().ok());
  const std::string kept = path_;
  source_.checkpoint_dir = (dir_ / "deleted-ckpt").string();
  path_ = (dir_ / "b.fspack").string();
  ASSERT_TRUE(Write().ok());
  // A checkpoint whose name looks like a temporary's keeps its file.
  source_.checkpoint_dir = live_ckpt.string();
  path_ = (dir_ / "x.tmp.1-0123456789abcdef.fspack").string();
  ASSERT_TRUE(Write().ok());
  const std::string dead_tmp = (dir_ / "c.fspack.tmp.999999999.ab12cd34").string();               // no such process
  const std::string live_tmp = (dir_ / ("d.fspack.tmp." + std::to_string(::getpid()) + ".ef56")).string();  // a writer
  std::ofstream(dead_tmp) << "x";
  std::ofstream(live_tmp) << "x";
  std::ofstream((dir_ / "notes.txt").string()) << "x";
  EXPECT_EQ(RemoveOrphanedPackedFiles(dir_.string()), 2);
  EXPECT_TRUE(fs::exists(kept));
  EXPECT_TRUE(fs::exists(path_));
  EXPECT_FALSE(fs::exists(dir_ / "b.fspack"));
  EXPECT_FALSE(fs::exists(dead_tmp));
  EXPECT_TRUE(fs::exists(live_tmp));
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));
  EXPECT_EQ(RemoveOrphanedPackedFiles((dir_ / "nonexistent").string()), 0);
}

}  // namespace
}  // namespace flashserve::model
