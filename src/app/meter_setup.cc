// Metering flags and start-up (app/meter_setup.h).
#include "app/meter_setup.h"

#include <algorithm>

#include "base/log.h"
#include "meter/sql_db.h"

namespace flashserve::app {

void AddMeterFlags(CLI::App* cmd, MeterFlags* f, bool ledger) {
  cmd->add_option("--meter-db", f->db,
                  "Metering store (a SQLite file, or a postgresql:// URL shared by a fleet): tenants' API keys, checked live; every generation route then "
                  "needs a key (`flashserve key create`)")
      ->envname("FLASHSERVE_METER_DB");
  cmd->add_option("--meter-refresh", f->refresh_s, "Seconds between looks for tenant and key changes")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  if (!ledger) return;
  cmd->add_option("--meter-flush", f->flush_s,
                  "Seconds between writes of usage records (a crash loses at most this much progress)")
      ->check(CLI::Range(0.05, 60.0))
      ->capture_default_str();
}

void AddAdminKeyFlag(CLI::App* cmd, std::vector<std::string>* specs) {
  cmd->add_option("--admin-key", *specs,
                  "Key for the /admin routes (repeatable, or $FLASHSERVE_ADMIN_KEY); tenant keys never reach them; "
                  "none = they answer 403")
      ->envname("FLASHSERVE_ADMIN_KEY");
}

base::Result<std::vector<meter::ApiKey>> ParseAdminKeys(const std::vector<std::string>& specs) {
  std::vector<meter::ApiKey> keys;
  for (const std::string& spec : specs) {
    if (spec.find(':') != std::string::npos)
      return base::Error(base::ErrorCode::kInvalidArgument, "--admin-key takes a key alone (no tenant or TTL class)");
    FS_ASSIGN_OR_RETURN(meter::ApiKey admin, meter::ParseApiKey(spec));
    keys.push_back(admin);
  }
  return keys;
}

void AddEconomicsFlags(CLI::App* cmd, meter::EconomicsConfig* c, const std::string& what) {
  cmd->add_option("--cost-per-hour", c->cost_per_hour,
                  "Hourly cost of " + what + " hardware (rent, or purchase amortized plus power), for the cost per "
                  "million output tokens and break-even utilization in /metrics (0 = not priced)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--capacity-tokens-per-s", c->capacity_tokens_per_s,
                  "Output tokens per second of " + what + " hardware at full load, e.g. from `flashserve bench` "
                  "(default: the current load's rate at 100% busy)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--api-output-price", c->api_output_prices,
                  "API prices per million output tokens to break even against (comma-separated), e.g. 0.60,1.20")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
}

base::Result<Metering> StartMetering(const MeterFlags& f, std::vector<meter::ApiKey> static_keys, bool ledger) {
  Metering m;
  if (f.db.empty()) return m;
  FS_ASSIGN_OR_RETURN(m.store, meter::OpenMeterStore(f.db));
  m.ring = std::make_shared<meter::ApiKeyRing>();
  auto directory = meter::KeyDirectory::Start(m.store.get(), m.ring, std::move(static_keys), f.refresh_s);
  if (!directory.ok()) return directory.error().WithContext("metering store " + meter::RedactedUrl(f.db));
  m.directory = std::move(directory).value();
  m.limiter = std::make_unique<meter::TenantLimiter>();
  if (ledger) {
    m.ledger = std::make_unique<meter::Ledger>(m.store.get(), f.flush_s);
    // Monthly budgets count the whole fleet's spend in the store, refreshed this often.
    FS_RETURN_IF_ERROR(m.ledger->SyncSpendTo(m.limiter.get(), std::max(5.0, f.refresh_s)));
  }
  // A router counts requests, input and concurrency itself (every request passes it) and reads
  // the output and spend the workers record; a worker raises its per-minute counts to the
  // fleet's. Both at most a second old, plus the workers' flush interval.
  auto fleet = meter::FleetUsageSync::Start(m.store.get(), m.limiter.get(), std::min(1.0, f.refresh_s),
                                            ledger ? meter::FleetRole::kWorker : meter::FleetRole::kRouter);
  if (!fleet.ok()) return fleet.error().WithContext("metering store " + meter::RedactedUrl(f.db));
  m.fleet = std::move(fleet).value();
  const auto tenants = m.directory->Tenants();
  FS_LOG(kInfo, "metering store {}: {} tenants; keys refreshed every {} s", meter::RedactedUrl(f.db), tenants->size(),
         f.refresh_s);
  return m;
}

}  // namespace flashserve::app
