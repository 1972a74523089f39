// `flashserve router`: the front door over N `flashserve serve` workers: cache- and load-aware
// routing, streaming proxy, retries, load shedding, metrics (router/router_server.h).
// SIGINT/SIGTERM stop it.
#include <pthread.h>
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "app/cli_util.h"
#include "app/commands.h"
#include "app/meter_setup.h"
#include "base/log.h"
#include "dialect/reasoning_seal.h"
#include "encoding/version.h"
#include "router/router_server.h"

namespace flashserve::app {

namespace {

struct RouterFlags {
  router::RouterConfig config;
  std::string host = "127.0.0.1", policy = "cache-aware", tokenizer, encoding = "auto", api_keys_file, seal_key_file;
  int port = 8080;
  std::vector<std::string> api_keys;
  MeterFlags meter;
  std::vector<std::string> admin_keys;  // --admin-key
};

int RunRouter(RouterFlags f) {
  auto policy = router::ParsePolicy(f.policy);
  if (!policy.ok()) return PrintError(policy.error());
  f.config.chooser.policy = *policy;
  if (f.encoding != "auto") {
    auto version = encoding::ParseEncodingVersion(f.encoding);
    if (!version) return PrintError(base::Error(base::ErrorCode::kInvalidArgument, "unknown --encoding " + f.encoding));
    f.config.encoding_version = *version;
  }
  std::string tokenizer_path = f.tokenizer.empty() ? FindDefaultTokenizer() : f.tokenizer;
  if (tokenizer_path.empty()) {
    return PrintError(base::Error(base::ErrorCode::kNotFound,
                                  std::string("no tokenizer: pass --tokenizer FILE (the workers' tokenizer.json), or run "
                                              "./scripts/setup.sh for the default ") + kTokenizerRel));
  }
  auto tok = LoadTokenizer(tokenizer_path, /*demo=*/f.tokenizer.empty());
  if (!tok.ok()) return PrintError(tok.error());
  if (!f.seal_key_file.empty()) {
    auto seal = dialect::ReasoningSeal::FromKeyFile(f.seal_key_file, /*create=*/false);
    if (!seal.ok()) return PrintError(seal.error());
    f.config.seal = std::make_shared<const dialect::ReasoningSeal>(*seal);
  }
  std::string first_key;
  auto keys = ReadApiKeys(f.api_keys, f.api_keys_file, &first_key);
  if (!keys.ok()) return PrintError(keys.error());
  f.config.api_keys = *keys;
  auto admin = ParseAdminKeys(f.admin_keys);
  if (!admin.ok()) return PrintError(admin.error());
  f.config.admin_keys = *admin;
  if (f.config.pool.control_api_key.empty()) f.config.pool.control_api_key = first_key;
  if (!f.meter.db.empty() && f.config.pool.control_api_key.empty())
    return PrintError(base::Error(base::ErrorCode::kInvalidArgument,
                                  "with --meter-db the router needs --worker-key (a key the workers accept) for its polls"));
  f.config.http.host = f.host;
  f.config.http.port = f.port;

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  auto metering = StartMetering(f.meter, *keys, /*ledger=*/false);
  if (!metering.ok()) return PrintError(metering.error());
  f.config.key_ring = metering->ring;
  f.config.limiter = metering->limiter.get();
  f.config.meter_store = metering->store.get();
  f.config.tenants = metering->directory.get();
  router::RouterServer server(f.config, **tok);
  if (base::Status s = server.Start(); !s.ok()) return PrintError(s.error());
  std::printf("flashserve: router (%s) over %zu workers on http://%s:%d\n", router::PolicyName(*policy),
              f.config.workers.size(), f.host == "0.0.0.0" ? "127.0.0.1" : f.host.c_str(), server.port());
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  FS_LOG(kInfo, "router: {} received; stopping", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  server.Stop();
  return 0;
}

}  // namespace

void RegisterRouterCommand(CLI::App& app, CommandFn* run) {
  auto f = std::make_shared<RouterFlags>();
  auto* cmd = app.add_subcommand("router", "Route requests over several `flashserve serve` workers (cache- and load-aware)");
  router::RouterConfig& c = f->config;
  router::ChooserConfig& ch = c.chooser;
  cmd->add_option("--worker", c.workers, "Worker base URL, e.g. http://127.0.0.1:8001 (repeat for each)")->required();
  cmd->add_option("--host", f->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", f->port, "Port (0 = any free port; the banner shows it)")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--policy", f->policy, "round-robin, least-load or cache-aware")
      ->check(CLI::IsMember({"round-robin", "least-load", "cache-aware"}))->capture_default_str();
  cmd->add_option("--tokenizer", f->tokenizer, "The workers' tokenizer.json (default: the DeepSeek one from setup)")->check(CLI::ExistingFile);
  cmd->add_option("--encoding", f->encoding, "Prompt format for prefix hashing: auto (what the workers report), v4 or v41")
      ->check(CLI::IsMember({"auto", "v4", "v41", "v4.1"}))->capture_default_str();
  cmd->add_option("--seal-key-file", f->seal_key_file,
                  "The workers' --seal-key-file: reasoning that clients hand back is then counted exactly for routing and "
                  "input-token limits (default: estimated by its visible text)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--api-key", f->api_keys, "KEY[:TENANT[:TTL_CLASS]] as on the workers (repeatable); clients must send one");
  cmd->add_option("--api-keys-file", f->api_keys_file, "File of API keys, one per line")->check(CLI::ExistingFile);
  cmd->add_option("--worker-key", c.pool.control_api_key, "Key for the router's own polls (default: the first --api-key)");
  AddMeterFlags(cmd, &f->meter, /*ledger=*/false);
  AddAdminKeyFlag(cmd, &f->admin_keys);
  AddEconomicsFlags(cmd, &f->config.economics, "the whole fleet's");
  cmd->add_option("--poll-interval", c.pool.poll_interval_s, "Seconds between load / KV-event polls per worker")->capture_default_str();
  cmd->add_option("--poll-timeout", c.pool.control_timeout_s, "A poll slower than this marks the worker down")->capture_default_str();
  cmd->add_option("--proxy-timeout", c.pool.proxy_timeout_s, "Bound on each read of a forwarded response")->capture_default_str();
  cmd->add_option("--max-attempts", c.max_attempts, "Workers tried per request before 502")->check(CLI::Range(1, 16))->capture_default_str();
  cmd->add_option("--balance-abs-seconds", ch.balance_abs_threshold_s, "Imbalance bound: absolute queued-prefill seconds")->capture_default_str();
  cmd->add_option("--balance-rel", ch.balance_rel_threshold, "Imbalance bound: x the least loaded worker")->capture_default_str();
  cmd->add_option("--busy-weight-tokens", ch.busy_weight_tokens,
                  "Spread new sessions: a fully busy worker costs this many tokens of prefill (0 = off; large fleets)")
      ->capture_default_str();
  cmd->add_option("--max-queued-prefill-tokens", ch.max_queued_prefill_tokens, "A worker queued beyond this takes nothing; all such: 429")->capture_default_str();
  cmd->add_option("--io-threads", c.http.io_threads, "HTTP I/O threads")->check(CLI::Range(1, 256))->capture_default_str();
  cmd->add_option("--max-body-bytes", c.http.max_body_bytes, "Largest request body (bigger: 413)")->capture_default_str();
  cmd->callback([f, run] { *run = [f] { return RunRouter(*f); }; });
}

}  // namespace flashserve::app
