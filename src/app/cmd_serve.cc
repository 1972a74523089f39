// `flashserve serve`: one engine worker with the OpenAI-compatible HTTP API. With no --model it
// serves the embedded default: the tiny-preset demo model, generated deterministically on first
// start into the user's cache directory, with the DeepSeek tokenizer. SIGINT/SIGTERM stop it.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "api/api_server.h"
#include "app/cli_util.h"
#include "app/serve_flags.h"
#include "app/commands.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "encoding/version.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"
#include "serve/engine_loop.h"
#include "serve/transfer_inbox.h"
#include "transfer/receiver.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::app {

namespace {

namespace fs = std::filesystem;
using base::Error;
using base::ErrorCode;

constexpr char kDemoName[] = "deepseek-v4-demo";
constexpr uint64_t kDemoSeed = 1234;
// The tiny-v41 preset (DeepSeek-V4.1 with a small vision tower and the released image
// preprocessing, so pictures work on the demo) with V4's own context length (1M tokens), so
// agent clients that ask for long outputs on long prompts fit. A new folder name per change:
// demos generated before stay put.
constexpr char kDemoDir[] = "demo-tiny-v41-1m-e2";  // e2: Engram classes of the fixed normaliser
constexpr int64_t kDemoContext = int64_t{1} << 20;


base::Result<fs::path> DemoCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return fs::path(xdg) / "flashserve" / kDemoDir;
  const char* home = std::getenv("HOME");
  if (home && *home) return fs::path(home) / ".cache" / "flashserve" / kDemoDir;
  return Error(ErrorCode::kFailedPrecondition, "neither XDG_CACHE_HOME nor HOME is set; pass --model DIR");
}

// Leftovers of interrupted generations ("demo-tiny-v41-1m-e2.tmp-<pid>" whose process is gone).
void RemoveStaleTemporaries(const fs::path& final_dir) {
  std::error_code ec;
  const std::string prefix = final_dir.filename().string() + ".tmp-";
  for (const auto& e : fs::directory_iterator(final_dir.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const int pid = std::atoi(name.c_str() + prefix.size());
    if (pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH)) continue;
    fs::remove_all(e.path(), ec);
  }
}

// Generates the demo checkpoint on first start: written to a temporary directory, then renamed
// into place, so an interrupted start never leaves a half model.
base::Result<std::string> EnsureDemoModel(const std::string& tokenizer_path, int num_threads) {
  FS_ASSIGN_OR_RETURN(fs::path final_dir, DemoCacheDir());
  std::error_code ec;
  if (fs::exists(final_dir / "config.json", ec)) return final_dir.string();
  if (tokenizer_path.empty()) {
    return Error(ErrorCode::kNotFound, std::string("the demo model needs the DeepSeek tokenizer (") + kTokenizerRel +
                                           "), which is missing: run ./scripts/setup.sh (or scripts/fetch_tokenizer.sh), "
                                           "or pass --tokenizer FILE");
  }
  fs::create_directories(final_dir.parent_path(), ec);
  if (ec) return Error(ErrorCode::kIoError, "cannot create " + final_dir.parent_path().string() + ": " + ec.message());
  RemoveStaleTemporaries(final_dir);
  const fs::path tmp = final_dir.parent_path() / (final_dir.filename().string() + ".tmp-" + std::to_string(getpid()));
  fs::remove_all(tmp, ec);
  std::printf("flashserve: first start: generating the demo model (tiny-v41 preset, random weights, seed %llu) into %s\n",
              static_cast<unsigned long long>(kDemoSeed), final_dir.c_str());
  std::fflush(stdout);
  {
    base::ThreadPool pool(num_threads);
    model::RandomCheckpointOptions options;
    options.seed = kDemoSeed;
    model::ModelConfig config = model::TinyV41Preset();
    config.max_position = kDemoContext;
    std::string tokenizer = tokenizer_path;
    FS_RETURN_IF_ERROR(FitEngramToTokenizer(&config, &tokenizer));
    FS_RETURN_IF_ERROR(model::WriteRandomCheckpoint(config, tmp.string(), options, pool));
  }
  fs::copy_file(tokenizer_path, tmp / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
  if (ec) return Error(ErrorCode::kIoError, "copying the tokenizer: " + ec.message());
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    if (!fs::exists(final_dir / "config.json")) return Error(ErrorCode::kIoError, "cannot move the demo model into " + final_dir.string());
  }
  return final_dir.string();
}

