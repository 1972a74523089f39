// Model loading, the repacked matrices (engine/model.h): which matrices are served from a copy
// (FP4 experts in lane pairs, the output head in 2 MiB pages), the copy mapped from a packed
// weights file or built in anonymous memory, the checkpoint's pages of those matrices released,
// and the rest of the checkpoint read in. Load's thread only.
#include <filesystem>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/huge_pages.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "engine/model.h"
#include "kernels/gemm/matmul.h"

namespace flashserve::engine {

namespace fs = std::filesystem;

namespace {

// Whether `bytes` fit in the available memory (true where that cannot be read); logs `fallback`
// (what happens instead) where they do not.
bool FitsInMemory(int64_t bytes, const char* what, const char* fallback) {
  const int64_t available = base::AvailableMemoryBytes();
  if (available <= 0 || bytes <= available) return true;
  FS_LOG(kWarning, "{}: {} ({:.1f} GB) need more than the available memory ({:.1f} GB)", fallback, what, bytes / 1e9,
         available / 1e9);
  return false;
}

bool LanePairable(const model::Matrix& m) {
  return m.valid() && m.format == model::MatrixFormat::kFp4 && m.fp4_layout == model::Fp4Layout::kCheckpoint &&
         m.cols % 32 == 0 && m.tile_cols == 32 && m.rows % model::kFp4GroupRows == 0;
}

int64_t PlanBytes(const std::vector<model::PackEntry>& entries) {
  int64_t bytes = 0;
  for (const model::PackEntry& e : entries) bytes += model::PackedBytes(e);
  return bytes;
}

// The checkpoint's bytes of a matrix: its codes or elements, and its scales.
std::vector<std::span<const uint8_t>> SourceRanges(const model::Matrix& m) {
  std::vector<std::span<const uint8_t>> r = {{m.data, static_cast<size_t>(m.rows * m.RowBytes())}};
  if (m.NumScales() > 0) r.emplace_back(m.scale, static_cast<size_t>(m.NumScales()));
  return r;
}

// "<dir's name>-<hash of its canonical path and of the entries' names and kinds>.fspack" in
// `packed_dir`: two packing sets of one checkpoint (another CPU, --no-huge-page-head) keep a
// file each instead of rewriting one.
std::string PackedFilePath(const std::string& packed_dir, const std::string& canonical_dir,
                           const std::vector<model::PackEntry>& entries) {
  base::Checksum64Stream h;
  h.Update(canonical_dir);
  for (const model::PackEntry& e : entries) {
    h.Update(e.name);
    h.Update(std::string(1, static_cast<char>(e.kind)) + "|");
  }
  return (fs::path(packed_dir) / fmt::format("{}-{:016x}.fspack", fs::path(canonical_dir).filename().string(), h.Finish()))
      .string();
}

std::string What(bool head, bool fp4) {
  return head && fp4 ? "FP4 experts in lane pairs and the output head" : head ? "the output head" : "FP4 experts in lane pairs";
}

}  // namespace

Model::PackPlan Model::PlanPacking(const ModelLoadOptions& options) {
  PackPlan plan;
  if (options.fp4_lane_pairs && kernels::PrefersFp4LanePairs()) {
    for (size_t l = 0; l < weights_.layers.size(); ++l) {
      model::MoeWeights& moe = weights_.layers[l].moe;
      for (int e = -1; e < static_cast<int>(moe.experts.size()); ++e) {
        model::ExpertWeights& x = e < 0 ? moe.shared : moe.experts[static_cast<size_t>(e)];
        model::Matrix* ms[] = {&x.w1, &x.w2, &x.w3};
        for (int k = 0; k < 3; ++k) {
          if (!LanePairable(*ms[k])) continue;
          const std::string who = e < 0 ? "shared" : "expert " + std::to_string(e);
          plan.entries.push_back({fmt::format("layer {} {} w{}", l, who, k + 1), *ms[k], model::PackKind::kFp4LanePairs});
          plan.targets.push_back(ms[k]);
          plan.fp4 = true;
        }
      }
    }
  }
  if (options.head_in_huge_pages && weights_.head.valid() && base::TransparentHugePagesAvailable()) {
    plan.entries.push_back({"head", weights_.head, model::PackKind::kVerbatim});
    plan.targets.push_back(&weights_.head);
    plan.head = true;
  }
  return plan;
}

void Model::ReleaseSources(const model::PackEntry& e) const {
  for (std::span<const uint8_t> r : SourceRanges(e.source)) checkpoint_->Release(r);
}

void Model::ServePacked(const PackPlan& plan, const ModelLoadOptions& options) {
  const int64_t bytes = PlanBytes(plan.entries);
  // Pages the loader's scans touched (scale and exponent ranges) go first; the packing then
  // releases each matrix's pages as it is done, so the peak stays near one copy.
  for (const model::PackEntry& e : plan.entries) ReleaseSources(e);
  const bool file = !options.packed_dir.empty() && bytes >= options.packed_file_min_bytes && ServeFromFile(plan, options);
  if (!file) {
    if (!FitsInMemory(bytes, "their repacked copy", "the checkpoint's layout is served as it is")) return;
    ServeFromMemory(plan);
    if (packing_ != PackedFrom::kMemory) return;
  }
  head_packed_ = plan.head;
  fp4_packed_ = plan.fp4;
}

namespace {

// The packed file opened, read in (where asked and it fits) and checked against its checksums.
base::Result<model::PackedWeightsFile> OpenChecked(const std::string& path, const model::PackSource& source,
                                                  const std::vector<model::PackEntry>& entries, bool preload,
                                                  base::ThreadPool& pool, bool* preloaded) {
  FS_ASSIGN_OR_RETURN(model::PackedWeightsFile file, model::PackedWeightsFile::Open(path, source, entries));
  *preloaded = preload && FitsInMemory(static_cast<int64_t>(file.payload_bytes()), "the packed weights",
                                       "they are read on demand");
  if (*preloaded) file.Preload();
  FS_RETURN_IF_ERROR(file.Verify(pool));
  return file;
}

}  // namespace

bool Model::ServeFromFile(const PackPlan& plan, const ModelLoadOptions& options) {
  std::error_code ec;
  const std::string canonical = fs::weakly_canonical(dir_, ec).string();
  const model::PackSource source{canonical.empty() ? dir_ : canonical, checkpoint_->Fingerprint()};
  const std::string path = PackedFilePath(options.packed_dir, source.checkpoint_dir, plan.entries);
  base::ThreadPool pool;  // all cores, for the load only
  const double t0 = base::MonotonicSeconds();
  bool preloaded = false;
  auto opened = OpenChecked(path, source, plan.entries, options.preload_weights, pool, &preloaded);
  if (!opened.ok()) {
    const bool first = opened.error().code() == base::ErrorCode::kNotFound;
    FS_LOG(kInfo, "{} {}: {} ({:.1f} MB, {} matrices); {}", first ? "packing" : "repacking", path,
           What(plan.head, plan.fp4), PlanBytes(plan.entries) / 1e6, plan.entries.size(),
           first ? "once for this checkpoint, mapped on later starts" : opened.error().ToString());
    fs::create_directories(options.packed_dir, ec);
    model::RemoveOrphanedPackedFiles(options.packed_dir);
    int last_tenth = 0;
    base::Status w = model::PackedWeightsFile::Write(
        path, source, plan.entries, pool,
        [&](int64_t done, int64_t total) {
          const int tenth = static_cast<int>(done * 10 / std::max<int64_t>(total, 1));
          if (tenth > last_tenth && tenth < 10) FS_LOG(kInfo, "packing: {}0% ({:.0f} of {:.0f} MB)", tenth, done / 1e6, total / 1e6);
          last_tenth = std::max(last_tenth, tenth);
        },
        [&](size_t i) { ReleaseSources(plan.entries[i]); });
    if (w.ok()) opened = OpenChecked(path, source, plan.entries, options.preload_weights, pool, &preloaded);
    if (!w.ok() || !opened.ok()) {
      FS_LOG(kWarning, "cannot {} the packed weights file ({}); repacking in memory instead",
             w.ok() ? "read back" : "write", (w.ok() ? opened.error() : w.error()).ToString());
      return false;
    }
  }
  packed_path_ = path;
  const int64_t huge = opened->file().HugeMappedBytes();
  const int64_t payload = static_cast<int64_t>(opened->payload_bytes());
  if (preloaded && huge * 2 < payload && base::TransparentHugePagesAvailable()) {
    // This file system maps the file in 4 KiB pages: the copy in 2 MiB pages decodes faster
    // (it fits: the preload asked).
    auto copy = base::HugePageBuffer::CopyOf(opened->payload_begin(), opened->payload_bytes());
    if (copy.ok() && copy->HugeBytes() > 0) {
      packed_copy_ = std::move(copy).value();
      for (size_t i = 0; i < plan.targets.size(); ++i) *plan.targets[i] = opened->View(i, packed_copy_.data());
      opened->ReleasePayload();
      packing_ = PackedFrom::kFileCopied;
      FS_LOG(kInfo, "packed weights {} read into 2 MiB pages of memory ({:.1f} MB; the file's own pages are 4 KiB) in {:.2f} s",
             path, payload / 1e6, base::MonotonicSeconds() - t0);
      return true;
    }
  }
  for (size_t i = 0; i < plan.targets.size(); ++i) *plan.targets[i] = opened->View(i);
  packed_file_ = std::move(opened).value();
  packing_ = PackedFrom::kFile;
  FS_LOG(kInfo, "packed weights mapped from {}: {} ({:.1f} MB, {:.1f} MB of it in 2 MiB pages), ready in {:.2f} s", path,
         What(plan.head, plan.fp4), payload / 1e6, huge / 1e6, base::MonotonicSeconds() - t0);
  return true;
}

void Model::ServeFromMemory(const PackPlan& plan) {
  const double t0 = base::MonotonicSeconds();
  std::vector<int64_t> offsets(plan.entries.size() + 1, 0);
  for (size_t i = 0; i < plan.entries.size(); ++i)
    offsets[i + 1] = offsets[i] + (model::PackedBytes(plan.entries[i]) + 63) / 64 * 64;
  std::vector<model::Matrix> packed(plan.entries.size());
  base::ThreadPool pool;  // all cores, for the load only
  auto copy = base::HugePageBuffer::Filled(static_cast<size_t>(offsets.back()), [&](uint8_t* dst) {
    pool.ParallelFor(static_cast<int64_t>(plan.entries.size()), 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const model::PackEntry& e = plan.entries[static_cast<size_t>(i)];
        // Codes, then scales, in the same 2 MiB pages.
        packed[static_cast<size_t>(i)] = model::PackInto(e, dst + offsets[static_cast<size_t>(i)]);
        ReleaseSources(e);
      }
    });
  });
  if (!copy.ok()) {
    FS_LOG(kWarning, "the checkpoint's layout is served as it is: {}", copy.error().ToString());
    return;
  }
  packed_copy_ = std::move(copy).value();
  for (size_t i = 0; i < plan.targets.size(); ++i) *plan.targets[i] = packed[i];
  packing_ = PackedFrom::kMemory;
  FS_LOG(kInfo, "repacked in memory: {}, {} matrices, {:.1f} MB in {:.2f} s ({:.1f} MB in 2 MiB pages)",
         What(plan.head, plan.fp4), packed.size(), offsets.back() / 1e6, base::MonotonicSeconds() - t0,
         packed_copy_.HugeBytes() / 1e6);
}

