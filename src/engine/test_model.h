// Test-only: a small generated V4 model (the tiny preset with a reduced vocabulary) written
// once per test binary into a temporary directory, and helpers to run token sequences.
#pragma once

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/engine.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"

namespace flashserve::engine::testing {

inline const Model& TestModel(bool bf16 = false) {
  static std::unique_ptr<Model> models[2];
  std::unique_ptr<Model>& m = models[bf16 ? 1 : 0];
  if (!m) {
    std::string dir = std::filesystem::temp_directory_path() /
                      ("fs_engine_model_" + std::to_string(getpid()) + (bf16 ? "_bf16" : "_fp8"));
    model::ModelConfig c = model::TinyPreset();
    c.vocab_size = 1280;
    model::RandomCheckpointOptions opt;
    opt.bf16 = bf16;
    base::ThreadPool pool(2);
    base::Status s = model::WriteRandomCheckpoint(c, dir, opt, pool);
    FS_CHECK(s.ok(), "%s", s.ToString().c_str());
    m = std::move(Model::Load(dir)).value();
    std::filesystem::remove_all(dir);  // the mapping stays valid
  }
  return *m;
}

inline std::vector<int32_t> RandomTokens(int n, uint32_t seed, int vocab = 1280) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(2, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

// Feeds `tokens` to a fresh or given state in chunks of the given sizes (cycled), returning
// the logits of every position, row-major.
inline std::vector<float> RunChunked(Engine& engine, SequenceState* state, const std::vector<int32_t>& tokens,
                                     const std::vector<int>& chunks) {
  std::vector<float> all;
  size_t done = 0, c = 0;
  while (done < tokens.size()) {
    size_t n = std::min<size_t>(static_cast<size_t>(chunks[c++ % chunks.size()]), tokens.size() - done);
    ForwardRequest req{state, std::span<const int32_t>(tokens.data() + done, n), LogitsMode::kAll};
    auto r = engine.Forward({&req, 1});
    FS_CHECK(r.ok(), "%s", r.error().ToString().c_str());
    all.insert(all.end(), r->logits.begin(), r->logits.end());
    done += n;
  }
  return all;
}

inline bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace flashserve::engine::testing