// --speculative and --num-draft-tokens against the checkpoint's drafter (an MTP block, DSpark
// stages, or none).
base::Status ConfigureSpeculation(const model::ModelConfig& c, ServeFlags* f) {
  const bool has_mtp = c.num_mtp_layers > 0, has_dspark = c.dspark.present();
  if (f->speculative == "mtp" && !has_mtp)
    return Error(ErrorCode::kInvalidArgument,
                 std::string("--speculative mtp needs a checkpoint with an MTP block (num_nextn_predict_layers >= 1); ") +
                     (has_dspark ? "this one drafts with DSpark (--speculative dspark)"
                                 : "this one has none (V4.1's DSpark stages are not run yet)"));
  if (f->speculative == "dspark" && !has_dspark)
    return Error(ErrorCode::kInvalidArgument, "--speculative dspark needs a checkpoint with DSpark stages (dspark_block_size "
                                              "in config.json, as V4-Flash-0731); this one has none");
  f->loop.speculative.drafter = f->speculative == "mtp" || f->speculative == "dspark" ||
                                (f->speculative == "auto" && (has_mtp || has_dspark));
  f->loop.speculative.adaptive = f->speculative_budget == "adaptive";
  const int most = has_dspark ? c.dspark.block_size : 16;
  if (f->loop.speculative.drafter && f->num_draft_tokens > most)
    return Error(ErrorCode::kInvalidArgument, "--num-draft-tokens " + std::to_string(f->num_draft_tokens) +
                                                  " exceeds the DSpark block size " + std::to_string(most));
  f->loop.speculative.num_draft_tokens = f->num_draft_tokens > 0 ? f->num_draft_tokens : has_dspark ? most : 1;
  if (f->loop.speculative.drafter)
    FS_LOG(kInfo, "serve: speculative decoding with the {}, up to {} draft token(s) per step ({} budget)",
           has_dspark ? "DSpark stages" : "MTP block", f->loop.speculative.num_draft_tokens, f->speculative_budget);
  return base::Status::Ok();
}

// Image inputs follow the checkpoint: a vision tower (V4.1, or V4 as Vision-Exp; every role;
// pictures are encoded where the prompt is computed unless encode workers send their tower
// outputs).
void ConfigureImages(const engine::Model& model, api::ImageOptions* images) {
  const model::ModelConfig& c = model.config();
  images->enabled = c.vision.present() && c.image_token_id >= 0;
  if (!images->enabled) images->disabled_reason = "the served model is text-only";
  images->params = VisionParamsOf(c);
  images->image_token = static_cast<int32_t>(c.image_token_id);
  images->tower_checksum = serve::TowerFingerprint(model);
  images->sources.max_bytes = images->limits.max_bytes;
  images->fetch.max_bytes = images->limits.max_bytes;
  if (!images->enabled) images->fetch.hosts.clear();  // nothing to fetch for; the routes' 400 says why
}

// "TOKEN:BIAS" (TOKEN an id or "eos", BIAS in [-100, 100]).
base::Result<std::pair<int32_t, float>> ParseLogitBias(const std::string& spec, const engine::Model& model) {
  const size_t colon = spec.rfind(':');
  const auto bad = Error(ErrorCode::kInvalidArgument, "--logit-bias " + spec + ": expected TOKEN:BIAS (TOKEN an id or eos, BIAS in [-100, 100])");
  if (colon == std::string::npos) return bad;
  const std::string token = spec.substr(0, colon);
  char* end = nullptr;
  const double bias = std::strtod(spec.c_str() + colon + 1, &end);
  if (*end != '\0' || colon + 1 == spec.size() || !(bias >= -100 && bias <= 100)) return bad;
  long long id = token == "eos" ? static_cast<long long>(model.config().eos_token_id) : std::strtoll(token.c_str(), &end, 10);
  if (token != "eos" && (token.empty() || *end != '\0')) return bad;
  if (id < 0 || id >= model.config().vocab_size) return Error(ErrorCode::kInvalidArgument, "--logit-bias " + spec + ": no such token");
  return std::pair<int32_t, float>(static_cast<int32_t>(id), static_cast<float>(bias));
}

