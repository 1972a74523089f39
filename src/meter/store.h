// The metering store: tenants, API keys and the usage ledger, shared by the
// CLI, the workers and the router. Every tenant or key change bumps a generation counter in
// the same transaction, so readers notice changes with one cheap query. Implementations are
// safe to call from any thread; several processes may use one store at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "meter/tenant.h"
#include "meter/usage.h"

namespace flashserve::meter {

class MeterStore {
 public:
  virtual ~MeterStore() = default;

  // kAlreadyExists when the name is taken.
  virtual base::Status AddTenant(const Tenant& tenant) = 0;
  // Replaces every field but name and created; kNotFound when absent.
  virtual base::Status UpdateTenant(const Tenant& tenant) = 0;
  // Removes the tenant and revokes its keys (its ledger records stay); kNotFound when absent.
  virtual base::Status RemoveTenant(const std::string& name, int64_t now) = 0;
  virtual base::Result<std::optional<Tenant>> GetTenant(const std::string& name) = 0;
  virtual base::Result<std::vector<Tenant>> ListTenants() = 0;

  // kNotFound when the key's tenant does not exist; kAlreadyExists for a taken id or digest.
  virtual base::Status AddKey(const KeyRecord& key) = 0;
  // Keys of one tenant ("" = all), revoked ones included, oldest first.
  virtual base::Result<std::vector<KeyRecord>> ListKeys(const std::string& tenant) = 0;
  // kNotFound when no active key has this id.
  virtual base::Status RevokeKey(const std::string& id, int64_t now) = 0;

  // Increases with every tenant or key change.
  virtual base::Result<int64_t> Generation() = 0;

  // Writes records in one transaction, keyed by request id: a new id is inserted; an existing
  // record is replaced only while it is still kInterrupted (a final record never changes).
  virtual base::Status WriteUsage(const std::vector<UsageRecord>& records) = 0;
  virtual base::Result<std::optional<UsageRecord>> GetUsage(const std::string& request_id) = 0;
  // Sums of the records that arrived in [from, to), grouped, each currency apart.
  virtual base::Result<std::vector<UsageRow>> QueryUsage(const UsageQuery& query) = 0;
  // Output tokens of the requests that ended (final records) at or after since_us, per tenant
  // and second of their end (Unix seconds).
  virtual base::Result<std::map<std::string, std::map<int64_t, int64_t>>> OutputBySecond(int64_t since_us) = 0;
  // Requests and their prompt tokens (every tier) per tenant and second of arrival, for the
  // records (in flight or final) that arrived at or after since_us.
  virtual base::Result<std::map<std::string, std::map<int64_t, Arrivals>>> ArrivalsBySecond(int64_t since_us) = 0;
};

// Opens the store at `location` (a file path for SQLite), creating it when absent if `create`
// (else kNotFound).
base::Result<std::unique_ptr<MeterStore>> OpenMeterStore(const std::string& location, bool create = true);

}  // namespace flashserve::meter
