// The metering store in an embedded SQLite file (meter/store.h): one connection per process,
// calls serialized by a mutex, writes in IMMEDIATE transactions (other processes wait up to
// the busy timeout).
#include <unistd.h>

#include <functional>
#include <mutex>

#include "fmt/format.h"
#include "meter/sqlite_db.h"
#include "meter/store.h"

namespace flashserve::meter {
namespace {

constexpr int64_t kSchemaVersion = 1;

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS meter_meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meter_meta(name, value) VALUES ('schema', 1), ('generation', 0);
CREATE TABLE IF NOT EXISTS tenants(
  name TEXT PRIMARY KEY, cache_namespace TEXT NOT NULL, ttl_class TEXT NOT NULL, prices TEXT NOT NULL,
  limits TEXT NOT NULL, log_text INTEGER NOT NULL, created INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys(
  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, label TEXT NOT NULL, digest TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL, created INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS api_keys_by_tenant ON api_keys(tenant);
CREATE TABLE IF NOT EXISTS ledger(
  request_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, key_id TEXT NOT NULL, model TEXT NOT NULL,
  route TEXT NOT NULL, arrival_us INTEGER NOT NULL, first_token_us INTEGER NOT NULL, end_us INTEGER NOT NULL,
  input_uncached INTEGER NOT NULL, cached_memory INTEGER NOT NULL, cached_disk INTEGER NOT NULL,
  cached_shared INTEGER NOT NULL, cached_prefill INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
  reasoning_tokens INTEGER NOT NULL, speculative_drafted INTEGER NOT NULL, speculative_accepted INTEGER NOT NULL,
  status TEXT NOT NULL, currency TEXT NOT NULL, rate_input INTEGER NOT NULL, rate_cached INTEGER NOT NULL,
  rate_output INTEGER NOT NULL, cost INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS ledger_by_arrival ON ledger(arrival_us);
CREATE INDEX IF NOT EXISTS ledger_by_tenant ON ledger(tenant, arrival_us);
)sql";

constexpr char kUsageColumns[] =
    "request_id, tenant, key_id, model, route, arrival_us, first_token_us, end_us, input_uncached, cached_memory, "
    "cached_disk, cached_shared, cached_prefill, output_tokens, reasoning_tokens, speculative_drafted, "
    "speculative_accepted, status, currency, rate_input, rate_cached, rate_output, cost";
constexpr int kUsageColumnCount = 23;

void BindUsage(SqliteStatement& q, const UsageRecord& r) {
  q.Bind(1, r.request_id).Bind(2, r.tenant).Bind(3, r.key_id).Bind(4, r.model).Bind(5, r.route);
  q.Bind(6, r.arrival_us).Bind(7, r.first_token_us).Bind(8, r.end_us).Bind(9, r.input_uncached);
  q.Bind(10, r.cached_memory).Bind(11, r.cached_disk).Bind(12, r.cached_shared).Bind(13, r.cached_prefill);
  q.Bind(14, r.output_tokens).Bind(15, r.reasoning_tokens).Bind(16, r.speculative_drafted);
  q.Bind(17, r.speculative_accepted).Bind(18, UsageStatusName(r.status)).Bind(19, r.currency);
  q.Bind(20, r.rates.input).Bind(21, r.rates.cached).Bind(22, r.rates.output).Bind(23, r.cost);
}

UsageRecord ReadUsage(const SqliteStatement& q) {
  UsageRecord r;
  r.request_id = q.Text(0);
  r.tenant = q.Text(1);
  r.key_id = q.Text(2);
  r.model = q.Text(3);
  r.route = q.Text(4);
  r.arrival_us = q.Int(5);
  r.first_token_us = q.Int(6);
  r.end_us = q.Int(7);
  r.input_uncached = q.Int(8);
  r.cached_memory = q.Int(9);
  r.cached_disk = q.Int(10);
  r.cached_shared = q.Int(11);
  r.cached_prefill = q.Int(12);
  r.output_tokens = q.Int(13);
  r.reasoning_tokens = q.Int(14);
  r.speculative_drafted = q.Int(15);
  r.speculative_accepted = q.Int(16);
  r.status = ParseUsageStatus(q.Text(17)).value_or(UsageStatus::kInterrupted);
  r.currency = q.Text(18);
  r.rates = {q.Int(19), q.Int(20), q.Int(21)};
  r.cost = q.Int(22);
  return r;
}

// The SQL expression a usage group sums by.
const char* GroupExpression(UsageGroup g) {
  switch (g) {
    case UsageGroup::kTotal: return "''";
    case UsageGroup::kTenant: return "tenant";
    case UsageGroup::kKey: return "key_id";
    case UsageGroup::kModel: return "model";
    case UsageGroup::kDay: return "strftime('%Y-%m-%d', arrival_us / 1000000, 'unixepoch')";
    case UsageGroup::kHour: return "strftime('%Y-%m-%dT%H', arrival_us / 1000000, 'unixepoch')";
  }
  return "''";
}

constexpr char kTenantColumns[] = "name, cache_namespace, ttl_class, prices, limits, log_text, created";

base::Error NotFound(std::string message) { return base::Error(base::ErrorCode::kNotFound, std::move(message)); }

base::Result<Tenant> ReadTenant(const SqliteStatement& row) {
  Tenant t;
  t.name = row.Text(0);
  t.cache_namespace = row.Text(1);
  t.ttl_class = row.Text(2);
  const Json prices = Json::parse(row.Text(3), nullptr, false);
  const Json limits = Json::parse(row.Text(4), nullptr, false);
  auto book = PriceBookFromJson(prices);
  if (!book.ok()) return book.error().WithContext("tenant " + t.name);
  auto lim = LimitsFromJson(limits);
  if (!lim.ok()) return lim.error().WithContext("tenant " + t.name);
  t.prices = *book;
  t.limits = *lim;
  t.log_text = row.Int(5) != 0;
  t.created = row.Int(6);
  return t;
}

KeyRecord ReadKey(const SqliteStatement& row) {
  return KeyRecord{row.Text(0), row.Text(1), row.Text(2), row.Text(3), row.Text(4), row.Int(5), row.Int(6)};
}

class SqliteStore final : public MeterStore {
 public:
  explicit SqliteStore(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}

  base::Status Init() {
    std::lock_guard lock(mu_);
    FS_RETURN_IF_ERROR(db_->Exec(kSchema));
    FS_ASSIGN_OR_RETURN(SqliteStatement q, db_->Prepare("SELECT value FROM meter_meta WHERE name = 'schema'"));
    FS_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row || q.Int(0) > kSchemaVersion)
      return base::Error(base::ErrorCode::kFailedPrecondition,
                         "metering store: schema written by a newer flashserve (version " +
                             std::to_string(row ? q.Int(0) : -1) + ")");
    return base::Status::Ok();
  }

  base::Status AddTenant(const Tenant& t) override {
    FS_RETURN_IF_ERROR(ValidateTenant(t));
    return Write([&]() -> base::Status {
      FS_ASSIGN_OR_RETURN(SqliteStatement q,
                          db_->Prepare(fmt::format("INSERT INTO tenants({}) VALUES (?,?,?,?,?,?,?)", kTenantColumns)));
      BindTenant(q, t).Bind(7, t.created);
      base::Status s = q.Run();
      if (!s.ok() && s.error().code() == base::ErrorCode::kAlreadyExists)
        return base::Error(base::ErrorCode::kAlreadyExists, "tenant " + t.name + " exists");
      return s;
    });
  }

  base::Status UpdateTenant(const Tenant& t) override {
    FS_RETURN_IF_ERROR(ValidateTenant(t));
    return Write([&]() -> base::Status {
      FS_ASSIGN_OR_RETURN(SqliteStatement q,
                          db_->Prepare("UPDATE tenants SET name = ?1, cache_namespace = ?2, ttl_class = ?3, "
                                       "prices = ?4, limits = ?5, log_text = ?6 WHERE name = ?1"));
      FS_RETURN_IF_ERROR(BindTenant(q, t).Run());
      if (db_->Changes() == 0) return NotFound("no tenant " + t.name);
      return base::Status::Ok();
    });
  }

  base::Status RemoveTenant(const std::string& name, int64_t now) override {
    return Write([&]() -> base::Status {
      FS_ASSIGN_OR_RETURN(SqliteStatement del, db_->Prepare("DELETE FROM tenants WHERE name = ?"));
      FS_RETURN_IF_ERROR(del.Bind(1, name).Run());
      if (db_->Changes() == 0) return NotFound("no tenant " + name);
      FS_ASSIGN_OR_RETURN(SqliteStatement revoke,
                          db_->Prepare("UPDATE api_keys SET revoked = ? WHERE tenant = ? AND revoked = 0"));
      return revoke.Bind(1, now).Bind(2, name).Run();
    });
  }

  base::Result<std::optional<Tenant>> GetTenant(const std::string& name) override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(SqliteStatement q,
                        db_->Prepare(fmt::format("SELECT {} FROM tenants WHERE name = ?", kTenantColumns)));
    q.Bind(1, name);
    FS_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return std::optional<Tenant>();
    FS_ASSIGN_OR_RETURN(Tenant t, ReadTenant(q));
    return std::optional<Tenant>(std::move(t));
  }

  base::Result<std::vector<Tenant>> ListTenants() override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(SqliteStatement q,
                        db_->Prepare(fmt::format("SELECT {} FROM tenants ORDER BY name", kTenantColumns)));
    std::vector<Tenant> out;
    for (;;) {
      FS_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) return out;
      FS_ASSIGN_OR_RETURN(Tenant t, ReadTenant(q));
      out.push_back(std::move(t));
    }
  }