// The key sealing reasoning for stateless clients: --seal-key-file, else one in the data
// directory (--kv-dir, else the user's cache), created on first start.
base::Result<dialect::ReasoningSeal> OpenReasoningSeal(const ServeFlags& f) {
  if (!f.seal_key_file.empty()) return dialect::ReasoningSeal::FromKeyFile(f.seal_key_file, false);
  fs::path dir = f.store.disk_dir;
  if (dir.empty()) {
    FS_ASSIGN_OR_RETURN(fs::path demo, DemoCacheDir());
    dir = demo.parent_path();
  }
  return dialect::ReasoningSeal::FromKeyFile((dir / "reasoning-seal.key").string(), true);
}

void PrintBanner(const std::string& name, const std::string& dir, const std::string& host, int port,
                 protocol::WorkerRole role) {
  const std::string url = "http://" + (host == "0.0.0.0" ? std::string("127.0.0.1") : host) + ":" + std::to_string(port);
  if (role == protocol::WorkerRole::kEncode) {  // the e2e tests read the URL from the first line
    std::printf("flashserve: encode worker for model '%s' (%s) on %s\n"
                "  runs the vision tower for the pictures a router sends it; list it with --worker %s   (Ctrl-C stops)\n",
                name.c_str(), dir.c_str(), url.c_str(), url.c_str());
    std::fflush(stdout);
    return;
  }
  std::printf(
      "flashserve: serving model '%s' (%s) on %s\n"
      "  try:  curl %s/v1/chat/completions -H 'Content-Type: application/json' \\\n"
      "          -d '{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_tokens\": 32}'\n"
      "  OpenAI SDK: base_url=\"%s/v1\", api_key=\"unused\", model=\"%s\"   (Ctrl-C stops)\n",
      name.c_str(), dir.c_str(), url.c_str(), url.c_str(), name.c_str(), url.c_str(), name.c_str());
  std::fflush(stdout);
}

// Blocks SIGINT/SIGTERM in this thread (threads started later inherit the mask) and returns it
// for sigwait.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Raises the soft limit on open files to the hard one: connections and the KV store's batched
// reads (up to ~130 files per I/O thread) share it, and the common soft default is 1024.
void RaiseOpenFileLimit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
  const rlim_t from = r.rlim_cur;
  r.rlim_cur = r.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &r) == 0) {
    FS_LOG(kDebug, "open-file limit raised from {} to {}", static_cast<uint64_t>(from), static_cast<uint64_t>(r.rlim_cur));
  }
}