std::span<const uint8_t> Model::packed_region() const {
  if (packed_file_) return {packed_file_->payload_begin(), packed_file_->payload_bytes()};
  return {packed_copy_.data(), packed_copy_.size()};
}

void Model::PreloadWeights(const PackPlan& plan) {
  std::vector<std::span<const uint8_t>> skip;
  int64_t skipped = 0;
  if (packing_ != PackedFrom::kNone)
    for (const model::PackEntry& e : plan.entries)
      for (std::span<const uint8_t> r : SourceRanges(e.source)) {
        skip.push_back(r);
        skipped += static_cast<int64_t>(r.size());
      }
  if (!FitsInMemory(checkpoint_->file_bytes() - skipped, "the checkpoint's files", "weights are read on demand")) return;
  const double t0 = base::MonotonicSeconds();
  const model::Checkpoint::Preloaded p = checkpoint_->Preload(skip);
  for (std::span<const uint8_t> r : skip) checkpoint_->Release(r);  // pages the reads' fault-around mapped
  FS_LOG(kInfo, "weights read into memory: {:.1f} MB in {:.2f} s, {:.1f} MB of it in 2 MiB pages{}",
         (p.bytes - skipped) / 1e6, base::MonotonicSeconds() - t0, p.huge_bytes / 1e6,
         skipped > 0 ? fmt::format(" ({:.1f} MB served from the packed copy left out)", skipped / 1e6) : "");
}

}  // namespace flashserve::engine
