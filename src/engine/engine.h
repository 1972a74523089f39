// The V4 forward pass over a batch of sequences, each extending its own SequenceState by a
// chunk of tokens (prefill chunk or one decode token). Every row is computed with reduction
// orders that do not depend on the rest of the batch, so a sequence's logits are
// bit-identical alone or batched, and however its tokens were split into chunks.
// One Engine per engine thread; Forward is not reentrant. The Model must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/aligned_vector.h"
#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/block.h"
#include "engine/model.h"
#include "engine/options.h"
#include "engine/state.h"
#include "engine/undo.h"

namespace flashserve::engine {

enum class LogitsMode { kNone, kLast, kAll };

// Offsets [begin, end) into a request's tokens.
struct TokenRange {
  int32_t begin = 0, end = 0;
};

struct ForwardRequest {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;   // appended at state->position()
  LogitsMode logits = LogitsMode::kLast;
  // MTP head logits (predicting token t+2) for every position t whose next token is known by
  // the end of this call; needs a state created with MTP.
  bool mtp_logits = false;
  // Rows whose input embedding is given instead of looked up (the image spans the vision tower
  // filled): embedded_rows are increasing offsets into `tokens`, embeddings holds one hidden-size
  // row per entry. On a model with a vision tower every image placeholder token (config
  // image_token_id) must be embedded.
  std::span<const int32_t> embedded_rows = {};
  std::span<const float> embeddings = {};
  // Picture spans whose raw sliding window is bidirectional (Vision-Exp, START to END): each of
  // their rows sees its whole span (earlier rows past its usual window, and every later row) as
  // well as that window. Increasing, disjoint, inside `tokens`: a span is computed in one call,
  // never cut. The compressed entries stay causal.
  std::span<const TokenRange> bidirectional = {};
  // Logs what the call changes so that Rollback can keep only a prefix of its tokens (at most
  // the sliding window of them). Null: not logged.
  UndoLog* undo = nullptr;
};

// A sequence to draft for: its state (its last forward done, with MTP) and the token chosen
// after it (not forwarded yet).
struct DraftRequest {
  SequenceState* state = nullptr;
  int32_t token = 0;
  int num_drafts = 0;
};

struct ForwardResult {
  int64_t vocab_size = 0;
  std::vector<float> logits;            // rows of vocab_size floats
  std::vector<int64_t> logits_begin;    // per request: first row (size = requests + 1)
  std::vector<float> mtp_logits;
  std::vector<int64_t> mtp_begin;       // per request: first MTP row (size = requests + 1)
  std::vector<int64_t> mtp_first_pos;   // per request: position t of its first MTP row

  int64_t num_rows(size_t req) const { return logits_begin[req + 1] - logits_begin[req]; }
  const float* row(size_t req, int64_t i) const { return logits.data() + (logits_begin[req] + i) * vocab_size; }
  int64_t num_mtp_rows(size_t req) const { return mtp_begin[req + 1] - mtp_begin[req]; }
  const float* mtp_row(size_t req, int64_t i) const { return mtp_logits.data() + (mtp_begin[req] + i) * vocab_size; }
};

class Engine {
 public:
  Engine(const Model& model, const EngineOptions& options);

  const Model& model() const { return model_; }
  const EngineOptions& options() const { return options_; }
  std::unique_ptr<SequenceState> NewSequence(bool with_mtp = false) const;

  // Work counters of the last Forward call.
  const OpStats& last_stats() const { return stats_; }

  // Runs the batch; on error no state is modified.
  base::Result<ForwardResult> Forward(std::span<const ForwardRequest> batch);
  // Hands a result's logits storage back for the next Forward to fill: a step loop that does so
  // writes its logits into memory already mapped (a fresh block of a batch's logits costs a
  // page fault every 4 KiB, tens of ms a step at batch 32), and is not cleared first (only a
  // part beyond the recycled size is zero-filled). Buffers above 256 MiB are let go.
  void Recycle(ForwardResult&& used);

