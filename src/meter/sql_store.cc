// The metering store over SQL (meter/store.h), one schema for both dialects: an embedded
// SQLite file or a PostgreSQL server shared by a fleet. One connection per process, calls
// serialized by a mutex; other processes wait on the database's own locks.
#include <unistd.h>

#include <functional>
#include <mutex>

#include "fmt/format.h"
#include "meter/sql_db.h"
#include "meter/store.h"

namespace flashserve::meter {
namespace {

// What a build needs of a store: `schema` is the oldest build that can use it (a build refuses a
// store of a higher one), `ddl` the tables and indexes made so far (raised without breaking
// older builds: 2 = the ledger indexed by end time, for the router's fleet limits).
constexpr int64_t kSchemaVersion = 1;
constexpr int64_t kDdlLevel = 2;

// Integer columns are BIGINT (64-bit in both dialects; SQLite files made with INTEGER read the same).
constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS meter_meta(name TEXT PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO meter_meta(name, value) VALUES ('schema', 1), ('ddl', 0), ('generation', 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS tenants(
  name TEXT PRIMARY KEY, cache_namespace TEXT NOT NULL, ttl_class TEXT NOT NULL, prices TEXT NOT NULL,
  limits TEXT NOT NULL, log_text BIGINT NOT NULL, created BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys(
  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, label TEXT NOT NULL, digest TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL, created BIGINT NOT NULL, revoked BIGINT NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS api_keys_by_tenant ON api_keys(tenant);
CREATE TABLE IF NOT EXISTS ledger(
  request_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, key_id TEXT NOT NULL, model TEXT NOT NULL,
  route TEXT NOT NULL, arrival_us BIGINT NOT NULL, first_token_us BIGINT NOT NULL, end_us BIGINT NOT NULL,
  input_uncached BIGINT NOT NULL, cached_memory BIGINT NOT NULL, cached_disk BIGINT NOT NULL,
  cached_shared BIGINT NOT NULL, cached_prefill BIGINT NOT NULL, output_tokens BIGINT NOT NULL,
  reasoning_tokens BIGINT NOT NULL, speculative_drafted BIGINT NOT NULL, speculative_accepted BIGINT NOT NULL,
  status TEXT NOT NULL, currency TEXT NOT NULL, rate_input BIGINT NOT NULL, rate_cached BIGINT NOT NULL,
  rate_output BIGINT NOT NULL, cost BIGINT NOT NULL);
CREATE INDEX IF NOT EXISTS ledger_by_arrival ON ledger(arrival_us);
CREATE INDEX IF NOT EXISTS ledger_by_tenant ON ledger(tenant, arrival_us);
CREATE INDEX IF NOT EXISTS ledger_by_end ON ledger(end_us);
)sql";

constexpr char kUsageColumns[] =
    "request_id, tenant, key_id, model, route, arrival_us, first_token_us, end_us, input_uncached, cached_memory, "
    "cached_disk, cached_shared, cached_prefill, output_tokens, reasoning_tokens, speculative_drafted, "
    "speculative_accepted, status, currency, rate_input, rate_cached, rate_output, cost";
constexpr int kUsageColumnCount = 23;

std::vector<SqlParam> UsageParams(const UsageRecord& r) {
  return {r.request_id,     r.tenant,           r.key_id,
          r.model,          r.route,            r.arrival_us,
          r.first_token_us, r.end_us,           r.input_uncached,
          r.cached_memory,  r.cached_disk,      r.cached_shared,
          r.cached_prefill, r.output_tokens,    r.reasoning_tokens,
          r.speculative_drafted, r.speculative_accepted, std::string(UsageStatusName(r.status)),
          r.currency,       r.rates.input,      r.rates.cached,
          r.rates.output,   r.cost};
}

UsageRecord ReadUsage(const SqlRow& q) {
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

// The SQL expression a usage group sums by (UTC days and hours).
std::string GroupExpression(UsageGroup g, SqlDialect dialect) {
  const bool pg = dialect == SqlDialect::kPostgres;
  const char* utc = "to_char(to_timestamp(arrival_us / 1000000) AT TIME ZONE 'UTC', '{}')";
  switch (g) {
    case UsageGroup::kTotal: return "''";
    case UsageGroup::kTenant: return "tenant";
    case UsageGroup::kKey: return "key_id";
    case UsageGroup::kModel: return "model";
    case UsageGroup::kDay:
      return pg ? fmt::format(fmt::runtime(utc), "YYYY-MM-DD") : "strftime('%Y-%m-%d', arrival_us / 1000000, 'unixepoch')";
    case UsageGroup::kHour:
      return pg ? fmt::format(fmt::runtime(utc), "YYYY-MM-DD\"T\"HH24")
                : "strftime('%Y-%m-%dT%H', arrival_us / 1000000, 'unixepoch')";
  }
  return "''";
}

constexpr char kTenantColumns[] = "name, cache_namespace, ttl_class, prices, limits, log_text, created";

base::Error NotFound(std::string message) { return base::Error(base::ErrorCode::kNotFound, std::move(message)); }

base::Result<Tenant> ReadTenant(const SqlRow& row) {
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

KeyRecord ReadKey(const SqlRow& row) {
  return KeyRecord{row.Text(0), row.Text(1), row.Text(2), row.Text(3), row.Text(4), row.Int(5), row.Int(6)};
}

// A tenant's columns in kTenantColumns order, but for `created`.
std::vector<SqlParam> TenantParams(const Tenant& t) {
  return {t.name, t.cache_namespace, t.ttl_class, PriceBookJson(t.prices).dump(), LimitsJson(t.limits).dump(),
          int64_t{t.log_text ? 1 : 0}};
}

class SqlStore final : public MeterStore {
 public:
  explicit SqlStore(std::unique_ptr<SqlDb> db) : db_(std::move(db)) {}

  // Makes the tables and indexes when the store lacks some (so a process without the right to
  // change the schema can use a store that is up to date); refuses a store for newer builds.
  base::Status Init() {
    std::lock_guard lock(mu_);
    auto ddl = StoredValue("ddl");
    if (!ddl.ok() || *ddl < kDdlLevel) {
      FS_RETURN_IF_ERROR(Transaction([&]() -> base::Status {
        // Processes starting together must not race on CREATE TABLE (PostgreSQL's catalog).
        if (db_->dialect() == SqlDialect::kPostgres)
          FS_RETURN_IF_ERROR(db_->Query("SELECT pg_advisory_xact_lock(7318)", {}).status());
        FS_RETURN_IF_ERROR(db_->Exec(kSchema));
        return db_->Run("UPDATE meter_meta SET value = ?1 WHERE name = 'ddl' AND value < ?1", {kDdlLevel}).status();
      }));
    }
    FS_ASSIGN_OR_RETURN(int64_t version, StoredValue("schema"));
    if (version > kSchemaVersion)
      return base::Error(base::ErrorCode::kFailedPrecondition,
                         "metering store: schema written by a newer flashserve (version " + std::to_string(version) +
                             ", this one knows " + std::to_string(kSchemaVersion) + ")");
    return base::Status::Ok();
  }

  base::Status AddTenant(const Tenant& t) override {
    FS_RETURN_IF_ERROR(ValidateTenant(t));
    return Write([&]() -> base::Status {
      std::vector<SqlParam> params = TenantParams(t);
      params.emplace_back(t.created);
      auto s = db_->Run(fmt::format("INSERT INTO tenants({}) VALUES (?1,?2,?3,?4,?5,?6,?7)", kTenantColumns), params);
      if (!s.ok() && s.error().code() == base::ErrorCode::kAlreadyExists)
        return base::Error(base::ErrorCode::kAlreadyExists, "tenant " + t.name + " exists");
      return s.status();
    });
  }

  base::Status UpdateTenant(const Tenant& t) override {
    FS_RETURN_IF_ERROR(ValidateTenant(t));
    return Write([&]() -> base::Status {
      FS_ASSIGN_OR_RETURN(int64_t changed,
                          db_->Run("UPDATE tenants SET cache_namespace = ?2, ttl_class = ?3, prices = ?4, "
                                   "limits = ?5, log_text = ?6 WHERE name = ?1",
                                   TenantParams(t)));
      if (changed == 0) return NotFound("no tenant " + t.name);
      return base::Status::Ok();
    });
  }

  base::Status RemoveTenant(const std::string& name, int64_t now) override {
    return Write([&]() -> base::Status {
      FS_ASSIGN_OR_RETURN(int64_t removed, db_->Run("DELETE FROM tenants WHERE name = ?1", {name}));
      if (removed == 0) return NotFound("no tenant " + name);
      return db_->Run("UPDATE api_keys SET revoked = ?1 WHERE tenant = ?2 AND revoked = 0", {now, name}).status();
    });
  }

  base::Result<std::optional<Tenant>> GetTenant(const std::string& name) override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(auto rows, db_->Query(fmt::format("SELECT {} FROM tenants WHERE name = ?1", kTenantColumns), {name}));
    if (rows.empty()) return std::optional<Tenant>();
    FS_ASSIGN_OR_RETURN(Tenant t, ReadTenant(rows[0]));
    return std::optional<Tenant>(std::move(t));
  }

  base::Result<std::vector<Tenant>> ListTenants() override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(auto rows, db_->Query(fmt::format("SELECT {} FROM tenants ORDER BY name", kTenantColumns), {}));
    std::vector<Tenant> out;
    for (const SqlRow& row : rows) {
      FS_ASSIGN_OR_RETURN(Tenant t, ReadTenant(row));
      out.push_back(std::move(t));
    }
    return out;
  }

  base::Status AddKey(const KeyRecord& k) override {
    return Write([&]() -> base::Status {
      FS_ASSIGN_OR_RETURN(auto found, db_->Query("SELECT 1 FROM tenants WHERE name = ?1", {k.tenant}));
      if (found.empty()) return NotFound("no tenant " + k.tenant);
      return db_
          ->Run("INSERT INTO api_keys(id, tenant, label, digest, prefix, created, revoked) "
                "VALUES (?1,?2,?3,?4,?5,?6,?7)",
                {k.id, k.tenant, k.label, k.digest, k.prefix, k.created, k.revoked})
          .status();
    });
  }

  base::Result<std::vector<KeyRecord>> ListKeys(const std::string& tenant) override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT id, tenant, label, digest, prefix, created, revoked FROM api_keys "
                                              "WHERE ?1 = '' OR tenant = ?1 ORDER BY created, id",
                                              {tenant}));
    std::vector<KeyRecord> out;
    for (const SqlRow& row : rows) out.push_back(ReadKey(row));
    return out;
  }

  base::Status RevokeKey(const std::string& id, int64_t now) override {
    return Write([&]() -> base::Status {
      FS_ASSIGN_OR_RETURN(int64_t changed,
                          db_->Run("UPDATE api_keys SET revoked = ?1 WHERE id = ?2 AND revoked = 0", {now, id}));
      if (changed == 0) return NotFound("no active key " + id);
      return base::Status::Ok();
    });
  }

  base::Status WriteUsage(const std::vector<UsageRecord>& records) override {
    if (records.empty()) return base::Status::Ok();
    std::lock_guard lock(mu_);
    return Transaction([&]() -> base::Status {
      const std::string sql = UpsertUsageSql();
      for (const UsageRecord& r : records) FS_RETURN_IF_ERROR(db_->Run(sql, UsageParams(r)).status());
      return base::Status::Ok();
    });
  }

  base::Result<std::optional<UsageRecord>> GetUsage(const std::string& request_id) override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(auto rows, db_->Query(fmt::format("SELECT {} FROM ledger WHERE request_id = ?1", kUsageColumns),
                                              {request_id}));
    if (rows.empty()) return std::optional<UsageRecord>();
    return std::optional<UsageRecord>(ReadUsage(rows[0]));
  }

