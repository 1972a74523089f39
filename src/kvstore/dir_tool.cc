// Offline directory tool (kvstore/dir_tool.h).
#include "kvstore/dir_tool.h"

#include <algorithm>
#include <climits>
#include <map>
#include <memory>

#include "base/clock.h"
#include "fmt/format.h"
#include "kvstore/io_pool.h"
#include "kvstore/object_file.h"

namespace flashserve::kvstore {
namespace {

bool IsHexPair(std::string_view name) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return name.size() == 2 && hex(name[0]) && hex(name[1]);
}

class DirScanner {
 public:
  DirScanner(FileSystem& fs, const DirScanOptions& options) : fs_(fs), options_(options) {
    if (options.max_deletes_per_second > 0) limiter_ = std::make_unique<RateLimiter>(options.max_deletes_per_second);
  }

  void ScanFingerprint(const std::string& dir, const std::string& fingerprint) {
    FingerprintSummary& fp = fingerprints_[fingerprint];
    fp.fingerprint = fingerprint;
    ForEachSubdir(dir, [&](const std::string& ab_dir, const std::string& ab) {
      ForEachSubdir(ab_dir, [&](const std::string& leaf, const std::string& cd) {
        ScanLeaf(leaf, ab + cd, fingerprint);
      });
    });
  }

  DirReport Finish() {
    for (auto& [name, fp] : fingerprints_) report_.fingerprints.push_back(fp);
    for (auto& [name, c] : classes_) report_.classes.push_back(c);
    return std::move(report_);
  }

  void CountOther() { ++report_.other_files; }

 private:
  template <typename Fn>
  void ForEachSubdir(const std::string& dir, Fn fn) {
    auto entries = fs_.List(dir);
    if (!entries.ok()) {
      report_.bad.push_back({dir, entries.error().message(), false});
      return;
    }
    for (const DirEntry& e : *entries) {
      if (e.type == EntryType::kDirectory && IsHexPair(e.name)) {
        fn(dir + "/" + e.name, e.name);
      } else {
        ++report_.other_files;
      }
    }
  }

  void ScanLeaf(const std::string& dir, const std::string& prefix, const std::string& fingerprint) {
    auto entries = fs_.List(dir);
    if (!entries.ok()) return;
    for (const DirEntry& e : *entries) {
      const std::string path = dir + "/" + e.name;
      ObjectKey key;
      if (e.type == EntryType::kFile && IsTemporaryName(e.name)) {
        CheckTemp(path);
      } else if (e.type != EntryType::kFile || !ParseObjectFileName(e.name, &key)) {
        ++report_.other_files;
      } else if (e.name.compare(0, 4, prefix) != 0) {
        Bad(path, "stored under the wrong directory");
      } else {
        CheckObject(path, key, fingerprint);
      }
    }
  }

  void CheckTemp(const std::string& path) {
    if (!IsStaleTemporary(fs_, path, options_.now_unix)) return;
    ++report_.stale_temp_files;
    if (options_.delete_expired && fs_.Remove(path).ok()) ++report_.deleted_temp_files;
  }

  void CheckObject(const std::string& path, const ObjectKey& key, const std::string& fingerprint) {
    // One pass over a store that may be far larger than memory: leave nothing in the page cache.
    ReadOptions read{&key, fingerprint, INT64_MIN, options_.verify_payload, CacheUse::kDrop};
    ReadOutcome out = ReadObject(fs_, path, read);
    if (out.verdict == Verdict::kMissing) return;  // deleted while we looked
    if (out.verdict != Verdict::kOk) {
      if (out.verdict == Verdict::kIoError) {
        Bad(path, fmt::format("{}: {}", VerdictName(out.verdict), out.detail), /*deletable=*/false);
        return;
      }
      // Workers sharing the directory may replace it meanwhile: only a copy still bad goes.
      const ReadOptions check{&key, fingerprint, INT64_MIN, options_.verify_payload, CacheUse::kDrop};
      Bad(path, fmt::format("{}: {}", VerdictName(out.verdict), out.detail), /*deletable=*/true, &check);
      return;
    }
    const ObjectHeader& h = out.header;
    const bool expired = options_.now_unix >= h.expiry_unix;
    FingerprintSummary& fp = fingerprints_[fingerprint];
    ++fp.objects;
    fp.bytes += out.file_bytes;
    ++(key.kind == ObjectKind::kBlock ? fp.blocks : key.kind == ObjectKind::kBoundary ? fp.boundaries : fp.images);
    ClassSummary& c = classes_[h.ttl_class];
    c.name = h.ttl_class;
    ++c.objects;
    c.bytes += out.file_bytes;
    c.tokens += h.tokens;
    c.latest_expiry = std::max(c.latest_expiry, h.expiry_unix);
    ++report_.objects;
    report_.bytes += out.file_bytes;
    if (expired) {
      ++fp.expired;
      ++c.expired;
      ++report_.expired;
      if (options_.delete_expired) {
        if (limiter_ != nullptr) limiter_->Acquire(1, nullptr);
        // Workers sharing the directory may renew it meanwhile: only a copy still expired goes.
        ReadOptions check{&key, fingerprint, options_.now_unix, /*read_payload=*/false, CacheUse::kDrop};
        if (Deleted(RemoveObjectUnlessLive(fs_, path, check, options_.now_unix).verdict)) ++report_.deleted_expired;
      }
      return;
    }
    const int64_t left = h.expiry_unix - options_.now_unix;
    c.expiring_1h += left <= 3600;
    c.expiring_1d += left <= 86400;
    c.expiring_7d += left <= 7 * 86400;
  }

  // check: how the object at path was judged bad (null for a misplaced file, which no writer
  // replaces): only a file still bad when read again that way is deleted.
  void Bad(const std::string& path, std::string problem, bool deletable = true, const ReadOptions* check = nullptr) {
    BadObject bad{path, std::move(problem), false};
    if (options_.delete_bad && deletable) {
      bad.deleted = check == nullptr ? fs_.Remove(path).ok()
                                     : Deleted(RemoveObjectUnlessLive(fs_, path, *check, options_.now_unix).verdict);
    }
    report_.bad.push_back(std::move(bad));
  }

  FileSystem& fs_;
  const DirScanOptions& options_;
  std::unique_ptr<RateLimiter> limiter_;
  std::map<std::string, FingerprintSummary> fingerprints_;
  std::map<std::string, ClassSummary> classes_;
  DirReport report_;
};

}  // namespace

base::Result<DirReport> ScanStoreDir(FileSystem& fs, const std::string& root, const DirScanOptions& options) {
  const double start = base::MonotonicSeconds();
  auto top = fs.List(root);
  if (!top.ok()) return top.error().WithContext("kv store directory");
  DirScanner scanner(fs, options);
  for (const DirEntry& e : *top) {
    if (e.type == EntryType::kDirectory && IsValidFingerprint(e.name)) {
      scanner.ScanFingerprint(root + "/" + e.name, e.name);
    } else {
      scanner.CountOther();
    }
  }
  DirReport report = scanner.Finish();
  report.seconds = base::MonotonicSeconds() - start;
  return report;
}

}  // namespace flashserve::kvstore
