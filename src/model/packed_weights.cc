// Packed weights files (model/packed_weights.h). Layout: a header (magic, version, the
// checkpoint's directory and fingerprint, the entries' names, shapes, offsets and checksums,
// and the header's own checksum), then from the first 2 MiB boundary the entries' bytes, each
// 64-byte aligned.
#include "model/packed_weights.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <random>

#include <fmt/format.h>

#include "base/bytes.h"

namespace flashserve::model {

using base::Error;
using base::ErrorCode;
using base::Result;
using base::Status;

namespace {

constexpr char kMagic[8] = {'F', 'S', 'P', 'A', 'C', 'K', 'W', '\n'};
constexpr uint64_t kPayloadAlign = uint64_t{2} << 20;
constexpr uint64_t kEntryAlign = 64;
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 30;
constexpr char kExtension[] = ".fspack";

uint64_t RoundUp(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

struct Header {
  uint32_t version = kPackFormatVersion;
  uint64_t payload_offset = 0, file_bytes = 0, fingerprint = 0;
  std::string dir;
  struct Entry {
    std::string name;
    uint8_t kind = 0, format = 0;
    int64_t rows = 0, cols = 0;
    uint64_t offset = 0, bytes = 0, checksum = 0;
  };
  std::vector<Entry> entries;
};

std::string Encode(const Header& h) {
  base::ByteWriter w;
  w.PutBytes(kMagic, sizeof kMagic);
  w.Put<uint32_t>(h.version);
  w.Put<uint64_t>(h.payload_offset);
  w.Put<uint64_t>(h.file_bytes);
  w.Put<uint64_t>(h.fingerprint);
  w.Put<uint32_t>(static_cast<uint32_t>(h.dir.size()));
  w.PutBytes(h.dir.data(), h.dir.size());
  w.Put<uint64_t>(h.entries.size());
  for (const Header::Entry& e : h.entries) {
    w.Put<uint32_t>(static_cast<uint32_t>(e.name.size()));
    w.PutBytes(e.name.data(), e.name.size());
    w.Put<uint8_t>(e.kind);
    w.Put<uint8_t>(e.format);
    w.Put<int64_t>(e.rows);
    w.Put<int64_t>(e.cols);
    w.Put<uint64_t>(e.offset);
    w.Put<uint64_t>(e.bytes);
    w.Put<uint64_t>(e.checksum);
  }
  w.Put<uint64_t>(base::Checksum64(w.str()));
  return std::move(w.str());
}

bool GetString(base::ByteReader& r, std::string* out, uint32_t limit) {
  uint32_t n = 0;
  std::string_view v;
  if (!r.Get(&n) || n > limit || !r.View(n, &v)) return false;
  out->assign(v);
  return true;
}

// The fixed part and the directory: enough to tell which checkpoint a file belongs to.
bool DecodeSource(base::ByteReader& r, Header* h) {
  char magic[sizeof kMagic];
  return r.GetBytes(magic, sizeof magic) && std::memcmp(magic, kMagic, sizeof kMagic) == 0 && r.Get(&h->version) &&
         r.Get(&h->payload_offset) && r.Get(&h->file_bytes) && r.Get(&h->fingerprint) && GetString(r, &h->dir, 1 << 16);
}

Result<Header> Decode(std::string_view bytes, const std::string& path) {
  const auto corrupt = [&](const std::string& what) { return Error(ErrorCode::kDataLoss, path + ": " + what); };
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return corrupt("not a packed weights file");
  Header h;
  base::ByteReader r(bytes);
  uint64_t n = 0;
  if (!DecodeSource(r, &h)) return corrupt("truncated header");
  if (h.version != kPackFormatVersion)
    return Error(ErrorCode::kFailedPrecondition, path + ": format version " + std::to_string(h.version) + ", not " +
                                                     std::to_string(kPackFormatVersion));
  constexpr uint64_t kMinEntryBytes = 4 + 1 + 1 + 8 * 5;  // an entry with an empty name
  if (!r.Get(&n) || n > r.remaining() / kMinEntryBytes) return corrupt("bad entry count");
  h.entries.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    Header::Entry& e = h.entries.emplace_back();
    if (!GetString(r, &e.name, 1 << 12) || !r.Get(&e.kind) || !r.Get(&e.format) || !r.Get(&e.rows) || !r.Get(&e.cols) ||
        !r.Get(&e.offset) || !r.Get(&e.bytes) || !r.Get(&e.checksum))
      return corrupt("truncated header");
  }
  const size_t covered = bytes.size() - r.remaining();
  uint64_t checksum = 0;
  if (!r.Get(&checksum) || checksum != base::Checksum64(bytes.substr(0, covered))) return corrupt("header checksum mismatch");
  return h;
}

Error Stale(const std::string& path, const std::string& why) {
  return Error(ErrorCode::kFailedPrecondition, path + " is stale: " + why);
}

// The header's entries against the ones asked for, and its offsets against the file.
Status CheckEntries(const Header& h, const std::vector<PackEntry>& entries, uint64_t file_size, const std::string& path) {
  if (h.entries.size() != entries.size())
    return Stale(path, std::to_string(h.entries.size()) + " entries, not " + std::to_string(entries.size()));
  for (size_t i = 0; i < entries.size(); ++i) {
    const Header::Entry& s = h.entries[i];
    const PackEntry& e = entries[i];
    if (s.name != e.name || s.kind != static_cast<uint8_t>(e.kind) || s.format != static_cast<uint8_t>(e.source.format) ||
        s.rows != e.source.rows || s.cols != e.source.cols || s.bytes != static_cast<uint64_t>(PackedBytes(e)))
      return Stale(path, "entry " + std::to_string(i) + " is '" + s.name + "', not '" + e.name + "' as asked");
    if (s.offset < h.payload_offset || s.offset % kEntryAlign != 0 || s.offset > file_size || s.bytes > file_size - s.offset)
      return Error(ErrorCode::kDataLoss, path + ": entry '" + s.name + "' lies outside the file");
  }
  return Status::Ok();
}

Error Errno(ErrorCode code, const std::string& what, const std::string& path) {
  return Error(errno == ENOSPC || errno == EDQUOT ? ErrorCode::kResourceExhausted : code,
               what + " " + path + ": " + std::strerror(errno));
}

Status PwriteAll(int fd, const uint8_t* data, size_t n, uint64_t offset, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Errno(ErrorCode::kIoError, "cannot write", path);
    data += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

// Writes entry e at `offset` of `fd` and returns its checksum: a verbatim entry straight from
// the checkpoint, a repacked one through a buffer of its own size, freed on return (nothing of
// the packing stays resident after the load).
Result<uint64_t> WriteEntry(int fd, const PackEntry& e, uint64_t offset, const std::string& path) {
  const Matrix& m = e.source;
  const size_t data_bytes = static_cast<size_t>(m.rows * m.RowBytes());
  if (e.kind == PackKind::kFp4LanePairs) {
    const size_t bytes = static_cast<size_t>(PackedBytes(e));
    std::unique_ptr<uint8_t[]> buffer(new (std::nothrow) uint8_t[bytes]);
    if (!buffer) return Error(ErrorCode::kResourceExhausted, "no memory to pack '" + e.name + "'");
    PackInto(e, buffer.get());
    FS_RETURN_IF_ERROR(PwriteAll(fd, buffer.get(), bytes, offset, path));
    return base::Checksum64({reinterpret_cast<const char*>(buffer.get()), bytes});
  }
  base::Checksum64Stream sum;
  sum.Update({reinterpret_cast<const char*>(m.data), data_bytes});
  FS_RETURN_IF_ERROR(PwriteAll(fd, m.data, data_bytes, offset, path));
  if (m.NumScales() > 0) {
    const size_t scale_bytes = static_cast<size_t>(m.NumScales());
    sum.Update({reinterpret_cast<const char*>(m.scale), scale_bytes});
    FS_RETURN_IF_ERROR(PwriteAll(fd, m.scale, scale_bytes, offset + data_bytes, path));
  }
  return sum.Finish();
}

// The header of a file to write: offsets laid out, checksums still zero.
Header Plan(const PackSource& source, const std::vector<PackEntry>& entries) {
  Header h;
  h.fingerprint = source.checkpoint_fingerprint;
  h.dir = source.checkpoint_dir;
  for (const PackEntry& e : entries)
    h.entries.push_back({e.name, static_cast<uint8_t>(e.kind), static_cast<uint8_t>(e.source.format), e.source.rows,
                         e.source.cols, 0, static_cast<uint64_t>(PackedBytes(e)), 0});
  h.payload_offset = RoundUp(Encode(h).size(), kPayloadAlign);  // the header's size does not depend on the values
  uint64_t at = h.payload_offset;
  for (Header::Entry& e : h.entries) {
    e.offset = at;
    at = RoundUp(at + e.bytes, kEntryAlign);
  }
  h.file_bytes = RoundUp(at, 4096);
  return h;
}

// Packs every entry into the open file `fd`, filling the header's checksums.
Status PackEntries(int fd, Header& h, const std::vector<PackEntry>& entries, base::ThreadPool& pool,
                   const std::function<void(int64_t, int64_t)>& progress, const std::function<void(size_t)>& packed,
                   const std::string& path) {
  std::mutex mu;  // first_error, progress calls
  Status first_error = Status::Ok();
  std::atomic<bool> failed{false};
  std::atomic<int64_t> done{0};
  const int64_t total = static_cast<int64_t>(h.file_bytes - h.payload_offset);
  pool.ParallelTasks(static_cast<int64_t>(entries.size()), [&](int64_t i, int64_t) {
    if (failed.load(std::memory_order_relaxed)) return;
    Header::Entry& s = h.entries[static_cast<size_t>(i)];
    Result<uint64_t> sum = WriteEntry(fd, entries[static_cast<size_t>(i)], s.offset, path);
    Status st = sum.ok() ? Status::Ok() : Status(sum.error());
    if (sum.ok()) s.checksum = *sum;
    std::lock_guard<std::mutex> lock(mu);
    if (!st.ok()) {
      if (!failed.exchange(true)) first_error = std::move(st);
      return;
    }
    if (packed) packed(static_cast<size_t>(i));
    if (progress) progress(done += static_cast<int64_t>(s.bytes), total);
  });
  return first_error;
}

bool ProcessAlive(const std::string& pid) {
  std::error_code ec;
  return !pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos &&
         (std::filesystem::exists("/proc/" + pid, ec) || ec);
}

// "<name>.fspack.tmp.<pid>.<hex>": the writing process's id, or "" for any other name.
std::string TemporaryOwner(const std::string& name) {
  const std::string mark = std::string(kExtension) + ".tmp.";
  const size_t at = name.find(mark);
  if (at == std::string::npos) return "";
  const std::string rest = name.substr(at + mark.size());
  const size_t dot = rest.find('.');
  return dot == std::string::npos ? "" : rest.substr(0, dot);
}

}  // namespace

int64_t PackedBytes(const PackEntry& e) { return e.source.StoredBytes(); }

Matrix PackInto(const PackEntry& e, uint8_t* out) {
  if (e.kind == PackKind::kFp4LanePairs) return e.source.RepackFp4LanePairs(out);
  Matrix m = e.source;
  const size_t data_bytes = static_cast<size_t>(m.rows * m.RowBytes());
  std::memcpy(out, m.data, data_bytes);
  if (m.NumScales() > 0) std::memcpy(out + data_bytes, m.scale, static_cast<size_t>(m.NumScales()));
  m.data = out;
  m.scale = m.NumScales() > 0 ? out + data_bytes : nullptr;
  return m;
}

Result<PackedWeightsFile> PackedWeightsFile::Open(const std::string& path, const PackSource& source,
                                                  const std::vector<PackEntry>& entries) {
  PackedWeightsFile out;
  FS_ASSIGN_OR_RETURN(out.file_, base::MappedFile::Open(path));
  const std::string_view all(reinterpret_cast<const char*>(out.file_.data()), out.file_.size());
  FS_ASSIGN_OR_RETURN(Header h, Decode(all.substr(0, std::min<size_t>(all.size(), kMaxHeaderBytes)), path));
  if (h.dir != source.checkpoint_dir) return Stale(path, "made from " + h.dir + ", not " + source.checkpoint_dir);
  if (h.fingerprint != source.checkpoint_fingerprint) return Stale(path, "the checkpoint's files changed since");
  if (h.file_bytes != out.file_.size())
    return Error(ErrorCode::kDataLoss, path + ": " + std::to_string(out.file_.size()) + " bytes, the header says " +
                                           std::to_string(h.file_bytes) + " (truncated?)");
  if (h.payload_offset % kPayloadAlign != 0 || h.payload_offset > h.file_bytes)
    return Error(ErrorCode::kDataLoss, path + ": bad payload offset");
  FS_RETURN_IF_ERROR(CheckEntries(h, entries, out.file_.size(), path));
  out.payload_offset_ = h.payload_offset;
  for (size_t i = 0; i < entries.size(); ++i) {
    Stored s;
    s.view = entries[i].source;
    if (entries[i].kind == PackKind::kFp4LanePairs) s.view.fp4_layout = Fp4Layout::kLanePairs;
    s.offset = h.entries[i].offset;
    s.bytes = h.entries[i].bytes;
    s.checksum = h.entries[i].checksum;
    out.entries_.push_back(s);
  }
  return out;
}

Status PackedWeightsFile::Write(const std::string& path, const PackSource& source, const std::vector<PackEntry>& entries,
                                base::ThreadPool& pool, const std::function<void(int64_t, int64_t)>& progress,
                                const std::function<void(size_t)>& packed) {
  for (const PackEntry& e : entries)
    if (!e.source.valid() || (e.kind == PackKind::kFp4LanePairs && e.source.fp4_layout != Fp4Layout::kCheckpoint))
      return Error(ErrorCode::kInvalidArgument, "cannot pack '" + e.name + "': " + e.source.Describe());
  Header h = Plan(source, entries);
  // A name no other writer (another process, container or host sharing the directory) takes,
  // created exclusively and never through a link.
  std::random_device random;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          fmt::format("{:08x}{:08x}", random(), random());
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(ErrorCode::kIoError, "cannot create", tmp);
  const auto fail = [&](Status st) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return st;
  };
  if (const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(h.file_bytes)); rc != 0) {
    errno = rc;
    if (rc != EOPNOTSUPP && rc != EINVAL)
      return fail(Errno(ErrorCode::kIoError, "cannot reserve " + std::to_string(h.file_bytes >> 20) + " MiB for", tmp));
    if (::ftruncate(fd, static_cast<off_t>(h.file_bytes)) != 0) return fail(Errno(ErrorCode::kIoError, "cannot size", tmp));
  }
  if (Status st = PackEntries(fd, h, entries, pool, progress, packed, tmp); !st.ok()) return fail(std::move(st));
  const std::string header = Encode(h);
  if (Status st = PwriteAll(fd, reinterpret_cast<const uint8_t*>(header.data()), header.size(), 0, tmp); !st.ok())
    return fail(std::move(st));
  if (::fdatasync(fd) != 0) return fail(Errno(ErrorCode::kIoError, "cannot flush", tmp));
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // read back in 2 MiB folios (advice)
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = Errno(ErrorCode::kIoError, "cannot rename into", path);
    ::unlink(tmp.c_str());
    return e;
  }
  return Status::Ok();
}