  base::Result<std::vector<UsageRow>> QueryUsage(const UsageQuery& query) override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(
        auto rows,
        db_->Query(fmt::format("SELECT {} AS g, currency, COUNT(*), SUM(input_uncached), SUM(cached_memory), "
                               "SUM(cached_disk), SUM(cached_shared), SUM(cached_prefill), SUM(output_tokens), "
                               "SUM(reasoning_tokens), SUM(speculative_drafted), SUM(speculative_accepted), SUM(cost) "
                               "FROM ledger WHERE arrival_us >= ?1 AND arrival_us < ?2 AND (?3 = '' OR tenant = ?3) "
                               "GROUP BY 1, 2 ORDER BY 1, 2",
                               GroupExpression(query.group, db_->dialect())),
                   {query.from_us, query.to_us, query.tenant}));
    std::vector<UsageRow> out;
    for (const SqlRow& q : rows) {
      UsageRow r;
      r.group = q.Text(0);
      r.currency = q.Text(1);
      int64_t* sums[] = {&r.requests,      &r.input_uncached,   &r.cached_memory,       &r.cached_disk,
                         &r.cached_shared, &r.cached_prefill,   &r.output_tokens,       &r.reasoning_tokens,
                         &r.speculative_drafted, &r.speculative_accepted, &r.cost};
      for (int i = 0; i < 11; ++i) *sums[i] = q.Int(2 + i);
      out.push_back(std::move(r));
    }
    return out;
  }

