// The metering store as `serve` and `router` use it: --meter-db and --meter-refresh flags, and
// a live key ring holding the keys from flags plus the store's, refreshed by a KeyDirectory.
// Main thread only (the directory's thread is its own).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "meter/api_keys.h"
#include "meter/economics.h"
#include "meter/fleet_usage.h"
#include "meter/key_directory.h"
#include "meter/ledger.h"
#include "meter/store.h"

namespace flashserve::app {

struct MeterFlags {
  std::string db;          // "" = no metering store
  double refresh_s = 2.0;  // how often running servers look for tenant and key changes
  double flush_s = 1.0;    // how often a worker writes usage records
};

// --meter-db and --meter-refresh; --meter-flush too for workers (`ledger`).
void AddMeterFlags(CLI::App* cmd, MeterFlags* f, bool ledger);
// --admin-key (repeatable, or $FLASHSERVE_ADMIN_KEY) and its check: keys alone, no tenant.
void AddAdminKeyFlag(CLI::App* cmd, std::vector<std::string>* specs);
base::Result<std::vector<meter::ApiKey>> ParseAdminKeys(const std::vector<std::string>& specs);
// --cost-per-hour, --capacity-tokens-per-s and --api-output-price: the live economics in
// /metrics. `what` names the hardware priced ("this worker's", "the whole fleet's").
void AddEconomicsFlags(CLI::App* cmd, meter::EconomicsConfig* c, const std::string& what);

// Members destroyed in reverse: the directory stops before the store closes.
struct Metering {
  std::unique_ptr<meter::MeterStore> store;
  std::shared_ptr<meter::ApiKeyRing> ring;
  std::unique_ptr<meter::KeyDirectory> directory;
  std::unique_ptr<meter::TenantLimiter> limiter;  // outlives the ledger and the fleet sync
  std::unique_ptr<meter::Ledger> ledger;          // workers only
  std::unique_ptr<meter::FleetUsageSync> fleet;   // the fleet's last minute (and, at a router, spend)
};

// No store: an empty Metering (the servers build their rings from the static keys). Otherwise
// the store opened, loaded once and polled; every generation route then needs a key, and a
// limiter checks tenants' limits, with the fleet's per-minute figures read from the ledger. With
// `ledger` (workers) usage records are written too; without (the router) the fleet's output and
// spend are read from the ledger instead.
base::Result<Metering> StartMetering(const MeterFlags& f, std::vector<meter::ApiKey> static_keys, bool ledger);

}  // namespace flashserve::app
