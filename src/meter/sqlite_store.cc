// The metering store in an embedded SQLite file (meter/store.h): one connection per process,
// calls serialized by a mutex, writes in IMMEDIATE transactions (other processes wait up to
// the busy timeout).
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
)sql";

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

base::Result<std::unique_ptr<MeterStore>> OpenMeterStore(const std::string& location) {
  if (location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0)
    return base::Error(base::ErrorCode::kUnimplemented,
                       "PostgreSQL metering stores are not implemented yet; give a SQLite file path");
  if (location.empty()) return base::Error(base::ErrorCode::kInvalidArgument, "no metering store given (--meter-db)");
  FS_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, SqliteDb::Open(location));
  auto store = std::make_unique<SqliteStore>(std::move(db));
  FS_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<MeterStore>(std::move(store));
}

}  // namespace flashserve::meter
