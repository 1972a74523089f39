// A packed weights file: matrices of a checkpoint copied once into the layouts the kernels read
// fastest (FP4 experts in lane pairs, the output head as it is), then mapped on every later
// start instead of being repacked into anonymous memory, so one copy of the weights is resident
// and processes on one machine share it. Write builds a file atomically; Open checks it against
// the checkpoint. Immutable after Open; threads may share it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/result.h"
#include "base/thread_pool.h"
#include "model/matrix.h"

namespace flashserve::model {

enum class PackKind : uint8_t {
  kVerbatim = 0,      // the same bytes: codes (or elements), then scales
  kFp4LanePairs = 1,  // Matrix::RepackFp4LanePairs
};

struct PackEntry {
  std::string name;  // unique and stable for a checkpoint ("layer 3 expert 17 w1", "head")
  Matrix source;     // the checkpoint's view
  PackKind kind = PackKind::kVerbatim;
};

// What the file was made from: the checkpoint's directory and model::Checkpoint::Fingerprint.
struct PackSource {
  std::string checkpoint_dir;
  uint64_t checkpoint_fingerprint = 0;
};

// Bumped whenever a layout a kind produces changes: files of another version are rebuilt.
inline constexpr uint32_t kPackFormatVersion = 1;

class PackedWeightsFile {
 public:
  // Maps `path` and checks its header against `source` and `entries` (names, kinds, shapes,
  // sizes, in order) and its size. kNotFound where there is no file; kFailedPrecondition where
  // it is stale (another checkpoint, version or entry list); kDataLoss where it is truncated
  // or its header is corrupt. Payload checksums are Verify's.
  static base::Result<PackedWeightsFile> Open(const std::string& path, const PackSource& source,
                                              const std::vector<PackEntry>& entries);
  // Writes the file: a temporary next to `path` (a unique name, created exclusively), space
  // reserved up front (a full disk fails before any packing), entries packed on `pool` and
  // written in place (verbatim ones straight from the checkpoint), the header last, then renamed
  // over `path`; its page cache is dropped so that the first mapping reads it back in 2 MiB
  // folios. `progress(done_bytes, total_bytes)` runs on pool threads, one call at a time;
  // `packed(i)` after entry i is on disk (on a pool thread). Nothing is left behind on error.
  static base::Status Write(const std::string& path, const PackSource& source, const std::vector<PackEntry>& entries,
                            base::ThreadPool& pool, const std::function<void(int64_t, int64_t)>& progress,
                            const std::function<void(size_t)>& packed);

  PackedWeightsFile() = default;

  // Reads the payload in, in 2 MiB pages where the kernel gives them; returns the bytes so mapped.
  int64_t Preload() const;
  // Every entry's checksum, on `pool`; a mismatch is kDataLoss naming the entry.
  base::Status Verify(base::ThreadPool& pool) const;
  // Entry i as a matrix reading from the mapping, or from `copy` (a copy of the payload,
  // payload_begin() onwards) when given.
  Matrix View(size_t i, const uint8_t* copy = nullptr) const;
  size_t num_entries() const { return entries_.size(); }
  const uint8_t* payload_begin() const { return file_.data() + payload_offset_; }
  size_t payload_bytes() const { return file_.size() - payload_offset_; }
  const base::MappedFile& file() const { return file_; }
  // Drops the process's pages of the payload (after copying it elsewhere).
  void ReleasePayload() const { file_.ReleaseRange(payload_offset_, payload_bytes()); }

 private:
  struct Stored {
    Matrix view;  // the entry's matrix as packed (layout, shape, scale ranges); View() points it at the bytes
    uint64_t offset = 0, bytes = 0, checksum = 0;
  };
  base::MappedFile file_;
  uint64_t payload_offset_ = 0;
  std::vector<Stored> entries_;
};

// Bytes of an entry's packed copy (its codes or elements, then its scales).
int64_t PackedBytes(const PackEntry& e);

// Entry e packed into `out` (PackedBytes(e) bytes: the file's layout, in memory); returns the
// matrix reading it there.
Matrix PackInto(const PackEntry& e, uint8_t* out);

// The directory's packed files whose checkpoint no longer exists, and temporaries left by
// processes that are gone, removed; returns how many. Files it cannot read are left alone.
int RemoveOrphanedPackedFiles(const std::string& dir);

}  // namespace flashserve::model
