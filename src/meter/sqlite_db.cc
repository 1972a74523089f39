// SQLite connection and statements (meter/sqlite_db.h).
#include "meter/sqlite_db.h"

#include "fmt/format.h"

namespace flashserve::meter {

base::Error SqliteError(sqlite3* db, std::string_view what) {
  const int code = sqlite3_extended_errcode(db);
  const base::ErrorCode kind = (code & 0xff) == SQLITE_CONSTRAINT ? base::ErrorCode::kAlreadyExists
                               : (code & 0xff) == SQLITE_BUSY     ? base::ErrorCode::kUnavailable
                                                                  : base::ErrorCode::kIoError;
  return base::Error(kind, fmt::format("{}: {}", what, sqlite3_errmsg(db)));
}

SqliteStatement& SqliteStatement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}

base::Result<bool> SqliteStatement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, "metering store");
}

base::Status SqliteStatement::Run() {
  for (;;) {
    FS_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return base::Status::Ok();
  }
}

std::string SqliteStatement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text),
                                                       static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

base::Result<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    base::Error error(base::ErrorCode::kIoError,
                      fmt::format("metering store {}: {}", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close_v2(db);
    return error;
  }
  std::unique_ptr<SqliteDb> out(new SqliteDb(db));
  sqlite3_busy_timeout(db, 5000);
  FS_RETURN_IF_ERROR(out->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
  return out;
}

base::Status SqliteDb::Exec(const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) == SQLITE_OK) return base::Status::Ok();
  base::Error error = SqliteError(db_, "metering store");
  sqlite3_free(message);
  return error;
}

base::Result<SqliteStatement> SqliteDb::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) != SQLITE_OK)
    return SqliteError(db_, "metering store: preparing a statement");
  return SqliteStatement(db_, stmt);
}

}  // namespace flashserve::meter
