// `flashserve usage`: the usage ledger summed by tenant, key, model, day or hour over a time
// range, as a table, CSV or JSON (the same rows as GET /admin/usage). Main thread only.
#include <cstdio>
#include <memory>
#include <string>

#include "app/cli_util.h"
#include "app/commands.h"
#include "base/wall_time.h"
#include "fmt/format.h"
#include "meter/store.h"

namespace flashserve::app {
namespace {

struct UsageFlags {
  std::string db, from, to, tenant, group = "tenant", format = "table";
};


void PrintTable(const std::vector<meter::UsageRow>& rows) {
  std::printf("%-22s %-4s %9s %13s %13s %11s %11s %11s %13s %11s %16s\n", "group", "cur", "requests", "input",
              "uncached", "cached mem", "cached disk", "cached shr", "output", "reasoning", "cost");
  for (const meter::UsageRow& r : rows) {
    const int64_t input = r.input_uncached + r.cached_memory + r.cached_disk + r.cached_shared + r.cached_prefill;
    std::printf("%-22s %-4s %9lld %13lld %13lld %11lld %11lld %11lld %13lld %11lld %16s\n",
                r.group.empty() ? "(all)" : r.group.c_str(), r.currency.c_str(), static_cast<long long>(r.requests),
                static_cast<long long>(input), static_cast<long long>(r.input_uncached),
                static_cast<long long>(r.cached_memory), static_cast<long long>(r.cached_disk),
                static_cast<long long>(r.cached_shared + r.cached_prefill), static_cast<long long>(r.output_tokens),
                static_cast<long long>(r.reasoning_tokens), meter::FormatMoney(r.cost).c_str());
  }
}

// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void PrintCsv(const std::vector<meter::UsageRow>& rows) {
  std::printf("group,currency,requests,input_tokens,input_uncached_tokens,cached_memory_tokens,cached_disk_tokens,"
              "cached_shared_tokens,cached_prefill_tokens,output_tokens,reasoning_tokens,speculative_drafted,"
              "speculative_accepted,cost\n");
  for (const meter::UsageRow& r : rows)
    std::printf("%s,%s,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s\n", CsvField(r.group).c_str(),
                CsvField(r.currency).c_str(),
                static_cast<long long>(r.requests),
                static_cast<long long>(r.input_uncached + r.cached_memory + r.cached_disk + r.cached_shared +
                                       r.cached_prefill),
                static_cast<long long>(r.input_uncached), static_cast<long long>(r.cached_memory),
                static_cast<long long>(r.cached_disk), static_cast<long long>(r.cached_shared),
                static_cast<long long>(r.cached_prefill), static_cast<long long>(r.output_tokens),
                static_cast<long long>(r.reasoning_tokens), static_cast<long long>(r.speculative_drafted),
                static_cast<long long>(r.speculative_accepted), meter::FormatMoney(r.cost).c_str());
}

int RunUsage(const UsageFlags& f) {
  auto query = meter::MakeUsageQuery(f.from, f.to, f.tenant, f.group, base::UnixMicros());
  if (!query.ok()) return PrintError(query.error());
  auto store = meter::OpenMeterStore(f.db, /*create=*/false);
  if (!store.ok()) return PrintError(store.error());
  auto rows = (*store)->QueryUsage(*query);
  if (!rows.ok()) return PrintError(rows.error());
  if (f.format == "json") {
    meter::Json data = meter::Json::array();
    for (const meter::UsageRow& r : *rows) data.push_back(meter::UsageRowJson(r));
    const meter::Json doc = {{"object", "usage"},       {"from", query->from_us / 1'000'000},
                             {"to", query->to_us / 1'000'000}, {"group_by", f.group},
                             {"data", std::move(data)}};
    std::printf("%s\n", doc.dump(2).c_str());
  } else if (f.format == "csv") {
    PrintCsv(*rows);
  } else {
    PrintTable(*rows);
  }
  return 0;
}

}  // namespace

void RegisterUsageCommand(CLI::App& app, CommandFn* run) {
  auto f = std::make_shared<UsageFlags>();
  auto* cmd = app.add_subcommand("usage", "Usage and spend from the ledger, summed per tenant, key, model, day or hour");
  cmd->add_option("--meter-db", f->db, "Metering store (a SQLite file or a postgresql:// URL)")->envname("FLASHSERVE_METER_DB")->required();
  cmd->add_option("--from", f->from, "Requests that arrived at or after: YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or Unix "
                                     "seconds (default: the start of this month, UTC)");
  cmd->add_option("--to", f->to, "... and before (default: now)");
  cmd->add_option("--tenant", f->tenant, "Only this tenant");
  cmd->add_option("--group-by", f->group, "total, tenant, key, model, day or hour")
      ->check(CLI::IsMember({"total", "tenant", "key", "model", "day", "hour"}))
      ->capture_default_str();
  cmd->add_option("--format", f->format, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  cmd->callback([run, f] { *run = [f] { return RunUsage(*f); }; });
}

}  // namespace flashserve::app
