// Flags of `flashserve serve` and the set-up steps that turn them into the prefix-cache store
// and the API keys. Used by cmd_serve.cc on the main thread only.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/api_server.h"
#include "app/meter_setup.h"
#include "base/result.h"
#include "engine/model.h"
#include "engine/options.h"
#include "kvstore/kv_store.h"
#include "protocol/cluster.h"
#include "serve/engine_loop.h"

namespace flashserve::app {

inline kvstore::StoreConfig DefaultStoreConfig() {
  kvstore::StoreConfig c;
  c.disk_bytes = int64_t{16} << 30;
  c.shared_bytes = int64_t{64} << 30;
  return c;
}

struct ServeFlags {
  std::string model, host = "127.0.0.1", tokenizer, encoding = "auto";
  std::vector<std::string> served_names;  // the first is the model's id; the rest (or "claude-*") aliases
  std::vector<std::string> logit_bias;    // --logit-bias TOKEN:BIAS
  std::string seal_key_file;              // "" = <data dir>/reasoning-seal.key, created on first start
  int port = 8000;
  protocol::WorkerRole role = protocol::WorkerRole::kBoth;  // disaggregated serving: one half
  int transfer_port = 0;      // decode/both: prompt-state receiver port (0 = any free port)
  serve::LoopConfig loop;
  int64_t grammar_cache_bytes = int64_t{256} << 20;  // compiled structured-output grammars kept
  std::string speculative = "auto";  // auto (the checkpoint's drafter when it has one), mtp, dspark, off
  int num_draft_tokens = 0;          // 0: the drafter's default (MTP 1, DSpark its block size)
  std::string speculative_budget = "adaptive";  // adaptive (DSpark's prefix scheduler) or fixed
  kvstore::StoreConfig store = DefaultStoreConfig();
  std::string ttl_spec = "agent=3d,chat=7d";
  std::vector<std::string> api_keys;
  std::string api_keys_file;
  std::vector<std::string> admin_keys;  // --admin-key: the /admin routes
  MeterFlags meter;
  api::ApiConfig api;
  engine::EngineOptions engine;
  bool no_qat = false;
};

// The prefix-cache store: L1 always (budget --kv-dram-bytes), L2 / L3 when their folders are
// given; null when every tier is off.
base::Result<std::unique_ptr<kvstore::KvStore>> OpenStore(ServeFlags& f, const engine::Model& model);
// --api-key specs and the lines of --api-keys-file into f->api.api_keys.
base::Status LoadApiKeys(ServeFlags* f);
// The --kv-*, --api-key* and --meter-* flags.
void AddStoreAndKeyFlags(CLI::App* cmd, ServeFlags* f);

}  // namespace flashserve::app
