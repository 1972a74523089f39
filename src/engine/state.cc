// Sequence state initialisation and the running softmax pool (engine/state.h).
#include "engine/state.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/activation/softmax_pool.h"

namespace flashserve::engine {

void SoftmaxPool::Reset(int dim) {
  max.resize(static_cast<size_t>(dim));
  sum.resize(static_cast<size_t>(dim));
  wsum.resize(static_cast<size_t>(dim));
  ResetChannels(0, dim);
  count = 0;
}

void SoftmaxPool::ResetChannels(int k0, int k1) {
  std::fill(max.begin() + k0, max.begin() + k1, -std::numeric_limits<float>::infinity());
  std::fill(sum.begin() + k0, sum.begin() + k1, 0.0f);
  std::fill(wsum.begin() + k0, wsum.begin() + k1, 0.0f);
}

void SoftmaxPool::Fold(const float* a, const float* z, int dim) {
  FoldChannels(a, z, 0, dim);
  ++count;
}

void SoftmaxPool::FoldChannels(const float* a, const float* z, int k0, int k1) {
  kernels::SoftmaxPoolFold(a + k0, z + k0, k1 - k0, max.data() + k0, sum.data() + k0, wsum.data() + k0);
}

void SoftmaxPool::Finish(float* out, int dim) const { FinishChannels(out, 0, dim); }

void SoftmaxPool::FinishChannels(float* out, int k0, int k1) const {
  for (int k = k0; k < k1; ++k) out[k] = wsum[k] / sum[k];
}

void SoftmaxPool::TakeChannels(SoftmaxPool& other, int k0, int k1) {
  std::copy(other.max.begin() + k0, other.max.begin() + k1, max.begin() + k0);
  std::copy(other.sum.begin() + k0, other.sum.begin() + k1, sum.begin() + k0);
  std::copy(other.wsum.begin() + k0, other.wsum.begin() + k1, wsum.begin() + k0);
  other.ResetChannels(k0, k1);
}

void CompressorState::Init(int d, bool ov) {
  dim = d;
  overlap = ov;
  cur.Reset(d);
  if (overlap) next.Reset(d);
}

int64_t EstimateStateBytes(const model::ModelConfig& c, const model::LayerPlan& plan, bool with_mtp,
                           int64_t position) {
  int64_t bytes = 0;
  for (const model::LayerSpec& spec : plan) {
    if (spec.is_mtp && !with_mtp) continue;
    bytes += int64_t{4} * c.sliding_window * c.head_dim;  // ring
    if (spec.owns_compressor) {
      // Entries grow in whole blocks of 128 tokens (see the growth policy in compressor.cc).
      const int64_t blocks = position / 128 + 1;
      const int64_t entries = blocks * 128 / spec.compress_ratio;
      bytes += entries * 4 * c.head_dim + 2 * 3 * 4 * c.head_dim;
      if (spec.owns_index_keys) bytes += entries * 4 * c.index_head_dim;
      if (spec.index_compressor) bytes += 2 * 3 * 4 * c.index_head_dim;
    }
  }
  if (with_mtp) bytes += int64_t{4} * c.hc_dim();
  return bytes + 4096;  // object overhead
}

void SequenceState::PushTokens(std::span<const int32_t> tokens) {
  if (engram_lookback_ == 0) return;
  recent_tokens_.insert(recent_tokens_.end(), tokens.begin(), tokens.end());
  if (static_cast<int>(recent_tokens_.size()) > engram_lookback_)
    recent_tokens_.erase(recent_tokens_.begin(), recent_tokens_.end() - engram_lookback_);
}

namespace {
LayerState FreshLayer(const model::ModelConfig& config, const model::LayerSpec& spec) {
  LayerState s;
  s.window = config.sliding_window;
  s.dim = config.head_dim;
  s.ring.assign(static_cast<size_t>(s.window) * s.dim, 0.0f);
  if (spec.owns_compressor) s.compressor.Init(config.head_dim, spec.compressor_overlap);
  if (spec.owns_index_keys) s.index_dim = config.index_head_dim;
  if (spec.index_compressor) s.index_compressor.Init(config.index_head_dim, true);
  return s;
}
}  // namespace

SequenceState::SequenceState(const model::ModelConfig& config, const model::LayerPlan& plan, bool with_mtp)
    : with_mtp_(with_mtp && config.num_drafter_layers() > 0),
      engram_lookback_(config.engram.layer_ids.empty() ? 0 : config.engram.max_ngram_size - 1) {
  for (const model::LayerSpec& spec : plan) {
    if (spec.is_mtp && !with_mtp_) break;
    layers_.push_back(FreshLayer(config, spec));
  }
}

void SequenceState::SetMtp(bool with_mtp, const model::ModelConfig& config, const model::LayerPlan& plan) {
  with_mtp = with_mtp && config.num_drafter_layers() > 0;
  if (with_mtp == with_mtp_) return;
  with_mtp_ = with_mtp;
  pending_hidden_.clear();
  mtp_position_ = with_mtp ? position_ : 0;  // as a state that never had them
  layers_.resize(static_cast<size_t>(config.num_layers));
  if (!with_mtp) return;
  for (const model::LayerSpec& spec : plan)
    if (spec.is_mtp) layers_.push_back(FreshLayer(config, spec));
}

}  // namespace flashserve::engine