  // Takes a state back to the first `keep` tokens of its last forward call, logged in `log`:
  // afterwards it equals, bit for bit, the state of a call that read only those tokens.
  base::Status Rollback(SequenceState* state, const UndoLog& log, int64_t keep) const;

  // Greedy drafts with the MTP module: for each request up to num_drafts tokens after its
  // token, each the MTP head's argmax given the previous draft (the module's own output streams
  // stand in for the trunk's after the first). The states are left as they were. `confidence`
  // (optional) gets each draft's probability under the MTP head.
  base::Result<std::vector<std::vector<int32_t>>> DraftMtp(std::span<const DraftRequest> batch,
                                                           std::vector<std::vector<float>>* confidence = nullptr);
  // Greedy DSpark drafts (a checkpoint with a DSpark drafter): each request's block [token,
  // noise x (B - 1)] at its state's position through the stages, attending its context KV and
  // the whole block; draft k is the argmax of the head's logits plus the Markov bias of draft
  // k - 1 (the token for k = 0). num_drafts <= block size (the block is always whole, so a draft
  // does not depend on how many are asked). `confidence` gets the confidence head's estimate per
  // draft that it survives verification given the drafts before it. States left as they were.
  base::Result<std::vector<std::vector<int32_t>>> DraftDspark(std::span<const DraftRequest> batch,
                                                              std::vector<std::vector<float>>* confidence = nullptr);
  // The checkpoint's drafter: DraftDspark where it has DSpark stages, else DraftMtp.
  base::Result<std::vector<std::vector<int32_t>>> Draft(std::span<const DraftRequest> batch,
                                                        std::vector<std::vector<float>>* confidence = nullptr);
  // Whether `state` can be drafted for now: it keeps drafter layers and (MTP) has had a forward,
  // (DSpark) has room in the context for a whole block.
  bool CanDraft(const SequenceState& state) const;
  // The most drafts one Draft call gives a sequence (DSpark: the block size).
  int MostDrafts() const;

 private:
  base::Status Validate(std::span<const ForwardRequest> batch) const;
  void BuildRows(std::span<const ForwardRequest> batch, RowBatch* rows) const;
  void Embed(const RowBatch& rows, float* x);
  // hc_head (trunk or MTP), final norm and head for the listed rows of x.
  void Head(const model::HcWeights& hc, const std::vector<float>& norm, const float* x,
            const std::vector<int64_t>& rows, float* logits);
  void RunMtp(std::span<const ForwardRequest> batch, const RowBatch& trunk, const float* x, ForwardResult* out);
  // The MTP module over `rows` (ids: the next tokens; positions: the MTP positions), input
  // streams streams[r]: the block's output streams in *z, logits of logit_rows.
  void MtpModule(RowBatch& rows, const std::vector<const float*>& streams, const std::vector<int64_t>& logit_rows,
                 base::AlignedVector<float>* z, float* logits);
  base::Status ValidateDrafts(std::span<const DraftRequest> batch) const;
  // DSpark (dspark.cc): the residual entering target layer `slot`'s layer as the mean of the
  // streams of every row; the context KV of the call's drafting sequences; the sequential stage.
  void CaptureDsparkFeatures(int slot, const RowBatch& rows, const float* x);
  void InjectDsparkContext(const RowBatch& rows);
  void MarkovDrafts(std::span<const DraftRequest> batch, const std::vector<size_t>& first_head,
                    std::vector<std::vector<int32_t>>* drafts, std::vector<std::vector<float>>* confidence);

  const Model& model_;
  EngineOptions options_;
  base::ThreadPool pool_;
  Ops ops_;
  BlockScratch scratch_;
  base::AlignedVector<float> x_, head_in_, head_norm_, head_mix_;
  std::vector<float> spare_logits_, spare_mtp_logits_;  // from Recycle, for the next Forward
  base::AlignedVector<float> draft_logits_, draft_streams_;  // the drafters', kept between calls
  base::AlignedVector<float> dspark_features_, dspark_context_, markov_prev_, markov_bias_;
  OpStats stats_;
};

}  // namespace flashserve::engine
