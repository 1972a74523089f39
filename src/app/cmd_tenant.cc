// `flashserve tenant add|list|show|set|remove` and `flashserve key create|list|revoke` against
// the metering store (--meter-db or $FLASHSERVE_METER_DB). Running workers and routers with
// the same store pick changes up within their refresh interval. Main thread only.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "app/cli_util.h"
#include "app/commands.h"
#include "base/clock.h"
#include "fmt/format.h"
#include "meter/api_keys.h"
#include "meter/store.h"

namespace flashserve::app {
namespace {

using meter::Tenant;

struct TenantFlags {
  std::string db, name, cache_namespace, ttl_class, currency;
  std::string input_price, cached_price, output_price;
  std::string off_peak, off_peak_input_price, off_peak_cached_price, off_peak_output_price;
  bool no_off_peak = false;
  int64_t rpm = 0, input_tpm = 0, output_tpm = 0, concurrency = 0;
  std::string monthly_budget;
  bool log_text = false;
  bool json = false;
  // key commands
  std::string tenant, label, key_id;
};

int Fail(const base::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.message().c_str());
  return 1;
}

// Only `tenant add` creates a store; everything else needs one (a mistyped path is an error).
base::Result<std::unique_ptr<meter::MeterStore>> OpenStore(const std::string& db, bool create = false) {
  return meter::OpenMeterStore(db, create);
}

int64_t Now() { return base::SystemClock().NowUnixSeconds(); }

std::string Date(int64_t unix_seconds) { return unix_seconds <= 0 ? "-" : UtcMinute(unix_seconds); }

// Applies the flags that were given (`given(name)`) to *t.
base::Status ApplyTenantFlags(const TenantFlags& f, const std::function<bool(const char*)>& given, Tenant* t) {
  const auto money = [&](const char* flag, const std::string& text, int64_t* out) -> base::Status {
    if (!given(flag)) return base::Status::Ok();
    auto v = meter::ParseMoney(text);
    if (!v.ok()) return v.error().WithContext(flag);
    *out = *v;
    return base::Status::Ok();
  };
  if (given("--namespace")) t->cache_namespace = f.cache_namespace;
  if (given("--ttl-class")) t->ttl_class = f.ttl_class;
  if (given("--currency")) t->prices.currency = f.currency;
  FS_RETURN_IF_ERROR(money("--input-price", f.input_price, &t->prices.standard.input));
  FS_RETURN_IF_ERROR(money("--cached-price", f.cached_price, &t->prices.standard.cached));
  FS_RETURN_IF_ERROR(money("--output-price", f.output_price, &t->prices.standard.output));
  if (f.no_off_peak) t->prices.off_peak.reset();
  if (given("--off-peak")) {
    FS_ASSIGN_OR_RETURN(auto window, meter::ParseWindow(f.off_peak));
    // A new window starts at the standard rates; the --off-peak-* prices then change them.
    meter::OffPeak off = t->prices.off_peak.value_or(meter::OffPeak{0, 0, t->prices.standard});
    off.start_minute = window.first;
    off.end_minute = window.second;
    t->prices.off_peak = off;
  }
  const bool off_prices =
      given("--off-peak-input-price") || given("--off-peak-cached-price") || given("--off-peak-output-price");
  if (off_prices && !t->prices.off_peak)
    return base::Error(base::ErrorCode::kInvalidArgument, "off-peak prices need --off-peak HH:MM-HH:MM");
  if (t->prices.off_peak) {
    meter::Rates& r = t->prices.off_peak->rates;
    FS_RETURN_IF_ERROR(money("--off-peak-input-price", f.off_peak_input_price, &r.input));
    FS_RETURN_IF_ERROR(money("--off-peak-cached-price", f.off_peak_cached_price, &r.cached));
    FS_RETURN_IF_ERROR(money("--off-peak-output-price", f.off_peak_output_price, &r.output));
  }
  if (given("--rpm")) t->limits.requests_per_minute = f.rpm;
  if (given("--input-tpm")) t->limits.input_tokens_per_minute = f.input_tpm;
  if (given("--output-tpm")) t->limits.output_tokens_per_minute = f.output_tpm;
  if (given("--concurrency")) t->limits.concurrent_requests = f.concurrency;
  FS_RETURN_IF_ERROR(money("--monthly-budget", f.monthly_budget, &t->limits.monthly_budget));
  if (given("--log-text")) t->log_text = f.log_text;
  return base::Status::Ok();
}

std::string RatesText(const meter::Rates& r) {
  return fmt::format("input {} / cached {} / output {}", meter::FormatMoney(r.input), meter::FormatMoney(r.cached),
                     meter::FormatMoney(r.output));
}

std::string LimitText(int64_t v) { return v == 0 ? "none" : std::to_string(v); }

void PrintTenant(const Tenant& t, const std::vector<meter::KeyRecord>& keys) {
  std::printf("tenant %s (created %s UTC)\n", t.name.c_str(), Date(t.created).c_str());
  std::printf("  cache namespace  %s\n  TTL class        %s\n", t.cache_namespace.c_str(),
              t.ttl_class.empty() ? "(server default)" : t.ttl_class.c_str());
  std::printf("  prices (%s per million tokens)  %s\n", t.prices.currency.c_str(), RatesText(t.prices.standard).c_str());
  if (t.prices.off_peak)
    std::printf("  off-peak %s UTC  %s\n",
                meter::FormatWindow(t.prices.off_peak->start_minute, t.prices.off_peak->end_minute).c_str(),
                RatesText(t.prices.off_peak->rates).c_str());
  const meter::Limits& l = t.limits;
  std::printf("  limits  requests/min %s, input tokens/min %s, output tokens/min %s, concurrent %s, monthly budget %s\n",
              LimitText(l.requests_per_minute).c_str(), LimitText(l.input_tokens_per_minute).c_str(),
              LimitText(l.output_tokens_per_minute).c_str(), LimitText(l.concurrent_requests).c_str(),
              l.monthly_budget == 0 ? "none" : meter::FormatMoney(l.monthly_budget).c_str());
  std::printf("  text in logs  %s\n", t.log_text ? "allowed" : "never");
  for (const meter::KeyRecord& k : keys)
    std::printf("  key %s  %s...  %s  created %s%s\n", k.id.c_str(), k.prefix.c_str(), k.label.c_str(),
                Date(k.created).c_str(), k.revoked ? (" revoked " + Date(k.revoked)).c_str() : "");
}

int RunTenantAdd(const TenantFlags& f, const std::function<bool(const char*)>& given) {
  auto store = OpenStore(f.db, /*create=*/true);
  if (!store.ok()) return Fail(store.error());
  Tenant t;
  t.name = f.name;
  t.cache_namespace = f.name;
  t.created = Now();
  base::Status s = ApplyTenantFlags(f, given, &t);
  if (s.ok()) s = (*store)->AddTenant(t);
  if (!s.ok()) return Fail(s.error());
  std::printf("added tenant %s\n", t.name.c_str());
  return 0;
}

int RunTenantSet(const TenantFlags& f, const std::function<bool(const char*)>& given) {
  auto store = OpenStore(f.db);
  if (!store.ok()) return Fail(store.error());
  auto found = (*store)->GetTenant(f.name);
  if (!found.ok()) return Fail(found.error());
  if (!*found) return Fail(base::Error(base::ErrorCode::kNotFound, "no tenant " + f.name));
  Tenant t = **found;
  base::Status s = ApplyTenantFlags(f, given, &t);
  if (s.ok()) s = (*store)->UpdateTenant(t);
  if (!s.ok()) return Fail(s.error());
  std::printf("updated tenant %s\n", t.name.c_str());
  return 0;
}

int RunTenantShow(const TenantFlags& f) {
  auto store = OpenStore(f.db);
  if (!store.ok()) return Fail(store.error());
  auto found = (*store)->GetTenant(f.name);
  if (!found.ok()) return Fail(found.error());
  if (!*found) return Fail(base::Error(base::ErrorCode::kNotFound, "no tenant " + f.name));
  auto keys = (*store)->ListKeys(f.name);
  if (!keys.ok()) return Fail(keys.error());
  if (f.json) {
    meter::Json j = meter::TenantJson(**found);
    j["keys"] = meter::Json::array();
    for (const meter::KeyRecord& k : *keys) j["keys"].push_back(meter::KeyJson(k));
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    PrintTenant(**found, *keys);
  }
  return 0;
}

int RunTenantList(const TenantFlags& f) {
  auto store = OpenStore(f.db);
  if (!store.ok()) return Fail(store.error());
  auto tenants = (*store)->ListTenants();
  if (!tenants.ok()) return Fail(tenants.error());
  auto keys = (*store)->ListKeys("");
  if (!keys.ok()) return Fail(keys.error());
  if (f.json) {
    meter::Json list = meter::Json::array();
    for (const Tenant& t : *tenants) list.push_back(meter::TenantJson(t));
    std::printf("%s\n", list.dump(2).c_str());
    return 0;
  }
  std::printf("%-20s %-20s %-10s %-5s %12s %12s %12s %5s\n", "tenant", "namespace", "ttl", "cur", "input/M",
              "cached/M", "output/M", "keys");
  for (const Tenant& t : *tenants) {
    int active = 0;
    for (const meter::KeyRecord& k : *keys) active += k.tenant == t.name && k.revoked == 0;
    std::printf("%-20s %-20s %-10s %-5s %12s %12s %12s %5d\n", t.name.c_str(), t.cache_namespace.c_str(),
                t.ttl_class.empty() ? "-" : t.ttl_class.c_str(), t.prices.currency.c_str(),
                meter::FormatMoney(t.prices.standard.input).c_str(), meter::FormatMoney(t.prices.standard.cached).c_str(),
                meter::FormatMoney(t.prices.standard.output).c_str(), active);
  }
  return 0;
}

int RunTenantRemove(const TenantFlags& f) {
  auto store = OpenStore(f.db);
  if (!store.ok()) return Fail(store.error());
  base::Status s = (*store)->RemoveTenant(f.name, Now());
  if (!s.ok()) return Fail(s.error());
  std::printf("removed tenant %s and revoked its keys (its usage records stay)\n", f.name.c_str());
  return 0;
}

int RunKeyCreate(const TenantFlags& f) {
  auto store = OpenStore(f.db);
  if (!store.ok()) return Fail(store.error());
  const std::string secret = meter::NewSecretKey();
  meter::KeyRecord k{meter::NewKeyId(), f.tenant, f.label, meter::KeyDigest(secret), secret.substr(0, 8), Now(), 0};
  base::Status s = (*store)->AddKey(k);
  if (!s.ok()) return Fail(s.error());
  if (f.json) {
    meter::Json j = meter::KeyJson(k);
    j["key"] = secret;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s %s\n", k.id.c_str(), secret.c_str());
    std::fprintf(stderr, "key %s for tenant %s: shown once, only its SHA-256 digest is stored\n", k.id.c_str(),
                 f.tenant.c_str());
  }
  return 0;
}

int RunKeyList(const TenantFlags& f) {
  auto store = OpenStore(f.db);
  if (!store.ok()) return Fail(store.error());
  auto keys = (*store)->ListKeys(f.tenant);
  if (!keys.ok()) return Fail(keys.error());
  if (f.json) {
    meter::Json list = meter::Json::array();
    for (const meter::KeyRecord& k : *keys) list.push_back(meter::KeyJson(k));
    std::printf("%s\n", list.dump(2).c_str());
    return 0;
  }
  std::printf("%-17s %-20s %-12s %-17s %-17s %s\n", "id", "tenant", "prefix", "created (UTC)", "revoked", "label");
  for (const meter::KeyRecord& k : *keys)
    std::printf("%-17s %-20s %-12s %-17s %-17s %s\n", k.id.c_str(), k.tenant.c_str(), (k.prefix + "...").c_str(),
                Date(k.created).c_str(), Date(k.revoked).c_str(), k.label.c_str());
  return 0;
}

int RunKeyRevoke(const TenantFlags& f) {
  auto store = OpenStore(f.db);
  if (!store.ok()) return Fail(store.error());
  base::Status s = (*store)->RevokeKey(f.key_id, Now());
  if (!s.ok()) return Fail(s.error());
  std::printf("revoked %s\n", f.key_id.c_str());
  return 0;
}

void AddDbFlag(CLI::App* cmd, TenantFlags* f) {
  cmd->add_option("--meter-db", f->db, "Metering store: a SQLite file (created when absent) or a postgresql://USER@HOST[:PORT]/DB URL")
      ->envname("FLASHSERVE_METER_DB")
      ->required();
}

void AddTenantFields(CLI::App* cmd, TenantFlags* f) {
  cmd->add_option("--namespace", f->cache_namespace, "Prefix-cache namespace (default: the tenant's name; "
                                                     "tenants given the same one share cached prefixes)");
  cmd->add_option("--ttl-class", f->ttl_class, "Default KV-store retention class of its requests (\"\" = server's)");
  cmd->add_option("--currency", f->currency, "Currency of the price book (three letters, default USD)");
  cmd->add_option("--input-price", f->input_price, "Price per million uncached input tokens, e.g. 0.15");
  cmd->add_option("--cached-price", f->cached_price, "Price per million cached input tokens, e.g. 0.003");
  cmd->add_option("--output-price", f->output_price, "Price per million output tokens, e.g. 0.60");
  cmd->add_option("--off-peak", f->off_peak, "Off-peak window HH:MM-HH:MM (UTC) with the --off-peak-* prices");
  cmd->add_option("--off-peak-input-price", f->off_peak_input_price, "Off-peak price per million uncached input tokens");
  cmd->add_option("--off-peak-cached-price", f->off_peak_cached_price, "Off-peak price per million cached input tokens");
  cmd->add_option("--off-peak-output-price", f->off_peak_output_price, "Off-peak price per million output tokens");
  cmd->add_option("--rpm", f->rpm, "Requests per minute (fleet-wide at a router, else per worker; 0 = no limit)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--input-tpm", f->input_tpm, "Prompt tokens per minute (fleet-wide at a router, else per worker; 0 = no limit)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--output-tpm", f->output_tpm, "Output tokens per minute (fleet-wide at a router, from the ledger; 0 = no limit)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--concurrency", f->concurrency, "Concurrent requests (fleet-wide at a router, else per worker; 0 = no limit)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--monthly-budget", f->monthly_budget, "Spend per calendar month (UTC) in the book's currency, fleet-wide from the ledger (0 = none)");
  cmd->add_option("--log-text", f->log_text, "Whether prompt and completion text may appear in logs (default false; none is logged today)");
}

}  // namespace

