// Test-only: small generated V4 and V4.1 models (the tiny presets with a reduced vocabulary)
// written once per test binary into a temporary directory, and helpers to run token sequences.
#pragma once

#include <unistd.h>

#include <cmath>
#include <limits>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/engine.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"

namespace flashserve::engine::testing {

inline std::unique_ptr<Model> WriteAndLoad(model::ModelConfig c, bool bf16, const std::string& tag) {
  std::string dir = std::filesystem::temp_directory_path() / ("fs_engine_model_" + std::to_string(getpid()) + tag);
  c.vocab_size = 1280;
  model::RandomCheckpointOptions opt;
  opt.bf16 = bf16;
  base::ThreadPool pool(2);
  base::Status s = model::WriteRandomCheckpoint(c, dir, opt, pool);
  FS_CHECK(s.ok(), "%s", s.ToString().c_str());
  auto m = std::move(Model::Load(dir)).value();
  std::filesystem::remove_all(dir);  // the mapping stays valid
  return m;
}

// The tiny-v41 preset without its Engram layer (Reuse, Reindex, ratios 2 and 1, candidate blocks).
inline model::ModelConfig TinyV41NoEngram() {
  model::ModelConfig c = model::TinyV41Preset();
  c.engram = model::EngramConfig{};
  return c;
}

inline const Model& TestModelV41(bool bf16 = false) {
  static std::unique_ptr<Model> models[2];
  std::unique_ptr<Model>& m = models[bf16 ? 1 : 0];
  if (!m) m = WriteAndLoad(TinyV41NoEngram(), bf16, bf16 ? "_v41_bf16" : "_v41_fp8");
  return *m;
}

// tiny-v41 with its Engram layer 1 (4-grams, 2 heads of 32, primes above 1000) and a
// synthetic token map (id % 1000) standing in for the tokenizer-derived one.
inline model::ModelConfig TinyV41EngramConfig() {
  model::ModelConfig c = model::TinyV41Preset();
  c.engram.compressed_vocab_size = 1000;
  return c;
}

// A loaded TinyV41EngramConfig model completed with the synthetic token map (id % 1000).
inline std::unique_ptr<Model> WithSyntheticEngramMap(std::unique_ptr<Model> m) {
  std::vector<int32_t> map(1280);
  for (size_t i = 0; i < map.size(); ++i) map[i] = static_cast<int32_t>(i % 1000);
  base::Status s = m->SetEngramTokenMap(std::move(map), 1000);
  FS_CHECK(s.ok(), "%s", s.ToString().c_str());
  return m;
}

inline const Model& TestModelV41Engram() {
  static std::unique_ptr<Model> m;
  if (!m) m = WithSyntheticEngramMap(WriteAndLoad(TinyV41EngramConfig(), false, "_v41_engram"));
  return *m;
}

// tiny laid out as DeepSeek-V4-Flash-0731 (three DSpark stages, blocks of 5), its noise token
// inside the reduced vocabulary.
inline const Model& TestModelDspark() {
  static std::unique_ptr<Model> m;
  if (!m) {
    model::ModelConfig c = model::WithDspark(model::TinyPreset());
    c.dspark.noise_token_id = 1279;
    m = WriteAndLoad(c, false, "_dspark");
  }
  return *m;
}

inline const Model& TestModel(bool bf16 = false) {
  static std::unique_ptr<Model> models[2];
  std::unique_ptr<Model>& m = models[bf16 ? 1 : 0];
  if (!m) m = WriteAndLoad(model::TinyPreset(), bf16, bf16 ? "_bf16" : "_fp8");
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

// Weight bytes (as Ops counts them) that one decode step reads after `context` tokens.
inline double DecodeStepWeightBytes(Engine& engine, int context, uint32_t seed) {
  auto state = engine.NewSequence();
  const std::vector<int32_t> tokens = RandomTokens(context + 1, seed);
  RunChunked(engine, state.get(), std::vector<int32_t>(tokens.begin(), tokens.end() - 1), {context});
  RunChunked(engine, state.get(), {tokens.back()}, {1});
  return engine.last_stats().weight_bytes;
}

// Bytes of the indexers' query projections (wq_b, weights_proj) over the layers that score.
inline double IndexerQueryBytes(const Model& m) {
  double total = 0;
  for (int l = 0; l < m.config().num_layers; ++l)
    if (m.plan()[static_cast<size_t>(l)].runs_indexer)
      total += static_cast<double>(m.layer(l).attn.indexer.wq_b.StoredBytes() +
                                   m.layer(l).attn.indexer.weights_proj.StoredBytes());
  return total;
}

inline bool Same(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

inline bool SamePool(const SoftmaxPool& a, const SoftmaxPool& b) {
  return a.count == b.count && Same(a.max, b.max) && Same(a.sum, b.sum) && Same(a.wsum, b.wsum);
}

inline bool SameCarry(const CompressorState& a, const CompressorState& b) {
  return SamePool(a.cur, b.cur) && SamePool(a.next, b.next);
}

// Every field of two states, bit for bit; names the first difference.
inline std::string StateDifference(const SequenceState& a, const SequenceState& b) {
  if (a.position() != b.position()) return "position";
  if (a.mtp_position() != b.mtp_position()) return "mtp_position";
  if (!Same(a.pending_hidden(), b.pending_hidden())) return "pending_hidden";
  if (a.recent_tokens() != b.recent_tokens()) return "recent_tokens";
  if (a.num_layers() != b.num_layers()) return "num_layers";
  for (int i = 0; i < a.num_layers(); ++i) {
    const LayerState& x = a.layer(i);
    const LayerState& y = b.layer(i);
    const std::string at = " of layer " + std::to_string(i);
    if (!Same(x.ring, y.ring)) return "ring" + at;
    if (!Same(x.compressed, y.compressed)) return "compressed" + at;
    if (!Same(x.index_keys, y.index_keys)) return "index_keys" + at;
    if (!SameCarry(x.compressor, y.compressor)) return "compressor" + at;
    if (!SameCarry(x.index_compressor, y.index_compressor)) return "index_compressor" + at;
  }
  return "";
}

inline bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Smallest cosine similarity between corresponding rows of `vocab` logits. Returns -infinity
// (so any "> threshold" check fails) when the sizes differ, are empty or not whole rows, when
// any value is not finite, or when a row of either side is all zeros.
inline double MinRowCosine(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab = 1280) {
  constexpr double kFail = -std::numeric_limits<double>::infinity();
  const size_t row = static_cast<size_t>(vocab);
  if (vocab <= 0 || a.size() != b.size() || a.empty() || a.size() % row != 0) return kFail;
  double worst = 1.0;
  for (size_t r = 0; r < a.size() / row; ++r) {
    double dot = 0, na = 0, nb = 0;
    for (size_t i = r * row; i < (r + 1) * row; ++i) {
      const double x = a[i], y = b[i];
      if (!std::isfinite(x) || !std::isfinite(y)) return kFail;
      dot += x * y;
      na += x * x;
      nb += y * y;
    }
    if (na == 0 || nb == 0) return kFail;
    worst = std::min(worst, dot / std::sqrt(na * nb));
  }
  return worst;
}

// Sequences i = 0.. with prefix[i] tokens already in their state extend by chunk[i] tokens in
// one batched call; returns for each whether its logits equal a solo call bit for bit.
inline std::vector<bool> BatchedEqualsSolo(Engine& engine, const std::vector<int>& prefix, const std::vector<int>& chunk,
                                           uint32_t seed) {
  const int64_t vocab = engine.model().config().vocab_size;
  std::vector<std::unique_ptr<SequenceState>> solo, batched;
  std::vector<std::vector<int32_t>> tokens;
  for (size_t i = 0; i < prefix.size(); ++i) {
    tokens.push_back(RandomTokens(prefix[i] + chunk[i], seed + static_cast<uint32_t>(i)));
    solo.push_back(engine.NewSequence());
    batched.push_back(engine.NewSequence());
    if (prefix[i] > 0) {
      std::vector<int32_t> head(tokens[i].begin(), tokens[i].begin() + prefix[i]);
      RunChunked(engine, solo[i].get(), head, {prefix[i]});
      RunChunked(engine, batched[i].get(), head, {prefix[i]});
    }
  }
  std::vector<ForwardRequest> reqs;
  for (size_t i = 0; i < prefix.size(); ++i)
    reqs.push_back({batched[i].get(), std::span<const int32_t>(tokens[i].data() + prefix[i], chunk[i]), LogitsMode::kAll});
  auto together = engine.Forward(reqs);
  FS_CHECK(together.ok(), "%s", together.error().ToString().c_str());
  std::vector<bool> equal;
  for (size_t i = 0; i < prefix.size(); ++i) {
    ForwardRequest alone{solo[i].get(), reqs[i].tokens, LogitsMode::kAll};
    auto r = engine.Forward({&alone, 1});
    FS_CHECK(r.ok(), "%s", r.error().ToString().c_str());
    std::vector<float> a(r->logits.begin(), r->logits.end());
    std::vector<float> b(together->row(i, 0), together->row(i, 0) + chunk[i] * vocab);
    equal.push_back(BitEqual(a, b));
  }
  return equal;
}

}  // namespace flashserve::engine::testing
