// `flashserve kv stat|verify|gc --dir DIR`: inspect, check and garbage-collect a KV store
// directory (kvstore/dir_tool.h) while workers may be using it. Main thread only.
#include <cstdio>
#include <memory>
#include <string>

#include "app/cli_util.h"
#include "app/commands.h"
#include "base/clock.h"
#include "fmt/format.h"
#include "kvstore/dir_tool.h"
#include "kvstore/kv_store.h"

namespace flashserve::app {
namespace {

enum class KvMode { kStat, kVerify, kGc };

struct KvFlags {
  std::string dir;
  int64_t now = 0;  // 0 = the current time
  bool delete_bad = false;
  int64_t rate = 200;
};

std::string Mb(int64_t bytes) { return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6); }

std::string Date(int64_t unix_seconds) { return unix_seconds <= 0 ? "-" : UtcMinute(unix_seconds) + " UTC"; }

void PrintSummary(const kvstore::DirReport& r) {
  std::printf("%lld objects, %s (%lld expired) in %.2f s\n", static_cast<long long>(r.objects), Mb(r.bytes).c_str(),
              static_cast<long long>(r.expired), r.seconds);
  std::printf("\nper fingerprint:\n  %-20s %10s %12s %10s %10s %10s %10s\n", "fingerprint", "objects", "bytes", "blocks",
              "boundaries", "images", "expired");
  for (const kvstore::FingerprintSummary& f : r.fingerprints) {
    const std::string name = f.fingerprint.size() > 20 ? f.fingerprint.substr(0, 17) + "..." : f.fingerprint;
    std::printf("  %-20s %10lld %12s %10lld %10lld %10lld %10lld\n", name.c_str(), static_cast<long long>(f.objects),
                Mb(f.bytes).c_str(), static_cast<long long>(f.blocks), static_cast<long long>(f.boundaries),
                static_cast<long long>(f.images), static_cast<long long>(f.expired));
  }
  std::printf("\nper TTL class:\n  %-12s %10s %12s %12s %9s %8s %8s %8s  %s\n", "class", "objects", "bytes", "tokens",
              "expired", "<=1h", "<=1d", "<=7d", "latest expiry");
  for (const kvstore::ClassSummary& c : r.classes) {
    std::printf("  %-12s %10lld %12s %12lld %9lld %8lld %8lld %8lld  %s\n", c.name.c_str(),
                static_cast<long long>(c.objects), Mb(c.bytes).c_str(), static_cast<long long>(c.tokens),
                static_cast<long long>(c.expired), static_cast<long long>(c.expiring_1h),
                static_cast<long long>(c.expiring_1d), static_cast<long long>(c.expiring_7d),
                Date(c.latest_expiry).c_str());
  }
  if (r.stale_temp_files > 0 || r.other_files > 0) {
    std::printf("\n%lld stale temporary files, %lld other entries (left alone)\n",
                static_cast<long long>(r.stale_temp_files), static_cast<long long>(r.other_files));
  }
}

int RunKv(KvMode mode, const KvFlags& flags) {
  kvstore::DirScanOptions options;
  options.now_unix = flags.now > 0 ? flags.now : base::SystemClock().NowUnixSeconds();
  options.verify_payload = mode == KvMode::kVerify;
  options.delete_bad = mode == KvMode::kVerify && flags.delete_bad;
  options.delete_expired = mode == KvMode::kGc;
  options.max_deletes_per_second = flags.rate;
  auto report = kvstore::ScanStoreDir(*kvstore::FileSystem::Posix(), flags.dir, options);
  if (!report.ok()) {
    std::fprintf(stderr, "flashserve kv: %s\n", report.error().ToString().c_str());
    return 1;
  }
  const kvstore::DirReport& r = *report;
  if (mode == KvMode::kStat) {
    PrintSummary(r);
    return 0;
  }
  if (mode == KvMode::kGc) {
    std::printf("deleted %lld of %lld expired objects and %lld stale temporary files in %.2f s; %lld objects remain\n",
                static_cast<long long>(r.deleted_expired), static_cast<long long>(r.expired),
                static_cast<long long>(r.deleted_temp_files), r.seconds,
                static_cast<long long>(r.objects - r.deleted_expired));
    return r.deleted_expired == r.expired ? 0 : 1;
  }
  int64_t remaining = 0;
  for (const kvstore::BadObject& b : r.bad) {
    std::printf("%s %s: %s\n", b.deleted ? "deleted" : "bad", b.path.c_str(), b.problem.c_str());
    remaining += b.deleted ? 0 : 1;
  }
  std::printf("verified %lld objects (%s) in %.2f s: %zu bad, %lld left\n", static_cast<long long>(r.objects),
              Mb(r.bytes).c_str(), r.seconds, r.bad.size(), static_cast<long long>(remaining));
  return remaining == 0 ? 0 : 1;
}

}  // namespace

void RegisterKvCommand(CLI::App& app, CommandFn* run) {
  auto* kv = app.add_subcommand("kv", "Inspect, verify or garbage-collect a KV store directory");
  kv->require_subcommand(1);
  auto flags = std::make_shared<KvFlags>();
  struct Sub {
    KvMode mode;
    const char* name;
    const char* help;
  };
  for (const Sub& s : {Sub{KvMode::kStat, "stat", "Bytes, objects and expiries per TTL class and per fingerprint"},
                       Sub{KvMode::kVerify, "verify", "Check every object's header and checksum (1 if bad remain)"},
                       Sub{KvMode::kGc, "gc", "Delete expired objects and stale temporary files"}}) {
    auto* cmd = kv->add_subcommand(s.name, s.help);
    cmd->add_option("--dir", flags->dir, "Store root (the disk_dir / shared_dir of the store)")->required();
    if (s.mode != KvMode::kVerify) cmd->add_option("--now", flags->now, "Reference time, Unix seconds (default: now)");
    if (s.mode == KvMode::kVerify) cmd->add_flag("--delete", flags->delete_bad, "Delete bad objects");
    if (s.mode == KvMode::kGc) {
      cmd->add_option("--rate", flags->rate, "Maximum deletes per second (0 = unlimited)")
          ->check(CLI::NonNegativeNumber);
    }
    const KvMode mode = s.mode;
    cmd->callback([run, flags, mode] { *run = [flags, mode] { return RunKv(mode, *flags); }; });
  }
}

}  // namespace flashserve::app
