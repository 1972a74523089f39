// The PostgreSQL dialect of meter/sql_db.h over libpq: text parameters and results, notices
// silenced, a connection lost while idle reset and the statement sent again; one lost inside a
// transaction refuses statements until ROLLBACK. Used by SqlStore under its mutex.
#include <libpq-fe.h>

#include <cctype>

#include "fmt/format.h"
#include "meter/sql_db.h"

namespace flashserve::meter {
namespace {

constexpr char kUniqueViolation[] = "23505";

struct Result {
  PGresult* res = nullptr;
  ~Result() { PQclear(res); }
};

std::string Trimmed(const char* message) {
  std::string s = message ? message : "";
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// "?N" placeholders (outside quoted literals) as PostgreSQL's "$N".
std::string Placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size());
  bool quoted = false;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '\'') quoted = !quoted;
    const bool placeholder = !quoted && c == '?' && i + 1 < sql.size() && std::isdigit(static_cast<unsigned char>(sql[i + 1]));
    out += placeholder ? '$' : c;
  }
  return out;
}

class PgDb final : public SqlDb {
 public:
  PgDb(PGconn* conn, std::string where) : conn_(conn), where_(std::move(where)) {
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  }
  ~PgDb() override { PQfinish(conn_); }
  SqlDialect dialect() const override { return SqlDialect::kPostgres; }

  base::Status Exec(const std::string& sql) override {
    if (sql == "ROLLBACK") return Rollback();
    Result r;
    return Attempt(r, [&] { return PQexec(conn_, sql.c_str()); });
  }

  base::Result<std::vector<SqlRow>> Query(std::string_view sql, const std::vector<SqlParam>& params) override {
    Result r;
    FS_RETURN_IF_ERROR(Attempt(r, [&] { return ExecParams(sql, params); }));
    std::vector<SqlRow> rows(static_cast<size_t>(PQntuples(r.res)));
    const int columns = PQnfields(r.res);
    for (size_t i = 0; i < rows.size(); ++i)
      for (int c = 0; c < columns; ++c)
        rows[i].cells.emplace_back(PQgetvalue(r.res, static_cast<int>(i), c),
                                   static_cast<size_t>(PQgetlength(r.res, static_cast<int>(i), c)));
    return rows;
  }

  base::Result<int64_t> Run(std::string_view sql, const std::vector<SqlParam>& params) override {
    Result r;
    FS_RETURN_IF_ERROR(Attempt(r, [&] { return ExecParams(sql, params); }));
    SqlRow changed{{PQcmdTuples(r.res)}};
    return changed.Int(0);
  }

 private:
  // Runs `exec` into `r`. A connection found lost while no transaction was open (the server
  // restarted, an idle connection was cut) is re-established and the statement sent once more;
  // inside a transaction the error stands, and every statement but the caller's ROLLBACK (which
  // reconnects) fails until then, so no part of the transaction runs on its own.
  template <typename Exec>
  base::Status Attempt(Result& r, const Exec& exec) {
    if (tx_lost_)  // nothing may run outside the transaction it belonged to
      return base::Error(base::ErrorCode::kUnavailable,
                         fmt::format("metering store {}: the connection was lost inside a transaction", where_));
    FS_RETURN_IF_ERROR(Connected());
    const bool idle = PQtransactionStatus(conn_) == PQTRANS_IDLE;
    r.res = exec();
    if (Failed(r.res) && !idle && PQstatus(conn_) != CONNECTION_OK) tx_lost_ = true;
    if (!Failed(r.res) || !idle || PQstatus(conn_) == CONNECTION_OK) return Check(r.res);
    PQclear(r.res);
    r.res = nullptr;
    FS_RETURN_IF_ERROR(Connected());
    r.res = exec();
    return Check(r.res);
  }

  static bool Failed(PGresult* res) {
    const ExecStatusType status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    return status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK;
  }

  PGresult* ExecParams(std::string_view sql, const std::vector<SqlParam>& params) {
    std::vector<std::string> text;
    text.reserve(params.size());
    for (const SqlParam& p : params)
      text.push_back(std::holds_alternative<int64_t>(p) ? std::to_string(std::get<int64_t>(p)) : std::get<std::string>(p));
    std::vector<const char*> values;
    for (const std::string& t : text) values.push_back(t.c_str());
    const std::string statement = Placeholders(sql);
    return PQexecParams(conn_, statement.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                        nullptr, 0);
  }

  // Ends the transaction. A connection lost before or during it took its transaction with it:
  // that is a rollback too, and the next call reconnects.
  base::Status Rollback() {
    tx_lost_ = false;
    if (PQstatus(conn_) != CONNECTION_OK) return Connected();
    Result r{PQexec(conn_, "ROLLBACK")};
    if (PQstatus(conn_) != CONNECTION_OK) return Connected();
    return Check(r.res);
  }

  // Re-establishes a lost connection; kUnavailable while the server cannot be reached.
  base::Status Connected() {
    if (PQstatus(conn_) == CONNECTION_OK) return base::Status::Ok();
    PQreset(conn_);
    if (PQstatus(conn_) == CONNECTION_OK) return base::Status::Ok();
    return base::Error(base::ErrorCode::kUnavailable,
                       fmt::format("metering store {}: {}", where_, Trimmed(PQerrorMessage(conn_))));
  }

  base::Status Check(PGresult* res) {
    if (!Failed(res)) return base::Status::Ok();
    const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
    const std::string sqlstate = state ? state : "";
    base::ErrorCode kind = base::ErrorCode::kIoError;
    if (sqlstate == kUniqueViolation) kind = base::ErrorCode::kAlreadyExists;
    if (sqlstate == "40001" || sqlstate == "40P01" || PQstatus(conn_) != CONNECTION_OK)
      kind = base::ErrorCode::kUnavailable;
    const std::string message = Trimmed(res ? PQresultErrorMessage(res) : PQerrorMessage(conn_));
    return base::Error(kind, fmt::format("metering store {}: {}", where_, message));
  }

  PGconn* conn_;
  std::string where_;
  bool tx_lost_ = false;  // the connection went inside a transaction not yet rolled back
};

}  // namespace

std::string RedactedUrl(const std::string& url) {
  std::string out = url;
  const size_t scheme = out.find("://");
  const size_t at = out.find('@');
  if (scheme != std::string::npos && at != std::string::npos && at > scheme) {
    const size_t colon = out.find(':', scheme + 3);
    if (colon != std::string::npos && colon < at) out = out.substr(0, colon) + ":***" + out.substr(at);
  }
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    const size_t start = p + 9;
    const size_t end = out.find('&', start);
    out.replace(start, end == std::string::npos ? std::string::npos : end - start, "***");
  }
  return out;
}

base::Result<std::unique_ptr<SqlDb>> OpenPostgres(const std::string& url) {
  // Defaults the URL may override: a connect timeout, and TCP keepalives plus a user timeout so a
  // server that vanished without closing the connection fails a call in about 30 s, not never.
  const char* keywords[] = {"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                            "keepalives_count", "tcp_user_timeout", "dbname", nullptr};
  const char* values[] = {"5", "1", "10", "5", "3", "30000", url.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  const std::string where = RedactedUrl(url);
  if (conn == nullptr) return base::Error(base::ErrorCode::kResourceExhausted, "metering store: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    base::Error error(base::ErrorCode::kUnavailable,
                      fmt::format("metering store {}: {}", where, Trimmed(PQerrorMessage(conn))));
    PQfinish(conn);
    return error;
  }
  return std::unique_ptr<SqlDb>(std::make_unique<PgDb>(conn, where));
}

}  // namespace flashserve::meter