int RunServe(ServeFlags f) {
  RaiseOpenFileLimit();
  const bool demo = f.model.empty();
  std::string tokenizer_path = f.tokenizer;
  if (demo) {
    const std::string source = tokenizer_path.empty() ? FindDefaultTokenizer() : tokenizer_path;
    auto dir = EnsureDemoModel(source, f.engine.num_threads);
    if (!dir.ok()) return PrintError(dir.error());
    f.model = *dir;
  }
  if (tokenizer_path.empty() && fs::exists(fs::path(f.model) / "tokenizer.json")) tokenizer_path = (fs::path(f.model) / "tokenizer.json").string();
  if (tokenizer_path.empty()) tokenizer_path = FindDefaultTokenizer();
  if (tokenizer_path.empty()) {
    return PrintError(Error(ErrorCode::kNotFound, std::string("no tokenizer: the model has no tokenizer.json and ") + kTokenizerRel +
                                                      " is missing (run ./scripts/setup.sh), or pass --tokenizer FILE"));
  }
  if (f.role == protocol::WorkerRole::kEncode) {  // only the tower is read: the rest stays on disk, unmapped
    f.engine.preload_weights = false;
    f.engine.head_in_huge_pages = false;
    f.engine.fp4_lane_pairs = false;
  }
  // The tokenizer (a second or so for a 129k vocabulary) loads while the weights map.
  auto tokenizer_loaded = std::async(std::launch::async, [&] { return LoadTokenizer(tokenizer_path, demo); });
  std::unique_ptr<engine::Model> model = LoadModelOrPrint(f.model, f.engine, tokenizer_path);
  auto tok = tokenizer_loaded.get();
  if (!model) return 1;
  if (!tok.ok()) return PrintError(tok.error());
  // "auto": the prompt format of the checkpoint's family (DeepseekV41ForCausalLM -> v41).
  auto version = f.encoding == "auto" ? std::optional(model->config().is_v41() ? encoding::EncodingVersion::kV41
                                                                                : encoding::EncodingVersion::kV4)
                                      : encoding::ParseEncodingVersion(f.encoding);
  if (!version) return PrintError(Error(ErrorCode::kInvalidArgument, "unknown --encoding " + f.encoding));

  f.engine.qat = !f.no_qat;
  f.loop.model_name = !f.served_names.empty() ? f.served_names[0] : demo ? kDemoName : fs::path(f.model).lexically_normal().filename().string();
  if (f.served_names.size() > 1) f.api.routes.model_aliases.assign(f.served_names.begin() + 1, f.served_names.end());
  if (f.loop.model_name.empty()) f.loop.model_name = fs::path(f.model).lexically_normal().parent_path().filename().string();
  f.api.http.host = f.host;
  f.api.http.port = f.port;
  f.api.routes.encoding_version = *version;
  ConfigureImages(*model, &f.api.routes.images);
  if (f.role == protocol::WorkerRole::kEncode && !f.api.routes.images.enabled)
    return PrintError(Error(ErrorCode::kInvalidArgument, "--role encode needs a model with a vision tower: " +
                                                             f.api.routes.images.disabled_reason));
  if (base::Status s = ConfigureSpeculation(model->config(), &f); !s.ok()) return PrintError(s.error());
  for (const std::string& spec : f.logit_bias) {
    auto bias = ParseLogitBias(spec, *model);
    if (!bias.ok()) return PrintError(bias.error());
    f.api.routes.default_logit_bias.push_back(*bias);
  }
  if (base::Status s = f.loop.Validate(); !s.ok()) return PrintError(s.error());
  if (base::Status s = f.api.Validate(); !s.ok()) return PrintError(s.error());

  // Before the first thread that outlives this point (the KV store's I/O and GC threads): a
  // thread started with the signals unblocked would take a SIGTERM that arrives between the
  // banner and sigwait, and the process would die of it instead of stopping cleanly.
  sigset_t stop_signals = BlockStopSignals();
  auto store = OpenStore(f, *model);
  if (!store.ok()) return PrintError(store.error());
  if (base::Status s = LoadApiKeys(&f); !s.ok()) return PrintError(s.error());
  auto metering = StartMetering(f.meter, f.api.api_keys, /*ledger=*/true);
  if (!metering.ok()) return PrintError(metering.error());
  f.api.key_ring = metering->ring;
  f.api.ledger = metering->ledger.get();
  f.api.tenants = metering->directory.get();
  f.api.meter_store = metering->store.get();
  f.api.limiter = metering->limiter.get();
  auto seal = OpenReasoningSeal(f);
  if (!seal.ok() && !f.seal_key_file.empty()) return PrintError(seal.error());
  if (seal.ok()) {
    f.api.seal = std::make_shared<const dialect::ReasoningSeal>(*seal);
    if (f.seal_key_file.empty())
      FS_LOG(kInfo, "serve: reasoning is sealed with this worker's own key; give every worker of a fleet one --seal-key-file");
  } else {
    FS_LOG(kWarning, "serve: no reasoning seal ({}); thinking signatures and encrypted reasoning cannot be handed back",
           seal.error().message());
  }
  serve::EngineLoop loop(*model, f.engine, f.loop, std::move(store).value());
  f.api.grammars = GrammarCacheFor(**tok, *model, static_cast<size_t>(f.grammar_cache_bytes));
  loop.SetGrammars(f.api.grammars);
  std::unique_ptr<serve::TransferInbox> inbox;
  std::unique_ptr<transfer::TransferReceiver> receiver;
  f.api.routes.role = f.role;
  if (f.role != protocol::WorkerRole::kEncode) {  // prompt state from prefill workers, pictures from encode workers
    inbox = std::make_unique<serve::TransferInbox>(&loop);
    transfer::ReceiverOptions ro;
    ro.host = f.host;
    ro.port = f.transfer_port;
    ro.model_fingerprint = loop.Info().fingerprint;
    auto started = transfer::TransferReceiver::Start(ro, inbox.get());
    if (!started.ok()) return PrintError(started.error());
    receiver = std::move(started).value();
    f.api.routes.transfer_address = f.host + ":" + std::to_string(receiver->port());
  }
  api::ApiServer api(f.api, loop, **tok);
  api.SetTransferInbox(inbox.get());
  loop.Start();
  if (base::Status s = api.Start(); !s.ok()) {
    loop.Stop();
    return PrintError(s.error());
  }
  PrintBanner(f.loop.model_name, f.model, f.host, api.port(), f.role);
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  FS_LOG(kInfo, "serve: {} received; stopping", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  api.StopAccepting();
  loop.Stop();  // in-flight requests end with a cancellation
  api.WaitIdle(2.0);
  api.Stop();
  if (receiver) receiver->Stop();
  return 0;
}

}  // namespace

