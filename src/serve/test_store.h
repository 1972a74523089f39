// Tests only: a KV store for a model's loop over test directories (a disk tier, a shared tier
// rescanned never, or both), background GC off so tests decide when objects go. One thread.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/clock.h"
#include "engine/model.h"
#include "kvstore/kv_store.h"
#include "serve/prefix_store.h"

namespace flashserve::serve::testing {

struct TestStoreDirs {
  std::string disk;    // "" = no L2
  std::string shared;  // "" = no L3
};

inline std::unique_ptr<kvstore::KvStore> OpenTestStore(const engine::Model& model, const base::Clock& clock,
                                                       const TestStoreDirs& dirs, int64_t memory_bytes = 64 << 20) {
  kvstore::StoreConfig cfg;
  cfg.fingerprint = ModelFingerprint(model, engine::EngineOptions{});
  cfg.memory_bytes = memory_bytes;
  cfg.disk_dir = dirs.disk;
  cfg.disk_bytes = dirs.disk.empty() ? 0 : 256 << 20;
  cfg.shared_dir = dirs.shared;
  cfg.shared_bytes = dirs.shared.empty() ? 0 : 256 << 20;
  cfg.shared_rescan_seconds = 0;
  cfg.background_gc = false;
  auto store = kvstore::KvStore::Open(cfg, clock);
  EXPECT_TRUE(store.ok()) << store.error().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

}  // namespace flashserve::serve::testing
