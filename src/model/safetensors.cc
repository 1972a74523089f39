// safetensors reading (mmap + validated header) and writing (model/safetensors.h).
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "base/bytes.h"
#include "base/huge_pages.h"

namespace flashserve::model {

using base::Error;
using base::ErrorCode;
using base::Result;
using base::Status;
using nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 256ull << 20;

Error Bad(const std::string& file, const std::string& what) {
  return Error(ErrorCode::kBadCheckpoint, file + ": " + what);
}

Result<TensorInfo> ParseEntry(const std::string& file, const std::string& name, const json& entry,
                              const uint8_t* data_base, uint64_t data_size) {
  if (!entry.is_object()) return Bad(file, "tensor '" + name + "': entry is not an object");
  TensorInfo info;
  info.name = name;
  info.file = file;
  auto dt = entry.find("dtype");
  if (dt == entry.end() || !dt->is_string()) return Bad(file, "tensor '" + name + "': no dtype");
  auto parsed = ParseDType(dt->get<std::string>());
  if (!parsed) return Bad(file, "tensor '" + name + "': unknown dtype " + dt->get<std::string>());
  info.dtype = *parsed;
  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) return Bad(file, "tensor '" + name + "': no shape");
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return Bad(file, "tensor '" + name + "': bad shape entry");
    info.shape.push_back(d.get<int64_t>());
  }
  auto offs = entry.find("data_offsets");
  if (offs == entry.end() || !offs->is_array() || offs->size() != 2 ||
      !(*offs)[0].is_number_unsigned() || !(*offs)[1].is_number_unsigned())
    return Bad(file, "tensor '" + name + "': bad data_offsets");
  uint64_t begin = (*offs)[0].get<uint64_t>();
  uint64_t end = (*offs)[1].get<uint64_t>();
  if (begin > end || end > data_size)
    return Bad(file, "tensor '" + name + "': data_offsets [" + std::to_string(begin) + ", " +
                         std::to_string(end) + ") exceed the data section (" +
                         std::to_string(data_size) + " bytes; truncated file?)");
  // Overflow-safe element count.
  uint64_t count = 1;
  for (int64_t d : info.shape) {
    if (d != 0 && count > (1ull << 62) / static_cast<uint64_t>(d))
      return Bad(file, "tensor '" + name + "': shape too large");
    count *= static_cast<uint64_t>(d);
  }
  if (count * static_cast<uint64_t>(DTypeSize(info.dtype)) != end - begin)
    return Bad(file, "tensor '" + name + "': " + std::to_string(end - begin) +
                         " bytes do not match shape " + info.ShapeString() + " of " +
                         std::string(DTypeName(info.dtype)));
  info.data = data_base + begin;
  info.num_bytes = end - begin;
  return info;
}

}  // namespace

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  auto out = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  FS_ASSIGN_OR_RETURN(out->file_, base::MappedFile::Open(path));
  const uint8_t* p = out->file_.data();
  uint64_t size = out->file_.size();
  if (size < 8) return Bad(path, "file too small for a safetensors header (" + std::to_string(size) + " bytes)");
  uint64_t header_len = 0;
  std::memcpy(&header_len, p, 8);  // little-endian host
  if (header_len > kMaxHeaderBytes || header_len > size - 8)
    return Bad(path, "header length " + std::to_string(header_len) + " exceeds the file (" +
                         std::to_string(size) + " bytes; truncated or not safetensors)");
  json header = json::parse(p + 8, p + 8 + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return Bad(path, "header is not valid JSON");
  const uint8_t* data_base = p + 8 + header_len;
  uint64_t data_size = size - 8 - header_len;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it->is_object())
        for (auto m = it->begin(); m != it->end(); ++m)
          if (m->is_string()) out->metadata_[m.key()] = m->get<std::string>();
      continue;
    }
    FS_ASSIGN_OR_RETURN(TensorInfo info, ParseEntry(path, it.key(), *it, data_base, data_size));
    out->tensors_.emplace(it.key(), std::move(info));
  }
  return out;
}

