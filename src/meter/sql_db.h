// A database connection as the metering store uses it: SQL with numbered parameters (?1, ?2,
// ...), result rows as text, errors as base::Error. Two dialects: an embedded SQLite file and
// a PostgreSQL server. Not thread-safe: its owner serializes calls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"

namespace flashserve::meter {

enum class SqlDialect { kSqlite, kPostgres };

using SqlParam = std::variant<int64_t, std::string>;

struct SqlRow {
  std::vector<std::string> cells;  // NULL reads as ""
  const std::string& Text(int column) const { return cells[static_cast<size_t>(column)]; }
  int64_t Int(int column) const;  // 0 for "" (NULL)
};

class SqlDb {
 public:
  virtual ~SqlDb() = default;
  virtual SqlDialect dialect() const = 0;
  // One or more statements without parameters.
  virtual base::Status Exec(const std::string& sql) = 0;
  virtual base::Result<std::vector<SqlRow>> Query(std::string_view sql, const std::vector<SqlParam>& params) = 0;
  // Runs one statement; returns how many rows it changed.
  virtual base::Result<int64_t> Run(std::string_view sql, const std::vector<SqlParam>& params) = 0;
};

// Errors map to codes: a unique or primary key violation is kAlreadyExists; a busy database,
// a serialization conflict or a lost server connection is kUnavailable; anything else kIoError.

// Opens (creating when absent) a SQLite file in WAL mode with a 5 s busy timeout.
base::Result<std::unique_ptr<SqlDb>> OpenSqlite(const std::string& path);
// Connects to a PostgreSQL server by URL (postgresql://user[:password]@host[:port]/db?...), with
// a 5 s connect timeout and TCP keepalives (a vanished server fails a call in about 30 s) unless
// the URL sets its own; a lost connection is re-established on the next call outside a
// transaction (inside one, after its ROLLBACK).
base::Result<std::unique_ptr<SqlDb>> OpenPostgres(const std::string& url);
// The URL without its password (user info or a password= parameter), for messages.
std::string RedactedUrl(const std::string& url);

}  // namespace flashserve::meter
