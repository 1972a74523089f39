// Speculative decoding's engine side (engine/engine.h): rolling a logged forward call back to
// its accepted prefix, and greedy MTP drafts that leave the state as it was. Called by the
// serving loop (serve/speculation.cc) and the benchmarks; the Engine's thread, like Forward.
#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "engine/attention.h"
#include "engine/engine.h"

namespace flashserve::engine {

using base::Error;
using base::ErrorCode;
using base::Status;

Status Engine::Rollback(SequenceState* state, const UndoLog& log, int64_t keep) const {
  const model::ModelConfig& c = model_.config();
  const int64_t n = static_cast<int64_t>(log.tokens.size());
  if (state == nullptr || state->position() != log.position + n ||
      static_cast<size_t>(state->num_layers()) != log.layers.size())
    return Error(ErrorCode::kBadState, "rollback: the log is not of this state's last forward call");
  if (keep < 0 || keep > n)
    return Error(ErrorCode::kInvalidArgument,
                 "rollback: keep " + std::to_string(keep) + " outside [0, " + std::to_string(n) + "]");
  if (keep == n) return Status::Ok();
  const int64_t position = log.position + keep;
  for (int i = 0; i < c.num_layers; ++i)
    RollbackLayer(model_, i, log.layers[static_cast<size_t>(i)], position, &state->layer(i));
  if (state->with_mtp() && c.dspark.present()) {  // the stages' rings follow the trunk
    for (int i = c.num_layers; i < state->num_layers(); ++i)
      RollbackLayer(model_, i, log.layers[static_cast<size_t>(i)], position, &state->layer(i));
    state->set_mtp_position(position);
  } else if (state->with_mtp()) {
    const int64_t width = c.hc_dim();
    const int64_t mtp_position = keep == 0 ? log.mtp_position : position - 1;
    for (int i = c.num_layers; i < state->num_layers(); ++i)
      RollbackLayer(model_, i, log.layers[static_cast<size_t>(i)], mtp_position, &state->layer(i));
    if (keep == 0) {
      state->pending_hidden() = log.pending_hidden;
    } else {
      const float* row = log.streams.data() + (keep - 1) * width;
      state->pending_hidden().assign(row, row + width);
    }
    state->set_mtp_position(mtp_position);
  }
  state->set_recent_tokens(log.recent_tokens);
  state->PushTokens(std::span<const int32_t>(log.tokens.data(), static_cast<size_t>(keep)));
  state->set_position(position);
  return Status::Ok();
}

Status Engine::ValidateDrafts(std::span<const DraftRequest> batch) const {
  const model::ModelConfig& c = model_.config();
  std::set<const SequenceState*> seen;
  for (size_t i = 0; i < batch.size(); ++i) {
    const DraftRequest& r = batch[i];
    const std::string where = "draft " + std::to_string(i) + ": ";
    if (r.state == nullptr || !seen.insert(r.state).second)
      return Error(ErrorCode::kInvalidArgument, where + "no state, or a state twice");
    if (!CanDraft(*r.state))
      return Error(ErrorCode::kFailedPrecondition,
                   where + "drafting needs a state created with the drafter (MTP: after its first forward; DSpark: "
                           "room in the context for a whole block)");
    if (r.token < 0 || r.token >= c.vocab_size)
      return Error(ErrorCode::kInvalidArgument, where + "token id " + std::to_string(r.token) + " outside the vocabulary");
    if (r.num_drafts < 0 || r.num_drafts > MostDrafts())
      return Error(ErrorCode::kInvalidArgument, where + "num_drafts " + std::to_string(r.num_drafts) +
                                                    " outside [0, " + std::to_string(MostDrafts()) + "]");
    if (!c.dspark.present() && r.state->mtp_position() + r.num_drafts > c.max_position)
      return Error(ErrorCode::kContextOverflow, where + "drafts would pass the model's context");
  }
  return Status::Ok();
}

bool Engine::CanDraft(const SequenceState& state) const {
  const model::ModelConfig& c = model_.config();
  if (!state.with_mtp()) return false;
  if (c.dspark.present()) return state.position() + c.dspark.block_size <= c.max_position;  // the whole block fits
  return !state.pending_hidden().empty();
}

int Engine::MostDrafts() const {
  const model::ModelConfig& c = model_.config();
  return c.dspark.present() ? c.dspark.block_size : c.sliding_window - 1;
}

base::Result<std::vector<std::vector<int32_t>>> Engine::Draft(std::span<const DraftRequest> batch,
                                                              std::vector<std::vector<float>>* confidence) {
  return model_.config().dspark.present() ? DraftDspark(batch, confidence) : DraftMtp(batch, confidence);
}

namespace {
// The softmax probability of the row's argmax `top`.
float TopProbability(const float* x, int64_t n, int32_t top) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += std::exp(static_cast<double>(x[i]) - x[top]);
  return static_cast<float>(1.0 / total);
}
}  // namespace