Result<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  namespace fs = std::filesystem;
  auto ckpt = std::unique_ptr<Checkpoint>(new Checkpoint());
  fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  fs::path single = fs::path(dir) / "model.safetensors";
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    FS_ASSIGN_OR_RETURN(std::string text, base::ReadFileToString(index_path.string()));
    json index = json::parse(text, nullptr, false);
    if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") ||
        !index["weight_map"].is_object())
      return Bad(index_path.string(), "not a valid index (needs a weight_map object)");
    std::map<std::string, size_t> shard_ids;
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it->is_string()) return Bad(index_path.string(), "weight_map value is not a string");
      std::string shard = it->get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
        return Bad(index_path.string(), "shard name '" + shard + "' must be a file in the checkpoint directory");
      if (!shard_ids.count(shard)) {
        FS_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open((fs::path(dir) / shard).string()));
        shard_ids[shard] = ckpt->files_.size();
        ckpt->files_.push_back(std::move(file));
      }
      const auto& tensors = ckpt->files_[shard_ids[shard]]->tensors();
      auto found = tensors.find(it.key());
      if (found == tensors.end())
        return Error(ErrorCode::kMissingTensor, "tensor '" + it.key() + "' is listed in " +
                                                    index_path.string() + " but absent from shard " + shard);
      ckpt->index_[it.key()] = &found->second;
    }
  } else if (fs::exists(single, ec)) {
    FS_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(single.string()));
    for (const auto& [name, info] : file->tensors()) ckpt->index_[name] = &info;
    ckpt->files_.push_back(std::move(file));
  } else {
    return Error(ErrorCode::kNotFound, "no model.safetensors or model.safetensors.index.json in " + dir);
  }
  return ckpt;
}

const TensorInfo* Checkpoint::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

size_t Checkpoint::total_bytes() const {
  size_t total = 0;
  for (const auto& [name, info] : index_) total += info->num_bytes;
  return total;
}

Checkpoint::Preloaded Checkpoint::Preload() const {
  Preloaded p;
  for (const auto& f : files_) {
    p.huge_bytes += f->file().Preload();
    p.bytes += static_cast<int64_t>(f->file().size());
  }
  return p;
}

Checkpoint::Preloaded Checkpoint::Preload(const std::vector<std::span<const uint8_t>>& skip) const {
  if (skip.empty()) return Preload();
  Preloaded p;
  for (const auto& f : files_) {
    const base::MappedFile& file = f->file();
    std::vector<std::pair<size_t, size_t>> holes;  // [begin, end) offsets in this shard
    for (std::span<const uint8_t> s : skip)
      if (!s.empty() && s.data() >= file.data() && s.data() + s.size() <= file.data() + file.size())
        holes.emplace_back(s.data() - file.data(), s.data() - file.data() + s.size());
    std::sort(holes.begin(), holes.end());
    file.AdviseHugePages();
    size_t at = 0;
    for (const auto& [begin, end] : holes) {
      if (begin > at) file.PopulateRange(at, begin - at);
      at = std::max(at, end);
    }
    if (at < file.size()) file.PopulateRange(at, file.size() - at);
    p.huge_bytes += file.HugeMappedBytes();
    p.bytes += static_cast<int64_t>(file.size());
  }
  return p;
}

void Checkpoint::AdviseHugePages() const {
  for (const auto& f : files_) f->file().AdviseHugePages();
}

const base::MappedFile* Checkpoint::ShardOf(const uint8_t* p) const {
  for (const auto& f : files_)
    if (p >= f->file().data() && p < f->file().data() + f->file().size()) return &f->file();
  return nullptr;
}

void Checkpoint::Release(std::span<const uint8_t> range) const {
  if (range.empty()) return;
  if (const base::MappedFile* file = ShardOf(range.data()))
    file->ReleaseRange(static_cast<size_t>(range.data() - file->data()), range.size());
}