  base::Status AddKey(const KeyRecord& k) override {
    return Write([&]() -> base::Status {
      FS_ASSIGN_OR_RETURN(SqliteStatement exists, db_->Prepare("SELECT 1 FROM tenants WHERE name = ?"));
      FS_ASSIGN_OR_RETURN(bool found, exists.Bind(1, k.tenant).Step());
      if (!found) return NotFound("no tenant " + k.tenant);
      FS_ASSIGN_OR_RETURN(SqliteStatement q, db_->Prepare("INSERT INTO api_keys(id, tenant, label, digest, prefix, "
                                                          "created, revoked) VALUES (?,?,?,?,?,?,?)"));
      q.Bind(1, k.id).Bind(2, k.tenant).Bind(3, k.label).Bind(4, k.digest).Bind(5, k.prefix).Bind(6, k.created);
      return q.Bind(7, k.revoked).Run();
    });
  }

  base::Result<std::vector<KeyRecord>> ListKeys(const std::string& tenant) override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(SqliteStatement q,
                        db_->Prepare("SELECT id, tenant, label, digest, prefix, created, revoked FROM api_keys "
                                     "WHERE ?1 = '' OR tenant = ?1 ORDER BY created, id"));
    q.Bind(1, tenant);
    std::vector<KeyRecord> out;
    for (;;) {
      FS_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) return out;
      out.push_back(ReadKey(q));
    }
  }

  base::Status RevokeKey(const std::string& id, int64_t now) override {
    return Write([&]() -> base::Status {
      FS_ASSIGN_OR_RETURN(SqliteStatement q, db_->Prepare("UPDATE api_keys SET revoked = ? WHERE id = ? AND revoked = 0"));
      FS_RETURN_IF_ERROR(q.Bind(1, now).Bind(2, id).Run());
      if (db_->Changes() == 0) return NotFound("no active key " + id);
      return base::Status::Ok();
    });
  }

  base::Status WriteUsage(const std::vector<UsageRecord>& records) override {
    if (records.empty()) return base::Status::Ok();
    std::lock_guard lock(mu_);
    FS_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
    base::Status s = WriteUsageLocked(records);
    if (s.ok()) s = db_->Exec("COMMIT");
    if (!s.ok()) (void)db_->Exec("ROLLBACK");
    return s;
  }

  base::Result<std::optional<UsageRecord>> GetUsage(const std::string& request_id) override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(SqliteStatement q,
                        db_->Prepare(fmt::format("SELECT {} FROM ledger WHERE request_id = ?", kUsageColumns)));
    FS_ASSIGN_OR_RETURN(bool row, q.Bind(1, request_id).Step());
    if (!row) return std::optional<UsageRecord>();
    return std::optional<UsageRecord>(ReadUsage(q));
  }

  base::Result<std::vector<UsageRow>> QueryUsage(const UsageQuery& query) override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(
        SqliteStatement q,
        db_->Prepare(fmt::format(
            "SELECT {} AS g, currency, COUNT(*), SUM(input_uncached), SUM(cached_memory), SUM(cached_disk), "
            "SUM(cached_shared), SUM(cached_prefill), SUM(output_tokens), SUM(reasoning_tokens), "
            "SUM(speculative_drafted), SUM(speculative_accepted), SUM(cost) FROM ledger "
            "WHERE arrival_us >= ?1 AND arrival_us < ?2 AND (?3 = '' OR tenant = ?3) GROUP BY g, currency "
            "ORDER BY g, currency",
            GroupExpression(query.group))));
    q.Bind(1, query.from_us).Bind(2, query.to_us).Bind(3, query.tenant);
    std::vector<UsageRow> out;
    for (;;) {
      FS_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) return out;
      UsageRow r;
      r.group = q.Text(0);
      r.currency = q.Text(1);
      int64_t* sums[] = {&r.requests,      &r.input_uncached,   &r.cached_memory,       &r.cached_disk,
                         &r.cached_shared, &r.cached_prefill,   &r.output_tokens,       &r.reasoning_tokens,
                         &r.speculative_drafted, &r.speculative_accepted, &r.cost};
      for (int i = 0; i < 11; ++i) *sums[i] = q.Int(2 + i);
      out.push_back(std::move(r));
    }
  }

  base::Result<int64_t> Generation() override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(SqliteStatement q, db_->Prepare("SELECT value FROM meter_meta WHERE name = 'generation'"));
    FS_ASSIGN_OR_RETURN(bool row, q.Step());
    return row ? q.Int(0) : int64_t{0};
  }

 private:
  static SqliteStatement& BindTenant(SqliteStatement& q, const Tenant& t) {
    return q.Bind(1, t.name)
        .Bind(2, t.cache_namespace)
        .Bind(3, t.ttl_class)
        .Bind(4, PriceBookJson(t.prices).dump())
        .Bind(5, LimitsJson(t.limits).dump())
        .Bind(6, int64_t{t.log_text ? 1 : 0});
  }

  base::Status WriteUsageLocked(const std::vector<UsageRecord>& records) {
    std::string placeholders;
    for (int i = 1; i <= kUsageColumnCount; ++i) placeholders += (i > 1 ? ",?" : "?") + std::to_string(i);
    std::string updates;
    for (const char* c : {"first_token_us", "end_us", "input_uncached", "cached_memory", "cached_disk",
                          "cached_shared", "cached_prefill", "output_tokens", "reasoning_tokens",
                          "speculative_drafted", "speculative_accepted", "status", "cost"})
      updates += fmt::format("{}{} = excluded.{}", updates.empty() ? "" : ", ", c, c);
    FS_ASSIGN_OR_RETURN(SqliteStatement q,
                        db_->Prepare(fmt::format("INSERT INTO ledger({}) VALUES ({}) ON CONFLICT(request_id) DO "
                                                 "UPDATE SET {} WHERE ledger.status = 'interrupted'",
                                                 kUsageColumns, placeholders, updates)));
    for (const UsageRecord& r : records) {
      BindUsage(q, r);
      FS_RETURN_IF_ERROR(q.Run());
      q.Reset();
    }
    return base::Status::Ok();
  }

  // Runs `body` in an IMMEDIATE transaction that also bumps the generation; rolls back on error.
  base::Status Write(const std::function<base::Status()>& body) {
    std::lock_guard lock(mu_);
    FS_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
    base::Status s = body();
    if (s.ok()) s = db_->Exec("UPDATE meter_meta SET value = value + 1 WHERE name = 'generation'");
    if (s.ok()) s = db_->Exec("COMMIT");
    if (!s.ok()) (void)db_->Exec("ROLLBACK");
    return s;
  }

  std::mutex mu_;
  std::unique_ptr<SqliteDb> db_;
};

}  // namespace

base::Result<std::unique_ptr<MeterStore>> OpenMeterStore(const std::string& location, bool create) {
  if (location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0)
    return base::Error(base::ErrorCode::kUnimplemented,
                       "PostgreSQL metering stores are not implemented yet; give a SQLite file path");
  if (location.empty()) return base::Error(base::ErrorCode::kInvalidArgument, "no metering store given (--meter-db)");
  if (!create && access(location.c_str(), F_OK) != 0)
    return base::Error(base::ErrorCode::kNotFound,
                       "no metering store at " + location + " (`flashserve tenant add` creates one)");
  FS_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, SqliteDb::Open(location));
  auto store = std::make_unique<SqliteStore>(std::move(db));
  FS_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<MeterStore>(std::move(store));
}

}  // namespace flashserve::meter
