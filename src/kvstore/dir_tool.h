// Offline inspection of a KV store directory for `flashserve kv stat|verify|gc`: walks
// <root>/<fingerprint>/ab/cd/*, summarises objects per fingerprint and TTL class, checks headers
// (and payload checksums), deletes bad or expired objects and stale temporary files. One thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "kvstore/file_system.h"

namespace flashserve::kvstore {

struct DirScanOptions {
  int64_t now_unix = 0;                // expiry reference
  bool verify_payload = false;         // read every payload and check its checksum
  bool delete_bad = false;             // delete corrupt, truncated, foreign and misplaced objects
  bool delete_expired = false;         // delete expired objects (gc)
  int64_t max_deletes_per_second = 0;  // pacing of expired deletes; 0 = unpaced
};

struct ClassSummary {
  std::string name;
  int64_t objects = 0, bytes = 0, tokens = 0, expired = 0;
  int64_t expiring_1h = 0, expiring_1d = 0, expiring_7d = 0;  // unexpired, expiring within
  int64_t latest_expiry = 0;
};

struct FingerprintSummary {
  std::string fingerprint;
  int64_t objects = 0, bytes = 0, blocks = 0, boundaries = 0, images = 0, expired = 0;
};

struct BadObject {
  std::string path;
  std::string problem;
  bool deleted = false;
};

struct DirReport {
  std::vector<FingerprintSummary> fingerprints;  // sorted by fingerprint
  std::vector<ClassSummary> classes;             // sorted by name; over every fingerprint
  std::vector<BadObject> bad;
  int64_t objects = 0, bytes = 0;                // good objects, expired included
  int64_t expired = 0, deleted_expired = 0;
  int64_t stale_temp_files = 0, deleted_temp_files = 0;
  int64_t other_files = 0;                       // names that are not objects (left alone)
  double seconds = 0;
};

// kNotFound when root is missing. Symlinks are never followed; nothing outside root is touched.
base::Result<DirReport> ScanStoreDir(FileSystem& fs, const std::string& root, const DirScanOptions& options);

}  // namespace flashserve::kvstore