  base::Result<std::map<std::string, std::map<int64_t, int64_t>>> OutputBySecond(int64_t since_us) override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT tenant, end_us / 1000000, SUM(output_tokens) FROM ledger "
                                              "WHERE end_us >= ?1 AND status <> 'interrupted' GROUP BY 1, 2",
                                              {since_us}));
    std::map<std::string, std::map<int64_t, int64_t>> out;
    for (const SqlRow& row : rows) out[row.Text(0)][row.Int(1)] += row.Int(2);
    return out;
  }

  base::Result<std::map<std::string, std::map<int64_t, Arrivals>>> ArrivalsBySecond(int64_t since_us) override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT tenant, arrival_us / 1000000, COUNT(*), SUM(input_uncached + "
                                              "cached_memory + cached_disk + cached_shared + cached_prefill) FROM ledger "
                                              "WHERE arrival_us >= ?1 GROUP BY 1, 2",
                                              {since_us}));
    std::map<std::string, std::map<int64_t, Arrivals>> out;
    for (const SqlRow& row : rows) {
      Arrivals& a = out[row.Text(0)][row.Int(1)];
      a.requests += row.Int(2);
      a.input_tokens += row.Int(3);
    }
    return out;
  }

  base::Result<int64_t> Generation() override {
    std::lock_guard lock(mu_);
    FS_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT value FROM meter_meta WHERE name = 'generation'", {}));
    return rows.empty() ? int64_t{0} : rows[0].Int(0);
  }

 private:
  // A meter_meta value; an error when the store has no schema yet (or a store made before
  // `ddl` was kept).
  base::Result<int64_t> StoredValue(const std::string& name) {
    FS_ASSIGN_OR_RETURN(auto rows, db_->Query("SELECT value FROM meter_meta WHERE name = ?1", {name}));
    if (rows.empty()) return base::Error(base::ErrorCode::kNotFound, "metering store: no " + name + " in meter_meta");
    return rows[0].Int(0);
  }

  static std::string UpsertUsageSql() {
    std::string placeholders;
    for (int i = 1; i <= kUsageColumnCount; ++i) placeholders += (i > 1 ? ",?" : "?") + std::to_string(i);
    std::string updates;
    for (const char* c : {"first_token_us", "end_us", "input_uncached", "cached_memory", "cached_disk",
                          "cached_shared", "cached_prefill", "output_tokens", "reasoning_tokens",
                          "speculative_drafted", "speculative_accepted", "status", "cost"})
      updates += fmt::format("{}{} = excluded.{}", updates.empty() ? "" : ", ", c, c);
    return fmt::format("INSERT INTO ledger({}) VALUES ({}) ON CONFLICT(request_id) DO UPDATE SET {} "
                       "WHERE ledger.status = 'interrupted'",
                       kUsageColumns, placeholders, updates);
  }

  // Runs `body` in a write transaction (SQLite: IMMEDIATE, so writers queue up front); rolls
  // back on error. The caller holds mu_.
  base::Status Transaction(const std::function<base::Status()>& body) {
    FS_RETURN_IF_ERROR(db_->Exec(db_->dialect() == SqlDialect::kSqlite ? "BEGIN IMMEDIATE" : "BEGIN"));
    base::Status s = body();
    if (s.ok()) s = db_->Exec("COMMIT");
    if (!s.ok()) (void)db_->Exec("ROLLBACK");
    return s;
  }

  // A tenant or key change: `body` and a generation bump in one transaction.
  base::Status Write(const std::function<base::Status()>& body) {
    std::lock_guard lock(mu_);
    return Transaction([&]() -> base::Status {
      FS_RETURN_IF_ERROR(body());
      return db_->Exec("UPDATE meter_meta SET value = value + 1 WHERE name = 'generation'");
    });
  }

  std::mutex mu_;
  std::unique_ptr<SqlDb> db_;
};

bool IsPostgresUrl(const std::string& location) {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

}  // namespace

base::Result<std::unique_ptr<MeterStore>> OpenMeterStore(const std::string& location, bool create) {
  if (location.empty()) return base::Error(base::ErrorCode::kInvalidArgument, "no metering store given (--meter-db)");
  std::unique_ptr<SqlDb> db;
  if (IsPostgresUrl(location)) {
    FS_ASSIGN_OR_RETURN(db, OpenPostgres(location));
  } else {
    if (!create && access(location.c_str(), F_OK) != 0)
      return base::Error(base::ErrorCode::kNotFound,
                         "no metering store at " + location + " (`flashserve tenant add` creates one)");
    FS_ASSIGN_OR_RETURN(db, OpenSqlite(location));
  }
  auto store = std::make_unique<SqlStore>(std::move(db));
  FS_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<MeterStore>(std::move(store));
}

}  // namespace flashserve::meter
