// The SQLite dialect of meter/sql_db.h: one connection, statements prepared per call; also
// SqlRow::Int, shared by both dialects. Used by SqlStore under its mutex.
#include <sqlite3.h>

#include <charconv>

#include "fmt/format.h"
#include "meter/sql_db.h"

namespace flashserve::meter {

int64_t SqlRow::Int(int column) const {
  const std::string& s = Text(column);
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

namespace {

base::Error SqliteError(sqlite3* db, std::string_view what) {
  const int code = sqlite3_extended_errcode(db);
  const base::ErrorCode kind = (code & 0xff) == SQLITE_CONSTRAINT ? base::ErrorCode::kAlreadyExists
                               : (code & 0xff) == SQLITE_BUSY     ? base::ErrorCode::kUnavailable
                                                                  : base::ErrorCode::kIoError;
  return base::Error(kind, fmt::format("{}: {}", what, sqlite3_errmsg(db)));
}

struct Statement {
  sqlite3_stmt* stmt = nullptr;
  ~Statement() { sqlite3_finalize(stmt); }
};

class SqliteDb final : public SqlDb {
 public:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  ~SqliteDb() override { sqlite3_close_v2(db_); }
  SqlDialect dialect() const override { return SqlDialect::kSqlite; }

  base::Status Exec(const std::string& sql) override {
    char* message = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) == SQLITE_OK) return base::Status::Ok();
    base::Error error = SqliteError(db_, "metering store");
    sqlite3_free(message);
    return error;
  }

  base::Result<std::vector<SqlRow>> Query(std::string_view sql, const std::vector<SqlParam>& params) override {
    Statement s;
    FS_RETURN_IF_ERROR(Prepare(sql, params, s));
    std::vector<SqlRow> rows;
    for (;;) {
      const int rc = sqlite3_step(s.stmt);
      if (rc == SQLITE_DONE) return rows;
      if (rc != SQLITE_ROW) return SqliteError(db_, "metering store");
      SqlRow row;
      const int columns = sqlite3_column_count(s.stmt);
      for (int c = 0; c < columns; ++c) {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s.stmt, c));
        row.cells.emplace_back(text ? std::string(text, static_cast<size_t>(sqlite3_column_bytes(s.stmt, c)))
                                    : std::string());
      }
      rows.push_back(std::move(row));
    }
  }

  base::Result<int64_t> Run(std::string_view sql, const std::vector<SqlParam>& params) override {
    Statement s;
    FS_RETURN_IF_ERROR(Prepare(sql, params, s));
    for (;;) {
      const int rc = sqlite3_step(s.stmt);
      if (rc == SQLITE_DONE) return static_cast<int64_t>(sqlite3_changes64(db_));
      if (rc != SQLITE_ROW) return SqliteError(db_, "metering store");
    }
  }

 private:
  base::Status Prepare(std::string_view sql, const std::vector<SqlParam>& params, Statement& s) {
    if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &s.stmt, nullptr) != SQLITE_OK)
      return SqliteError(db_, "metering store: preparing a statement");
    for (size_t i = 0; i < params.size(); ++i) {
      const int index = static_cast<int>(i) + 1;
      if (const auto* v = std::get_if<int64_t>(&params[i])) {
        sqlite3_bind_int64(s.stmt, index, *v);
      } else {
        const std::string& t = std::get<std::string>(params[i]);
        sqlite3_bind_text(s.stmt, index, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
      }
    }
    return base::Status::Ok();
  }

  sqlite3* db_;
};

}  // namespace

base::Result<std::unique_ptr<SqlDb>> OpenSqlite(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    base::Error error(base::ErrorCode::kIoError,
                      fmt::format("metering store {}: {}", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close_v2(db);
    return error;
  }
  sqlite3_busy_timeout(db, 5000);
  auto out = std::make_unique<SqliteDb>(db);
  FS_RETURN_IF_ERROR(out->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
  return std::unique_ptr<SqlDb>(std::move(out));
}

}  // namespace flashserve::meter
