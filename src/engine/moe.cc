// MoE routing and expert evaluation (engine/moe.h).
#include "engine/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/activation/swiglu.h"

namespace flashserve::engine {
namespace {

float SqrtSoftplus(float x) {
  float sp = x > 20.0f ? x : std::log1p(std::exp(x));  // torch softplus threshold 20
  return std::sqrt(sp);
}

// y = W2(SwiGLU(W1 x, W3 x) * weight) for n rows of x; weights may be null (all 1). x_rounded:
// x is already rounded to FP8 (Ops::RoundToFp8), as W1 and W3 need. Buffers are the calling
// thread's own, so experts can run concurrently.
void RunExpert(Ops& ops, const model::ModelConfig& c, const model::ExpertWeights& e, const float* x, bool x_rounded,
               int64_t n, const float* row_weights, float* y) {
  const int64_t d = c.hidden_size, f = c.moe_inter_dim;
  thread_local base::AlignedVector<float> gate, up;
  gate.resize(static_cast<size_t>(n * f));
  up.resize(static_cast<size_t>(n * f));
  if (x_rounded) {
    ops.LinearPairOfRounded(e.w1, e.w3, x, n, d, gate.data(), up.data(), f);
  } else {
    ops.LinearPair(e.w1, e.w3, x, n, d, gate.data(), up.data(), f);
  }
  const float limit = static_cast<float>(c.swiglu_limit);
  // Pointers, not the thread_local names: the rows may run on other pool threads.
  float* g = gate.data();
  const float* u = up.data();
  // W2's input rounded in place right after each row's SwiGLU (where W2 rounds it), not copied
  // and rounded by Linear.
  const bool round = ops.RoundsInput(e.w2);
  ops.ForRows(n, [&](int64_t r) {
    kernels::SwiGlu(g + r * f, u + r * f, f, limit, row_weights ? row_weights[r] : 1.0f, g + r * f);
    if (round) ops.RoundRowsToFp8(g + r * f, 1, f, f);
  }, 8);
  if (round) {
    ops.LinearOfRounded(e.w2, g, n, f, y, d);
  } else {
    ops.Linear(e.w2, g, n, f, y, d);
  }
}

// Whether the expert's W1 and W3 both take their input rounded to FP8 (so RunExpert may be given it so).
bool RoundsBoth(const Ops& ops, const model::ExpertWeights& e) {
  return ops.RoundsInput(e.w1) && ops.RoundsInput(e.w3);
}

// Groups rows by expert (each expert's weights read once per call) and fills
// s->expert_out[row * k + slot]. Experts run concurrently, each on one thread (a row's result
// does not depend on which thread computes it), taken one at a time, those with the most rows
// first, so that the last ones leave little idle time. With `shared_alongside`, the shared
// expert is one more such task (the first, being the largest), writing s->shared. hq: h
// rounded to FP8 (or null), the input of experts whose W1 and W3 round it (RoundsBoth).
void RunRoutedExperts(Ops& ops, const model::ModelConfig& c, const model::MoeWeights& w, const float* h,
                      const float* hq, int64_t rows, MoeScratch* s, bool shared_alongside) {
  Ops::ScopedPhase t(ops, Phase::kExperts);
  const int num_experts = c.num_routed_experts, k = c.num_experts_per_token;
  const int64_t d = c.hidden_size;
  s->assignments.assign(static_cast<size_t>(num_experts), {});
  for (int64_t i = 0; i < rows * k; ++i) s->assignments[s->selected[i]].push_back(i);
  std::vector<int> active;
  for (int e = 0; e < num_experts; ++e)
    if (!s->assignments[static_cast<size_t>(e)].empty()) active.push_back(e);
  std::stable_sort(active.begin(), active.end(), [&](int a, int b) {
    return s->assignments[static_cast<size_t>(a)].size() > s->assignments[static_cast<size_t>(b)].size();
  });
  s->expert_out.resize(static_cast<size_t>(rows * k * d));
  const int64_t first = shared_alongside ? 1 : 0;
  ops.ForTasks(first + static_cast<int64_t>(active.size()), [&](int64_t task) {
    if (task < first) {
      const bool rounded = hq && RoundsBoth(ops, w.shared);
      RunExpert(ops, c, w.shared, rounded ? hq : h, rounded, rows, nullptr, s->shared.data());
      return;
    }
    const int e = active[static_cast<size_t>(task - first)];
    const model::ExpertWeights& expert = w.experts[static_cast<size_t>(e)];
    const bool rounded = hq && RoundsBoth(ops, expert);
    const float* src = rounded ? hq : h;
    const auto& slots = s->assignments[static_cast<size_t>(e)];
    const int64_t n = static_cast<int64_t>(slots.size());
    if (n == 1) {  // one row (most experts at small batches): in place, no gather or scatter
      const float weight = s->weights[slots[0]];
      RunExpert(ops, c, expert, src + (slots[0] / k) * d, rounded, 1, &weight, s->expert_out.data() + slots[0] * d);
      return;
    }
    thread_local base::AlignedVector<float> gathered, row_weights, expert_y;
    gathered.resize(static_cast<size_t>(n * d));
    row_weights.resize(static_cast<size_t>(n));
    expert_y.resize(static_cast<size_t>(n * d));
    for (int64_t j = 0; j < n; ++j) {
      std::memcpy(gathered.data() + j * d, src + (slots[j] / k) * d, sizeof(float) * d);
      row_weights[j] = s->weights[slots[j]];
    }
    RunExpert(ops, c, expert, gathered.data(), rounded, n, row_weights.data(), expert_y.data());
    for (int64_t j = 0; j < n; ++j)
      std::memcpy(s->expert_out.data() + slots[j] * d, expert_y.data() + j * d, sizeof(float) * d);
  });
}

}  // namespace

void RouteRow(const model::ModelConfig& c, const model::MoeWeights& w, bool hash, int32_t token_id,
              const float* logits, int32_t* experts, float* weights) {
  const int num_experts = c.num_routed_experts, k = c.num_experts_per_token;
  thread_local std::vector<float> score_buffer;
  score_buffer.resize(static_cast<size_t>(num_experts));
  float* sc = score_buffer.data();
  const float temp = static_cast<float>(c.gate_temp);  // V4.1 gate temperature (1 = none)
  for (int e = 0; e < num_experts; ++e) sc[e] = SqrtSoftplus(temp == 1.0f ? logits[e] : logits[e] / temp);
  // Image-span positions select with their own bias (bias_vl), on hash layers too (Vision-Exp:
  // they skip tid2eid there).
  const bool image = !w.gate_bias_vl.empty() && c.image_token_id >= 0 && token_id == c.image_token_id;
  if (hash && !image) {
    std::memcpy(experts, w.tid2eid.data() + static_cast<int64_t>(token_id) * k, sizeof(int32_t) * k);
  } else {
    // Top-k of score + bias; ties go to the lower expert id.
    std::vector<int32_t> order(static_cast<size_t>(num_experts));
    std::iota(order.begin(), order.end(), 0);
    const std::vector<float>& bias = image ? w.gate_bias_vl : w.gate_bias;
    auto key = [&](int32_t e) { return sc[e] + bias[static_cast<size_t>(e)]; };
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
    std::copy(order.begin(), order.begin() + k, experts);
  }
  float total = 0.0f;
  for (int i = 0; i < k; ++i) total += sc[experts[i]];
  // V4 renormalises without an epsilon; V4.1 adds 1e-20 and skips it for a single expert.
  if (c.is_v41()) total = k > 1 ? total + 1e-20f : 1.0f;
  const float scale = static_cast<float>(c.routed_scaling_factor);
  for (int i = 0; i < k; ++i) weights[i] = sc[experts[i]] / total * scale;
}

void RunMoe(Ops& ops, const model::ModelConfig& c, const model::MoeWeights& w, bool hash, const int32_t* ids,
            const float* h, int64_t rows, float* out, MoeScratch* s) {
  const int num_experts = c.num_routed_experts, k = c.num_experts_per_token;
  const int64_t d = c.hidden_size;
  s->logits.resize(static_cast<size_t>(rows * num_experts));
  s->selected.resize(static_cast<size_t>(rows * k));
  s->weights.resize(static_cast<size_t>(rows * k));
  {
    Ops::ScopedPhase t(ops, Phase::kRoute);
    ops.Linear(w.gate, h, rows, d, s->logits.data(), num_experts);
    ops.ForRows(rows, [&](int64_t r) {
      RouteRow(c, w, hash, ids[r], s->logits.data() + r * num_experts, s->selected.data() + r * k,
               s->weights.data() + r * k);
    }, 8);
  }
  s->shared.resize(static_cast<size_t>(rows * d));
  // Every expert a row goes to rounds it to FP8 the same way (QAT): once here, not per expert.
  const float* hq = nullptr;
  if (ops.qat() && (RoundsBoth(ops, w.shared) || RoundsBoth(ops, w.experts.front()))) {
    Ops::ScopedPhase t(ops, Phase::kExperts);
    hq = ops.RoundToFp8(h, rows, d, d, s->rounded);
  }
  // Decode: the shared expert is one more one-thread task beside the routed ones (Ops::SideBySide;
  // the routed tasks keep the other threads busy); prefill gives it all threads.
  const bool shared_alongside = rows <= Ops::kSideBySideRows;
  RunRoutedExperts(ops, c, w, h, hq, rows, s, shared_alongside);
  if (!shared_alongside) {
    Ops::ScopedPhase t(ops, Phase::kShared);
    const bool rounded = hq && RoundsBoth(ops, w.shared);
    RunExpert(ops, c, w.shared, rounded ? hq : h, rounded, rows, nullptr, s->shared.data());
  }
  Ops::ScopedPhase t(ops, Phase::kExperts);
  ops.ForRows(rows, [&](int64_t r) {
    float* y = out + r * d;
    std::memcpy(y, s->expert_out.data() + r * k * d, sizeof(float) * d);
    for (int slot = 1; slot < k; ++slot) {
      const float* e = s->expert_out.data() + (r * k + slot) * d;
      for (int64_t i = 0; i < d; ++i) y[i] += e[i];
    }
    const float* sh = s->shared.data() + r * d;
    for (int64_t i = 0; i < d; ++i) y[i] += sh[i];
  }, 8);
}

}  // namespace flashserve::engine
