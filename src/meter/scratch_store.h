// For tests: an empty metering store per backend. SQLite: a file in a fresh temporary directory.
// PostgreSQL: a fresh schema on the server named by $FLASHSERVE_TEST_PG_URL, or by the URL in the
// file $FLASHSERVE_TEST_PG_URL_FILE (tests/pg/pg_server.sh writes it; CTest starts that server).
// StoreSuite runs a gtest suite on each backend (skipped clearly where one is missing).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>

#include "fmt/format.h"
#include "meter/sql_db.h"
#include "meter/store.h"

namespace flashserve::meter {

enum class StoreBackend { kSqlite, kPostgres };

inline std::string BackendName(StoreBackend b) { return b == StoreBackend::kSqlite ? "Sqlite" : "Postgres"; }

// The test server's URL, or "" when none is configured.
inline std::string TestPostgresUrl() {
  if (const char* url = std::getenv("FLASHSERVE_TEST_PG_URL"); url != nullptr && *url != '\0') return url;
  const char* file = std::getenv("FLASHSERVE_TEST_PG_URL_FILE");
  std::string url;
  if (file != nullptr) std::getline(std::ifstream(file), url);
  return url;
}

class ScratchStore {
 public:
  // "" when the store is ready at location(); otherwise why this backend cannot be tested here.
  std::string Prepare(StoreBackend backend) {
    if (backend == StoreBackend::kSqlite) {
      char dir[] = "/tmp/fs-meter-XXXXXX";
      if (mkdtemp(dir) == nullptr) return "mkdtemp failed";
      dir_ = dir;
      location_ = dir_ + "/meter.db";
      return "";
    }
    base_url_ = TestPostgresUrl();
    if (base_url_.empty())
      return "no PostgreSQL server for tests: set FLASHSERVE_TEST_PG_URL, or install Debian's postgresql "
             "so CTest starts one (tests/pg/pg_server.sh)";
    static std::atomic<int> counter{0};
    schema_ = fmt::format("t{}_{}", getpid(), counter++);
    auto db = OpenPostgres(base_url_);
    if (!db.ok()) return "PostgreSQL test server unreachable: " + db.error().ToString();
    if (auto s = (*db)->Exec("CREATE SCHEMA " + schema_); !s.ok()) return s.ToString();
    location_ = base_url_ + (base_url_.find('?') == std::string::npos ? "?" : "&") +
                "options=-csearch_path%3D" + schema_ + "&application_name=" + schema_;
    return "";
  }
  const std::string& location() const { return location_; }
  // PostgreSQL: cuts every server connection of stores opened at location(), as a server
  // restart would; true when at least one was cut.
  bool CutConnections() {
    auto db = OpenPostgres(base_url_);
    if (!db.ok()) return false;
    auto cut = (*db)->Query(  // waits up to 5 s for each to end
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = ?1", {schema_});
    return cut.ok() && !cut->empty();
  }

  ~ScratchStore() {
    if (!dir_.empty()) (void)std::system(("rm -rf " + dir_).c_str());
    if (!schema_.empty())
      if (auto db = OpenPostgres(base_url_); db.ok()) (void)(*db)->Exec("DROP SCHEMA " + schema_ + " CASCADE");
  }

 private:
  std::string dir_, base_url_, schema_, location_;
};

// A value-parameterized suite with an open, empty store_ per backend; instantiate it with
// FS_ON_EVERY_STORE_BACKEND(Suite).
class StoreSuite : public ::testing::TestWithParam<StoreBackend> {
 protected:
  void SetUp() override {
    const std::string why_not = scratch_.Prepare(GetParam());
    if (!why_not.empty()) GTEST_SKIP() << why_not;
    auto store = OpenMeterStore(scratch_.location());
    ASSERT_TRUE(store.ok()) << store.error().ToString();
    store_ = std::move(store).value();
  }
  void TearDown() override { store_.reset(); }
  ScratchStore scratch_;
  std::unique_ptr<MeterStore> store_;
};

#define FS_ON_EVERY_STORE_BACKEND(Suite)                                                                   \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite,                                                                \
                           ::testing::Values(StoreBackend::kSqlite, StoreBackend::kPostgres),              \
                           [](const auto& info) { return BackendName(info.param); })

}  // namespace flashserve::meter
