// Per-sequence DeepSeek-V4 / V4.1 inference state (v4-architecture.md section 7): for every
// layer a raw K=V ring of the last `window` positions; on layers that own a compressor (V4:
// every CSA/HCA layer; V4.1: the KV sources only) the append-only compressed entries, indexer
// keys (V4 CSA, V4.1 KV sources) and the compressor carry (running per-channel softmax pools of
// the incomplete windows). Owned by one caller; the engine mutates it only inside Forward.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "base/aligned_vector.h"
#include "model/config.h"
#include "model/layer_plan.h"

namespace flashserve::engine {

// Running per-channel softmax pool: after folding slots (a_s, z_s) it yields
// sum_s softmax_s(z_s[k]) * a_s[k]. Folding is sequential, so the result depends only on the
// slots and their order.
struct SoftmaxPool {
  std::vector<float> max, sum, wsum;  // [dim] each
  int32_t count = 0;                  // slots folded

  void Reset(int dim);
  void Fold(const float* a, const float* z, int dim);
  void Finish(float* out, int dim) const;  // out = wsum / sum

  // The same on channels [k0, k1) only, leaving count alone (independent channel slices of one
  // pool may run on different threads; the caller keeps count).
  void FoldChannels(const float* a, const float* z, int k0, int k1);
  void FinishChannels(float* out, int k0, int k1) const;
  void ResetChannels(int k0, int k1);
  // Channels [k0, k1) of `other` into this pool, then those of `other` reset.
  void TakeChannels(SoftmaxPool& other, int k0, int k1);
};

// Compressor carry of one layer: `cur` pools the entry of the window in progress; with overlap
// (CSA) `next` already pools the first halves for the following entry.
struct CompressorState {
  int dim = 0;
  bool overlap = false;
  SoftmaxPool cur, next;

  void Init(int dim, bool overlap);
};

struct LayerState {
  int window = 0;
  int dim = 0;                        // D
  int index_dim = 0;                  // D_I (layers that own index keys)
  base::AlignedVector<float> ring;        // [window * dim], slot = position % window
  base::AlignedVector<float> compressed;  // [num_entries * dim]
  base::AlignedVector<float> index_keys;  // [num_entries * index_dim]
  CompressorState compressor;         // layers that own a compressor
  CompressorState index_compressor;   // V4 CSA
  int64_t num_entries() const { return dim == 0 ? 0 : static_cast<int64_t>(compressed.size()) / dim; }
};

// Bytes a sequence's state occupies at `position` tokens (rings, carries, compressed entries,
// MTP streams), as used for memory budgets.
int64_t EstimateStateBytes(const model::ModelConfig& config, const model::LayerPlan& plan, bool with_mtp,
                           int64_t position);

class SequenceState {
 public:
  // Fresh state at position 0 for every layer of the plan (the drafter's layers, the MTP block or
  // the DSpark stages, only when with_mtp: "MTP" names both below).
  SequenceState(const model::ModelConfig& config, const model::LayerPlan& plan, bool with_mtp);

  int64_t position() const { return position_; }
  bool with_mtp() const { return with_mtp_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  LayerState& layer(int i) { return layers_[static_cast<size_t>(i)]; }
  const LayerState& layer(int i) const { return layers_[static_cast<size_t>(i)]; }

  // MTP bookkeeping: trunk output streams of the last position, consumed when the next token
  // arrives (the MTP module at position t needs token t+1). DSpark stages need neither: their
  // rings follow the trunk (mtp_position == position).
  std::vector<float>& pending_hidden() { return pending_hidden_; }
  const std::vector<float>& pending_hidden() const { return pending_hidden_; }
  int64_t mtp_position() const { return mtp_position_; }

  // V4.1 Engram look-back: the last (max_ngram - 1) token ids, oldest first (fewer at the
  // start of the sequence); empty for models without Engram layers.
  const std::vector<int32_t>& recent_tokens() const { return recent_tokens_; }
  int engram_lookback() const { return engram_lookback_; }
  void PushTokens(std::span<const int32_t> tokens);

  // Gives the state MTP layers (fresh: the MTP block starts its context at the current position
  // and drafts once a forward has run) or takes them away; no change when it already has the
  // asked form. The trunk's state is untouched.
  void SetMtp(bool with_mtp, const model::ModelConfig& config, const model::LayerPlan& plan);

  // Deep copy (a snapshot that can be resumed independently).
  std::unique_ptr<SequenceState> Clone() const { return std::make_unique<SequenceState>(*this); }

  // Engine-only mutators.
  void set_position(int64_t p) { position_ = p; }
  void set_mtp_position(int64_t p) { mtp_position_ = p; }
  void set_recent_tokens(std::vector<int32_t> tokens) { recent_tokens_ = std::move(tokens); }

 private:
  friend class StateCodec;
  int64_t position_ = 0;
  bool with_mtp_ = false;
  int64_t mtp_position_ = 0;
  std::vector<LayerState> layers_;
  std::vector<float> pending_hidden_;
  int engram_lookback_ = 0;
  std::vector<int32_t> recent_tokens_;
};

}  // namespace flashserve::engine