void RegisterTenantCommands(CLI::App& app, CommandFn* run) {
  auto f = std::make_shared<TenantFlags>();
  auto* tenant = app.add_subcommand("tenant", "Add, list, show, change or remove tenants in the metering store");
  tenant->require_subcommand(1);
  auto* add = tenant->add_subcommand("add", "Add a tenant");
  auto* set = tenant->add_subcommand("set", "Change a tenant's settings (only the flags given)");
  for (CLI::App* cmd : {add, set}) {
    AddDbFlag(cmd, f.get());
    cmd->add_option("name", f->name, "Tenant name, [A-Za-z0-9_.-]{1,64}")->required();
    AddTenantFields(cmd, f.get());
  }
  set->add_flag("--no-off-peak", f->no_off_peak, "Drop the off-peak window");
  const auto given_in = [](CLI::App* cmd) {
    return [cmd](const char* name) {
      const CLI::Option* opt = cmd->get_option_no_throw(name);
      return opt != nullptr && opt->count() > 0;
    };
  };
  add->callback([run, f, given = given_in(add)] { *run = [f, given] { return RunTenantAdd(*f, given); }; });
  set->callback([run, f, given = given_in(set)] { *run = [f, given] { return RunTenantSet(*f, given); }; });
  auto* list = tenant->add_subcommand("list", "List tenants with their prices and active keys");
  auto* show = tenant->add_subcommand("show", "A tenant's settings and keys");
  auto* remove = tenant->add_subcommand("remove", "Remove a tenant and revoke its keys (usage records stay)");
  for (CLI::App* cmd : {list, show, remove}) AddDbFlag(cmd, f.get());
  for (CLI::App* cmd : {show, remove}) cmd->add_option("name", f->name, "Tenant name")->required();
  for (CLI::App* cmd : {list, show}) cmd->add_flag("--json", f->json, "JSON instead of text");
  list->callback([run, f] { *run = [f] { return RunTenantList(*f); }; });
  show->callback([run, f] { *run = [f] { return RunTenantShow(*f); }; });
  remove->callback([run, f] { *run = [f] { return RunTenantRemove(*f); }; });

  auto* key = app.add_subcommand("key", "Create, list or revoke tenants' API keys in the metering store");
  key->require_subcommand(1);
  auto* create = key->add_subcommand("create", "Create a key (printed once; only its digest is stored)");
  auto* klist = key->add_subcommand("list", "List keys (never the keys themselves)");
  auto* revoke = key->add_subcommand("revoke", "Revoke a key by id");
  for (CLI::App* cmd : {create, klist, revoke}) AddDbFlag(cmd, f.get());
  create->add_option("--tenant", f->tenant, "The key's tenant")->required();
  create->add_option("--label", f->label, "A note for the operator");
  klist->add_option("--tenant", f->tenant, "Only this tenant's keys");
  for (CLI::App* cmd : {create, klist}) cmd->add_flag("--json", f->json, "JSON instead of text");
  revoke->add_option("id", f->key_id, "Key id (key_...)")->required();
  create->callback([run, f] { *run = [f] { return RunKeyCreate(*f); }; });
  klist->callback([run, f] { *run = [f] { return RunKeyList(*f); }; });
  revoke->callback([run, f] { *run = [f] { return RunKeyRevoke(*f); }; });
}

}  // namespace flashserve::app