base::Result<std::vector<std::string>> Checkpoint::ReadPrefixes(std::span<const TensorInfo* const> tensors,
                                                               size_t n) const {
  std::map<const base::MappedFile*, int> fds;
  const auto close_all = [&] {
    for (const auto& [shard, fd] : fds) ::close(fd);
  };
  std::vector<std::string> out;
  for (const TensorInfo* t : tensors) {
    const base::MappedFile* shard = ShardOf(t->data);
    if (shard == nullptr) {
      close_all();
      return Error(ErrorCode::kInvalidArgument, "tensor '" + t->name + "' is not in this checkpoint");
    }
    auto [it, fresh] = fds.emplace(shard, -1);
    if (fresh) it->second = ::open(shard->path().c_str(), O_RDONLY | O_CLOEXEC);
    std::string bytes(std::min(n, t->num_bytes), '\0');
    const ssize_t got = it->second < 0 ? -1 : ::pread(it->second, bytes.data(), bytes.size(), static_cast<off_t>(t->data - shard->data()));
    if (got != static_cast<ssize_t>(bytes.size())) {
      const std::string why = got < 0 ? std::strerror(errno) : "short read";
      close_all();
      return Error(ErrorCode::kIoError, "cannot read tensor '" + t->name + "' from " + shard->path() + ": " + why);
    }
    out.push_back(std::move(bytes));
  }
  close_all();
  return out;
}

int64_t Checkpoint::ResidentBytes() const {
  int64_t total = 0;
  for (const auto& f : files_) {
    const int64_t rss = base::MappedFieldBytes(f->file().data(), f->file().size(), "Rss");
    if (rss < 0) return -1;
    total += rss;
  }
  return total;
}

uint64_t Checkpoint::Fingerprint() const {
  base::Checksum64Stream h;
  for (const auto& f : files_) {
    const base::MappedFile& file = f->file();
    struct stat st {};
    const int64_t mtime_ns = ::stat(file.path().c_str(), &st) == 0
                                 ? int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec
                                 : -1;
    uint64_t header_len = 0;
    std::memcpy(&header_len, file.data(), 8);  // validated at Open
    const std::string name = std::filesystem::path(file.path()).filename().string();
    const uint64_t fields[] = {name.size(), file.size(), static_cast<uint64_t>(mtime_ns),
                               base::Checksum64({reinterpret_cast<const char*>(file.data()), 8 + header_len})};
    h.Update(name);
    h.Update({reinterpret_cast<const char*>(fields), sizeof fields});
  }
  return h.Finish();
}

int64_t Checkpoint::file_bytes() const {
  int64_t total = 0;
  for (const auto& f : files_) total += static_cast<int64_t>(f->file().size());
  return total;
}

std::vector<std::string> Checkpoint::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, info] : index_) names.push_back(name);
  return names;
}

void SafetensorsWriter::Add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            std::string bytes) {
  total_ += bytes.size();
  entries_.push_back({name, dtype, std::move(shape), std::move(bytes)});
}

std::vector<std::string> SafetensorsWriter::Names() const {
  std::vector<std::string> names;
  for (const auto& e : entries_) names.push_back(e.name);
  return names;
}

Status SafetensorsWriter::Write(const std::string& path) const {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& e : entries_) {
    header[e.name] = {{"dtype", std::string(DTypeName(e.dtype))},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  std::string head = header.dump();
  while ((head.size() + 8) % 8 != 0) head.push_back(' ');
  uint64_t len = head.size();
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Error(ErrorCode::kIoError, "cannot create " + tmp + ": " + std::strerror(errno));
  auto write_all = [&](const void* data, size_t n) {
    const char* c = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd, c, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      c += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  };
  bool ok = write_all(&len, 8) && write_all(head.data(), head.size());
  for (const auto& e : entries_) ok = ok && write_all(e.bytes.data(), e.bytes.size());
  ok = ok && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Error(ErrorCode::kIoError, "cannot write " + path + ": " + err);
  }
  return Status::Ok();
}

}  // namespace flashserve::model
