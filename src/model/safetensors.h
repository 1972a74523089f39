// Read-only access to safetensors checkpoints by mmap (no weight copies): a single
// model.safetensors or sharded model-*.safetensors with model.safetensors.index.json.
// Every header, offset and shard is validated on open; errors name the file and tensor.
// Immutable after Open; safe to share between threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
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
  int64_t file_bytes() const;  // the shards' sizes

 private:
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
