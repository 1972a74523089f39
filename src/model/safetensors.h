// Read-only access to safetensors checkpoints by mmap (no weight copies): a single
// model.safetensors or sharded model-*.safetensors with model.safetensors.index.json.
// Every header, offset and shard is validated on open; errors name the file and tensor.
// Immutable after Open; safe to share between threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/result.h"
#include "model/dtype.h"

namespace flashserve::model {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapped shard
  size_t num_bytes = 0;
  std::string file;  // shard path, for messages

  int64_t NumElements() const;
  std::string ShapeString() const;  // "[8, 32]"
};

class SafetensorsFile {
 public:
  static base::Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const base::MappedFile& file() const { return file_; }

 private:
  base::MappedFile file_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory (one file or an index + shards).
class Checkpoint {
 public:
  static base::Result<std::unique_ptr<Checkpoint>> Open(const std::string& dir);
  const TensorInfo* Find(const std::string& name) const;
  size_t num_tensors() const { return index_.size(); }
  size_t total_bytes() const;
  std::vector<std::string> Names() const;
  // Every shard read into memory now, in 2 MiB pages where the kernel gives them
  // (base::MappedFile::Preload). Bytes read and bytes mapped with 2 MiB entries.
  struct Preloaded {
    int64_t bytes = 0, huge_bytes = 0;
  };
  Preloaded Preload() const;
  // The same, leaving out the byte ranges in `skip` (inside the shards: tensors served from a
  // copy), whose pages are then not read unless they share a page with a kept tensor.
  Preloaded Preload(const std::vector<std::span<const uint8_t>>& skip) const;
  // MADV_HUGEPAGE over every shard, before anything reads them (base::MappedFile).
  void AdviseHugePages() const;
  // Drops the process's pages of `range` (inside one shard; base::MappedFile::ReleaseRange).
  void Release(std::span<const uint8_t> range) const;
  // The first min(n, size) bytes of each tensor, read from the files (pread, each shard opened
  // once), not through the mapping: pages of matrices served from a packed copy stay out of the
  // resident set.
  base::Result<std::vector<std::string>> ReadPrefixes(std::span<const TensorInfo* const> tensors, size_t n) const;
  // Bytes of the shards' mappings resident in this process (Rss of /proc/self/smaps; -1 where
  // unknown).
  int64_t ResidentBytes() const;
  // Identity of the files: each shard's name, size, modification time and header checksum.
  // A copy derived from the checkpoint is stale when this changes.
  uint64_t Fingerprint() const;
  int64_t file_bytes() const;  // the shards' sizes

 private:
  // The shard holding `p`, or nullptr.
  const base::MappedFile* ShardOf(const uint8_t* p) const;

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
};

// Writes one safetensors file: header JSON (8-byte little-endian length, padded to 8 bytes)
// followed by the tensor bytes in insertion order. Used by make-model and tests.
class SafetensorsWriter {
 public:
  void Add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::string bytes);
  size_t num_bytes() const { return total_; }
  bool empty() const { return entries_.empty(); }
  std::vector<std::string> Names() const;
  // Writes atomically (temp file + rename).
  base::Status Write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Entry> entries_;
  size_t total_ = 0;
};

}  // namespace flashserve::model
