// Set-up of the prefix-cache store and the API keys for `flashserve serve` (app/serve_flags.h).
#include <algorithm>

#include "app/cli_util.h"
#include "app/serve_flags.h"
#include "base/file_util.h"
#include "base/log.h"

namespace flashserve::app {

using base::Error;
using base::ErrorCode;

// The prefix-cache store: L1 always (budget --kv-dram-bytes), L2 / L3 when their folders are given.
base::Result<std::unique_ptr<kvstore::KvStore>> OpenStore(ServeFlags& f, const engine::Model& model) {
  static const base::SystemClock clock;
  FS_ASSIGN_OR_RETURN(f.store.ttl_classes, ParseTtlClasses(f.ttl_spec));
  const auto& classes = f.store.ttl_classes;
  if (!f.loop.image_ttl_class.empty() &&
      std::none_of(classes.begin(), classes.end(), [&](const kvstore::TtlClass& c) { return c.name == f.loop.image_ttl_class; }))
    return Error(ErrorCode::kInvalidArgument, "--image-ttl '" + f.loop.image_ttl_class + "' is not one of --kv-ttl");
  f.store.fingerprint = serve::ModelFingerprint(model, f.engine);
  f.store.memory_bytes = f.loop.prefix_cache_bytes;
  if (f.store.memory_bytes <= 0 && f.store.disk_dir.empty() && f.store.shared_dir.empty())
    return std::unique_ptr<kvstore::KvStore>();
  auto store = kvstore::KvStore::Open(f.store, clock);
  if (!store.ok()) return store.error().WithContext("opening the KV store");
  return std::move(store).value();
}

// --api-key specs and the lines of --api-keys-file ("KEY[:TENANT[:TTL_CLASS]]", # comments).
base::Status LoadApiKeys(ServeFlags* f) {
  FS_ASSIGN_OR_RETURN(std::vector<meter::ApiKey> keys, ReadApiKeys(f->api_keys, f->api_keys_file));
  const std::vector<kvstore::TtlClass> classes = f->store.Classes();
  for (const meter::ApiKey& key : keys) {
    const bool known = key.ttl_class.empty() || std::any_of(classes.begin(), classes.end(), [&](const kvstore::TtlClass& c) {
      return c.name == key.ttl_class;
    });
    if (!known) return Error(ErrorCode::kInvalidArgument, "API key TTL class '" + key.ttl_class + "' is not one of --kv-ttl");
    f->api.api_keys.push_back(key);
  }
  if (!f->api.api_keys.empty()) FS_LOG(kInfo, "serve: {} API keys; generation routes need one", f->api.api_keys.size());
  FS_ASSIGN_OR_RETURN(f->api.admin_keys, ParseAdminKeys(f->admin_keys));
  return base::Status::Ok();
}

void AddStoreAndKeyFlags(CLI::App* cmd, ServeFlags* f) {
  kvstore::StoreConfig& k = f->store;
  cmd->add_option("--kv-dram-bytes,--prefix-cache-bytes", f->loop.prefix_cache_bytes,
                  "L1 (host memory) prefix-cache budget (0 disables L1)")->capture_default_str();
  cmd->add_option("--kv-dir", k.disk_dir, "L2: local directory that keeps cached prefixes across restarts");
  cmd->add_option("--kv-disk-bytes", k.disk_bytes, "L2 byte budget")->capture_default_str();
  cmd->add_option("--kv-shared-dir", k.shared_dir, "L3: directory shared by many workers (NFS, CephFS, 3FS)");
  cmd->add_option("--kv-shared-bytes", k.shared_bytes, "L3 byte budget")->capture_default_str();
  cmd->add_option("--kv-ttl", f->ttl_spec, "Retention classes, name=duration (s/m/h/d)")->capture_default_str();
  cmd->add_option("--kv-default-ttl", k.default_ttl_class, "Class for requests without cache_ttl")->capture_default_str();
  cmd->add_option("--kv-gc-delay", k.gc_delay_seconds, "Seconds within which expired objects are deleted")->capture_default_str();
  cmd->add_option("--kv-write-retry", k.write_retry_seconds,
                  "Seconds after a failed write (disk full, read-only) before a tier is written again")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}))->capture_default_str();
  cmd->add_option("--kv-io-threads", k.io_threads, "KV-store I/O threads")->check(CLI::Range(1, 64))->capture_default_str();
  cmd->add_flag("--kv-direct-io", k.direct_io,
                "Read L2/L3 objects with O_DIRECT in io_uring batches straight into the DRAM tier's memory "
                "(no copy; that memory may exceed --kv-dram-bytes by a sixteenth plus 32 MiB per I/O thread), "
                "bypassing the page cache (for stores much larger than memory); default: buffered reads");
  cmd->add_option("--kv-events-capacity", k.event_log_capacity,
                  "KV events kept for the router (a router further behind resyncs from a snapshot)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))->capture_default_str();
  cmd->add_option("--api-key", f->api_keys, "Accepted key KEY[:TENANT[:TTL_CLASS]] (repeatable; none = no auth). "
                  "The tenant is the key's prefix-cache namespace, TTL_CLASS its default retention");
  cmd->add_option("--api-keys-file", f->api_keys_file, "File of API keys, one KEY[:TENANT[:TTL_CLASS]] per line")
      ->check(CLI::ExistingFile);
  AddAdminKeyFlag(cmd, &f->admin_keys);
  AddMeterFlags(cmd, &f->meter, /*ledger=*/true);
  AddEconomicsFlags(cmd, &f->api.economics, "this worker's");
}

}  // namespace flashserve::app