int64_t PackedWeightsFile::Preload() const {
  file_.AdviseHugePages();
  file_.PopulateRange(payload_offset_, payload_bytes());
  return file_.HugeMappedBytes();
}

Status PackedWeightsFile::Verify(base::ThreadPool& pool) const {
  std::atomic<size_t> first_bad{entries_.size()};
  pool.ParallelTasks(static_cast<int64_t>(entries_.size()), [&](int64_t i, int64_t) {
    const Stored& s = entries_[static_cast<size_t>(i)];
    const std::string_view bytes(reinterpret_cast<const char*>(file_.data() + s.offset), s.bytes);
    if (base::Checksum64(bytes) == s.checksum) return;
    size_t seen = first_bad.load();
    while (static_cast<size_t>(i) < seen && !first_bad.compare_exchange_weak(seen, static_cast<size_t>(i))) {
    }
  });
  if (first_bad.load() == entries_.size()) return Status::Ok();
  return Error(ErrorCode::kDataLoss, file_.path() + ": the checksum of entry " + std::to_string(first_bad.load()) +
                                         " does not match (corrupt file)");
}

Matrix PackedWeightsFile::View(size_t i, const uint8_t* copy) const {
  const Stored& s = entries_[i];
  Matrix m = s.view;
  m.data = copy != nullptr ? copy + (s.offset - payload_offset_) : file_.data() + s.offset;
  m.scale = m.NumScales() > 0 ? m.data + m.rows * m.RowBytes() : nullptr;
  return m;
}

int RemoveOrphanedPackedFiles(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int removed = 0;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path path = it->path();
    const std::string owner = TemporaryOwner(path.filename().string());
    bool orphan = false;
    if (!owner.empty()) {
      orphan = !ProcessAlive(owner);
    } else if (path.extension() == kExtension) {
      std::ifstream in(path, std::ios::binary);
      std::string head(1 << 17, '\0');
      in.read(head.data(), static_cast<std::streamsize>(head.size()));
      head.resize(static_cast<size_t>(in.gcount()));
      base::ByteReader r(head);
      Header h;
      std::error_code missing;
      // Only a directory known to be gone: an unreadable or unmounted one keeps its file.
      orphan = DecodeSource(r, &h) && !h.dir.empty() && !fs::exists(h.dir, missing) && !missing;
    }
    std::error_code rm;
    if (orphan && fs::remove(path, rm)) ++removed;
  }
  return removed;
}

}  // namespace flashserve::model
