// A thin RAII layer over one SQLite connection: open with WAL and a busy timeout, run SQL,
// prepared statements with typed binds and columns, errors as base::Error. Not thread-safe:
// its owner serializes calls.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashserve::meter {

class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  SqliteStatement(SqliteStatement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) { other.stmt_ = nullptr; }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement() { sqlite3_finalize(stmt_); }

  SqliteStatement& Bind(int index, int64_t value);  // 1-based
  SqliteStatement& Bind(int index, std::string_view value);
  // true: a row is ready; false: done.
  base::Result<bool> Step();
  base::Status Run();  // steps to the end
  void Reset() { sqlite3_reset(stmt_); }  // to run again with new binds
  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string Text(int column) const;
  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

class SqliteDb {
 public:
  // Creates the file when absent; WAL journal, 5 s busy timeout.
  static base::Result<std::unique_ptr<SqliteDb>> Open(const std::string& path);
  ~SqliteDb() { sqlite3_close_v2(db_); }
  base::Status Exec(const std::string& sql);
  base::Result<SqliteStatement> Prepare(std::string_view sql);
  int64_t Changes() const { return sqlite3_changes64(db_); }
  // SQLITE_CONSTRAINT and friends, for mapping to kAlreadyExists.
  int LastErrorCode() const { return sqlite3_extended_errcode(db_); }

 private:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

// An error from the connection's last failure, with `what` as context.
base::Error SqliteError(sqlite3* db, std::string_view what);

}  // namespace flashserve::meter