void RegisterServeCommand(CLI::App& app, CommandFn* run) {
  auto f = std::make_shared<ServeFlags>();
  auto* cmd = app.add_subcommand(
      "serve", "Run an engine worker with the OpenAI-compatible HTTP API (no --model: the embedded demo model)");
  cmd->add_option("--model", f->model, "Checkpoint directory (default: the demo model, generated on first start)");
  cmd->add_option("--host", f->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", f->port, "Port (0 = any free port; the banner shows it)")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--served-model-name", f->served_names,
                  "Model id clients send (default: deepseek-v4-demo, or the checkpoint folder name); repeat it for "
                  "aliases, a trailing '*' matches a prefix (--served-model-name my-v4 --served-model-name 'claude-*')");
  const std::map<std::string, dialect::HostedTools> hosted = {{"drop", dialect::HostedTools::kDrop}, {"reject", dialect::HostedTools::kReject}};
  cmd->add_option("--hosted-tools", f->api.routes.hosted_tools,
                  "Hosted tools this server does not run (web_search, Anthropic server tools): drop (left out of the "
                  "prompt, named in the x-flashserve-dropped-tools header) or reject (400)")
      ->transform(CLI::CheckedTransformer(hosted))->default_str("drop");
  cmd->add_option("--max-image-bytes", f->api.routes.images.limits.max_bytes, "Largest encoded image accepted")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))->capture_default_str();
  cmd->add_option("--max-image-pixels", f->api.routes.images.limits.max_pixels,
                  "Largest width x height accepted, checked from the header before decoding")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32))->capture_default_str();
  cmd->add_option("--max-images", f->api.routes.images.max_images, "Images per request at most")
      ->check(CLI::Range(0, 1024))->capture_default_str();
  cmd->add_option("--encoder-cache-bytes", f->loop.encoder_cache_bytes,
                  "Vision-tower outputs kept in memory, decoded (they are also KV-store objects under --image-ttl)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  cmd->add_option("--encode-batch-pixels", f->loop.encode_batch_pixels,
                  "Pixels of queued pictures (several requests') one vision-tower run takes; a larger picture runs "
                  "alone, 0 runs every picture alone")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  cmd->add_option("--speculative", f->speculative,
                  "Speculative decoding: mtp (greedy drafts from the checkpoint's MTP block), dspark (a block of drafts "
                  "from its DSpark stages), both verified in the next step with the same output as off; off; or auto "
                  "(the drafter the checkpoint ships, off when it has none)")
      ->check(CLI::IsMember({"auto", "mtp", "dspark", "off"}))->capture_default_str();
  cmd->add_option("--num-draft-tokens", f->num_draft_tokens,
                  "Drafts per sequence and step (each step verifies K + 1 rows) [default: 1 with mtp, the block size "
                  "(dspark_block_size) with dspark, which is also its most; unused with off]")
      ->check(CLI::Range(1, 16));
  cmd->add_option("--speculative-budget", f->speculative_budget,
                  "Drafts verified per step: adaptive (those whose expected tokens pay for their rows, by the drafts' "
                  "confidences and a step-time profile measured at start, the drafting time counted against them, none for "
                  "a gain under 5%; drafting backs off where none are kept) or fixed (always --num-draft-tokens)")
      ->check(CLI::IsMember({"adaptive", "fixed"}))->capture_default_str();
  cmd->add_option("--grammar-cache-bytes", f->grammar_cache_bytes,
                  "Compiled structured-output grammars kept (automata and token masks), least recently used out first")
      ->check(CLI::Range(int64_t{1} << 20, int64_t{1} << 40))->capture_default_str();
  cmd->add_option("--image-ttl", f->loop.image_ttl_class,
                  "Retention class (one of --kv-ttl) of vision-tower outputs in the KV store (default: --kv-default-ttl)");
  cmd->add_option("--image-file-root", f->api.routes.images.sources.file_root,
                  "Allow file:// image URLs under this directory (default: refused)")->check(CLI::ExistingDirectory);
  auto& fetch = f->api.routes.images.fetch;
  cmd->add_option("--image-fetch-hosts", fetch.hosts,
                  "Fetch http(s) image URLs from these hosts (comma-separated names, '*.example.com' for its "
                  "subdomains, '*' for any host; default: remote URLs refused). Redirects are checked the same way")
      ->delimiter(',');
  cmd->add_flag("--image-fetch-allow-private", fetch.allow_private,
                "Let image fetches connect to loopback, private, link-local and other non-public addresses "
                "(refused by default, whatever the host name resolves to)");
  cmd->add_option("--image-fetch-timeout", fetch.timeout_seconds, "Seconds a remote picture may take, redirects included")
      ->check(CLI::Range(0.1, 600.0))->capture_default_str();
  cmd->add_option("--image-fetch-threads", f->api.routes.images.fetch_threads, "Remote pictures fetched at once")
      ->check(CLI::Range(1, 256))->capture_default_str();
  cmd->add_option("--seal-key-file", f->seal_key_file,
                  "Key (64 hex digits) sealing the reasoning handed to stateless clients; share one file across the "
                  "fleet (default: reasoning-seal.key in --kv-dir, else in ~/.cache/flashserve, created on first start)");
  cmd->add_option("--tokenizer", f->tokenizer, "tokenizer.json (default: the checkpoint's own, else the DeepSeek one from setup)")->check(CLI::ExistingFile);
  const std::map<std::string, protocol::WorkerRole> roles = {
      {"both", protocol::WorkerRole::kBoth}, {"prefill", protocol::WorkerRole::kPrefill},
      {"decode", protocol::WorkerRole::kDecode}, {"encode", protocol::WorkerRole::kEncode}};
  cmd->add_option("--role", f->role,
                  "both, or a stage of disaggregated serving: prefill | decode (the router pairs them) | encode "
                  "(only the vision tower, for other workers' pictures)")
      ->transform(CLI::CheckedTransformer(roles))->default_str("both");
  cmd->add_option("--transfer-port", f->transfer_port, "Port receiving prompt state and pictures' tower outputs from other workers (all roles but encode; 0 = any)")
      ->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--encoding", f->encoding, "Prompt format: auto (from the checkpoint's architecture), v4 or v41")
      ->check(CLI::IsMember({"auto", "v4", "v41", "v4.1"}))->capture_default_str();
  sched::SchedConfig& s = f->loop.sched;
  cmd->add_option("--max-step-tokens", s.max_step_tokens, "Tokens per engine step, all sequences")->capture_default_str();
  cmd->add_option("--max-running", s.max_running, "Sequences in the running batch")->capture_default_str();
  cmd->add_option("--max-waiting", s.max_waiting, "Queued requests before new ones get 429")->capture_default_str();
  cmd->add_option("--state-pool-bytes", s.state_pool_bytes, "Sequence-state memory budget")->capture_default_str();
  cmd->add_option("--persist-every-blocks", s.persist_every_blocks, "Prefix-cache snapshot every N blocks of a long prompt (0 = end only)")->capture_default_str();
  cmd->add_option("--max-choices", f->loop.max_choices, "Largest n per request")->capture_default_str();
  cmd->add_option("--max-context", f->loop.max_context, "Tokens per sequence, prompt + output (0 = the model's)")->capture_default_str();
  cmd->add_option("--default-max-tokens", f->api.routes.default_max_tokens, "max_tokens when a request gives none (clipped to the context)")->capture_default_str();
  cmd->add_option("--logit-bias", f->logit_bias,
                  "TOKEN:BIAS added to every request that does not bias TOKEN itself; TOKEN is an id or 'eos' "
                  "(repeatable; e.g. --logit-bias eos:+8 ends the demo model's random answers sooner)");
  cmd->add_option("--max-reasoning-tokens", f->api.routes.max_reasoning_tokens,
                  "Reasoning tokens per answer at most: </think> is forced after them (0 = no cap; requests may ask "
                  "for less with thinking.budget_tokens)")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--max-body-bytes", f->api.http.max_body_bytes, "Largest request body (bigger: 413)")->capture_default_str();
  cmd->add_option("--idle-timeout", f->api.http.idle_timeout_seconds, "Seconds before an idle keep-alive connection is closed")->capture_default_str();
  cmd->add_option("--io-threads", f->api.http.io_threads, "HTTP I/O threads")->check(CLI::Range(1, 256))->capture_default_str();
  AddStoreAndKeyFlags(cmd, f.get());
  AddEngineFlags(cmd, &f->engine, &f->no_qat);
  cmd->callback([f, run] { *run = [f] { return RunServe(*f); }; });
}

}  // namespace flashserve::app