base::Result<std::vector<std::vector<int32_t>>> Engine::DraftMtp(std::span<const DraftRequest> batch,
                                                                 std::vector<std::vector<float>>* confidence) {
  if (model_.config().num_mtp_layers == 0)
    return Error(ErrorCode::kFailedPrecondition, "the model has no MTP block to draft with");
  FS_RETURN_IF_ERROR(ValidateDrafts(batch));
  ops_.ResetStats();
  const model::ModelConfig& c = model_.config();
  const int64_t width = c.hc_dim(), vocab = c.vocab_size;
  std::vector<std::vector<int32_t>> drafts(batch.size());
  if (confidence) confidence->assign(batch.size(), {});
  std::vector<UndoLog> logs(batch.size());
  std::vector<std::vector<float>> streams(batch.size());  // the previous step's output streams
  int steps = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    logs[i].Begin(*batch[i].state);
    streams[i] = batch[i].state->pending_hidden();
    steps = std::max(steps, batch[i].num_drafts);
  }
  base::AlignedVector<float>& z = draft_streams_;
  base::AlignedVector<float>& logits = draft_logits_;  // kept between calls: no page faults
  for (int k = 0; k < steps; ++k) {
    RowBatch rows;
    std::vector<const float*> inputs;
    std::vector<size_t> owner;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].num_drafts <= k) continue;
      SeqRows seq;
      seq.row_begin = rows.num_rows();
      seq.start_pos = batch[i].state->mtp_position() + k;
      seq.state = batch[i].state;
      seq.undo = &logs[i];
      rows.ids.push_back(k == 0 ? batch[i].token : drafts[i].back());
      rows.pos.push_back(seq.start_pos);
      seq.row_end = rows.num_rows();
      rows.seqs.push_back(seq);
      inputs.push_back(streams[i].data());
      owner.push_back(i);
    }
    std::vector<int64_t> logit_rows(owner.size());
    for (size_t r = 0; r < owner.size(); ++r) logit_rows[r] = static_cast<int64_t>(r);
    logits.resize(owner.size() * static_cast<size_t>(vocab));
    MtpModule(rows, inputs, logit_rows, &z, logits.data());
    for (size_t r = 0; r < owner.size(); ++r) {
      const float* row = logits.data() + r * vocab;
      drafts[owner[r]].push_back(ArgmaxRow(row, vocab));
      if (confidence) (*confidence)[owner[r]].push_back(TopProbability(row, vocab, drafts[owner[r]].back()));
      streams[owner[r]].assign(z.data() + r * width, z.data() + (r + 1) * width);
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    SequenceState* st = batch[i].state;
    for (int l = c.num_layers; l < st->num_layers(); ++l)
      RollbackLayer(model_, l, logs[i].layers[static_cast<size_t>(l)], logs[i].mtp_position, &st->layer(l));
  }
  stats_ = ops_.stats();
  return drafts;
}

}  // namespace flashserve::engine
