// StoreConfig validation and the small shared helpers of kvstore/kv_store.h.
#include <algorithm>
#include <set>
#include <thread>

#include "fmt/format.h"
#include "kvstore/kv_store.h"
#include "kvstore/object_file.h"
#include "kvstore/tier_index.h"

namespace flashserve::kvstore {
namespace {

base::Error Invalid(std::string message) {
  return base::Error(base::ErrorCode::kInvalidArgument, "kvstore config: " + std::move(message));
}

}  // namespace

int DefaultIoThreads() {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 4, 2, 8);
}

std::vector<TtlClass> DefaultTtlClasses() { return {{"agent", 3 * 86400}, {"chat", 7 * 86400}}; }


std::vector<TtlClass> StoreConfig::Classes() const { return ttl_classes.empty() ? DefaultTtlClasses() : ttl_classes; }

base::Status StoreConfig::Validate() const {
  if (!IsValidFingerprint(fingerprint)) {
    return Invalid(fmt::format("fingerprint must be 1-{} lower-case hex digits, got '{}'", kMaxFingerprintChars,
                               fingerprint));
  }
  if (memory_bytes < 0) return Invalid("memory_bytes must be >= 0");
  if (!disk_dir.empty() && disk_bytes <= 0) return Invalid("disk_bytes must be > 0 when disk_dir is set");
  if (!shared_dir.empty() && shared_bytes <= 0) return Invalid("shared_bytes must be > 0 when shared_dir is set");
  if (!disk_dir.empty() && disk_dir == shared_dir) return Invalid("disk_dir and shared_dir must differ");
  const std::vector<TtlClass> classes = Classes();
  if (classes.size() >= kOtherClass) return Invalid(fmt::format("at most {} TTL classes", kOtherClass - 1));
  std::set<std::string> names;
  for (const TtlClass& c : classes) {
    if (!IsValidClassName(c.name)) {
      return Invalid(fmt::format("TTL class name '{}' must be 1-{} characters of [a-z0-9_-]", c.name, kMaxClassChars));
    }
    if (c.seconds <= 0) return Invalid(fmt::format("TTL class '{}' needs seconds > 0", c.name));
    if (!names.insert(c.name).second) return Invalid(fmt::format("TTL class '{}' is listed twice", c.name));
  }
  if (!names.count(default_ttl_class)) {
    return Invalid(fmt::format("default_ttl_class '{}' is not a configured TTL class", default_ttl_class));
  }
  if (gc_delay_seconds <= 0) return Invalid("gc_delay_seconds must be > 0");
  if (gc_max_deletes_per_second <= 0) return Invalid("gc_max_deletes_per_second must be > 0");
  if (io_threads < 1 || io_threads > 64) return Invalid("io_threads must be in [1, 64]");
  if (shared_rescan_seconds < 0) return Invalid("shared_rescan_seconds must be >= 0");
  if (write_retry_seconds <= 0) return Invalid("write_retry_seconds must be > 0");
  if (max_pending_write_bytes <= 0) return Invalid("max_pending_write_bytes must be > 0");
  if (event_log_capacity < 1 || event_log_capacity > (int64_t{1} << 30)) {
    return Invalid("event_log_capacity must be in [1, 2^30]");
  }
  return base::Status::Ok();
}

}  // namespace flashserve::kvstore
