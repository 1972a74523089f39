// Forward pass orchestration (engine/engine.h).
#include "engine/engine.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "kernels/gemm/matmul.h"

namespace flashserve::engine {

using base::Error;
using base::ErrorCode;
using base::Status;

namespace {
int ResolveThreads(int n) { return n > 0 ? n : 0; }
}  // namespace

void RowAngles::Compute(const kernels::RopeTable& table, const std::vector<int64_t>& pos) {
  half = table.rope_dim() / 2;
  cos.resize(pos.size() * static_cast<size_t>(half));
  sin.resize(cos.size());
  for (size_t r = 0; r < pos.size(); ++r) table.Angles(pos[r], cos.data() + r * half, sin.data() + r * half);
}

Engine::Engine(const Model& model, const EngineOptions& options)
    : model_(model), options_(options), pool_(ResolveThreads(options.num_threads)), ops_(pool_, options_) {}

std::unique_ptr<SequenceState> Engine::NewSequence(bool with_mtp) const {
  return std::make_unique<SequenceState>(model_.config(), model_.plan(), with_mtp);
}

namespace {

// Given embeddings cover exactly the image placeholders' rows (an image token without its
// picture would silently read the placeholder's own embedding row).
Status ValidateEmbeddings(const model::ModelConfig& c, const ForwardRequest& r, const std::string& where) {
  if (r.embeddings.size() != r.embedded_rows.size() * static_cast<size_t>(c.hidden_size))
    return Error(ErrorCode::kInvalidArgument, where + "embeddings do not hold one hidden-size row per embedded row");
  size_t next = 0;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const bool embedded = next < r.embedded_rows.size() && r.embedded_rows[next] == static_cast<int32_t>(i);
    if (embedded) ++next;
    if (!embedded && c.vision.present() && r.tokens[i] == c.image_token_id)
      return Error(ErrorCode::kInvalidArgument, where + "image placeholder at row " + std::to_string(i) +
                                                    " without its picture's embedding");
  }
  if (next != r.embedded_rows.size())
    return Error(ErrorCode::kInvalidArgument, where + "embedded rows must be increasing offsets into the tokens");
  return Status::Ok();
}

// Bidirectional spans: increasing, disjoint, non-empty and inside the call's tokens.
Status ValidateSpans(const ForwardRequest& r, const std::string& where) {
  int32_t previous_end = 0;
  for (const TokenRange& span : r.bidirectional) {
    if (span.begin < previous_end || span.end <= span.begin || span.end > static_cast<int32_t>(r.tokens.size()))
      return Error(ErrorCode::kInvalidArgument,
                   where + "bidirectional span [" + std::to_string(span.begin) + ", " + std::to_string(span.end) +
                       ") is not an increasing, disjoint range of this call's " + std::to_string(r.tokens.size()) +
                       " tokens (a span is computed whole, in one call)");
    previous_end = span.end;
  }
  return Status::Ok();
}

}  // namespace

Status Engine::Validate(std::span<const ForwardRequest> batch) const {
  const model::ModelConfig& c = model_.config();
  if (model_.needs_engram_token_map())
    return Error(ErrorCode::kFailedPrecondition,
                 "the model's Engram layers need the tokenizer-derived token map (load the checkpoint's tokenizer)");
  std::set<const SequenceState*> seen;
  for (size_t i = 0; i < batch.size(); ++i) {
    const ForwardRequest& r = batch[i];
    std::string where = "request " + std::to_string(i) + ": ";
    if (r.state == nullptr) return Error(ErrorCode::kInvalidArgument, where + "no sequence state");
    if (!seen.insert(r.state).second) return Error(ErrorCode::kInvalidArgument, where + "sequence appears twice");
    if (r.tokens.empty()) return Error(ErrorCode::kInvalidArgument, where + "no tokens");
    const int expected_layers = c.num_layers + (r.state->with_mtp() ? c.num_drafter_layers() : 0);
    if (r.state->num_layers() != expected_layers)
      return Error(ErrorCode::kBadState, where + "state does not belong to this model");
    if (r.state->engram_lookback() != (c.engram.layer_ids.empty() ? 0 : c.engram.max_ngram_size - 1))
      return Error(ErrorCode::kBadState, where + "state does not belong to this model");
    if (r.mtp_logits && (!r.state->with_mtp() || c.num_mtp_layers == 0))
      return Error(ErrorCode::kFailedPrecondition, where + "MTP logits need a model with an MTP block and a state created with it");
    for (int32_t t : r.tokens)
      if (t < 0 || t >= c.vocab_size)
        return Error(ErrorCode::kInvalidArgument, where + "token id " + std::to_string(t) + " outside the vocabulary [0, " +
                                                      std::to_string(c.vocab_size) + ")");
    FS_RETURN_IF_ERROR(ValidateEmbeddings(c, r, where));
    FS_RETURN_IF_ERROR(ValidateSpans(r, where));
    if (r.undo != nullptr && static_cast<int64_t>(r.tokens.size()) > c.sliding_window)
      return Error(ErrorCode::kInvalidArgument, where + "a logged call takes at most " +
                                                    std::to_string(c.sliding_window) + " tokens");
    if (r.undo != nullptr && !r.bidirectional.empty())
      return Error(ErrorCode::kInvalidArgument, where + "a logged call cannot hold bidirectional spans");
    if (r.state->position() + static_cast<int64_t>(r.tokens.size()) > c.max_position)
      return Error(ErrorCode::kContextOverflow, where + "sequence would reach " +
                                                    std::to_string(r.state->position() + r.tokens.size()) +
                                                    " tokens; the model supports " + std::to_string(c.max_position));
  }
  return Status::Ok();
}

namespace {
// Each row's bidirectional span bounds (absolute positions), -1 for causal rows.
void AddSpanBounds(const ForwardRequest& r, const SeqRows& seq, RowBatch* rows) {
  rows->span_first.resize(static_cast<size_t>(seq.row_end), -1);
  rows->span_last.resize(static_cast<size_t>(seq.row_end), -1);
  for (const TokenRange& span : r.bidirectional) {
    for (int32_t i = span.begin; i < span.end; ++i) {
      rows->span_first[static_cast<size_t>(seq.row_begin + i)] = seq.start_pos + span.begin;
      rows->span_last[static_cast<size_t>(seq.row_begin + i)] = seq.start_pos + span.end - 1;
    }
  }
}
}  // namespace

void Engine::BuildRows(std::span<const ForwardRequest> batch, RowBatch* rows) const {
  rows->ids.clear();
  rows->pos.clear();
  rows->seqs.clear();
  rows->embedding.clear();
  rows->span_first.clear();
  rows->span_last.clear();
  const int64_t d = model_.config().hidden_size;
  const bool any_span = std::any_of(batch.begin(), batch.end(), [](const ForwardRequest& r) { return !r.bidirectional.empty(); });
  for (const ForwardRequest& r : batch) {
    SeqRows seq;
    seq.row_begin = rows->num_rows();
    seq.start_pos = r.state->position();
    seq.state = r.state;
    seq.undo = r.undo;
    size_t next = 0;
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      rows->ids.push_back(r.tokens[i]);
      rows->pos.push_back(seq.start_pos + static_cast<int64_t>(i));
      const bool given = next < r.embedded_rows.size() && r.embedded_rows[next] == static_cast<int32_t>(i);
      rows->embedding.push_back(given ? r.embeddings.data() + static_cast<int64_t>(next++) * d : nullptr);
    }
    seq.row_end = rows->num_rows();
    if (any_span) AddSpanBounds(r, seq, rows);
    rows->seqs.push_back(seq);
  }
  rows->main_angles.Compute(model_.rope(model::RopeTable::kMain), rows->pos);
  rows->compress_angles.Compute(model_.rope(model::RopeTable::kCompress), rows->pos);
}

void Engine::Embed(const RowBatch& rows, float* x) {
  const model::ModelConfig& c = model_.config();
  const int64_t d = c.hidden_size;
  const int hc = c.hc_mult;
  ops_.ForRows(rows.num_rows(), [&](int64_t r) {
    float* streams = x + r * hc * d;
    if (const float* given = rows.embedding[static_cast<size_t>(r)]; given != nullptr) {
      std::memcpy(streams, given, sizeof(float) * d);
    } else {
      kernels::DequantizeRows(model_.weights().embed, rows.ids[r], rows.ids[r] + 1, streams);
    }
    for (int i = 1; i < hc; ++i) std::memcpy(streams + i * d, streams, sizeof(float) * d);
  }, 16);
}

void Engine::Head(const model::HcWeights& hc, const std::vector<float>& norm, const float* x,
                  const std::vector<int64_t>& rows, float* logits) {
  const model::ModelConfig& c = model_.config();
  const int64_t d = c.hidden_size, width = c.hc_dim(), n = static_cast<int64_t>(rows.size());
  if (n == 0) return;
  base::AlignedVector<float> gathered(static_cast<size_t>(n * width));
  for (int64_t i = 0; i < n; ++i) std::memcpy(gathered.data() + i * width, x + rows[i] * width, sizeof(float) * width);
  head_in_.resize(static_cast<size_t>(n * d));
  if (c.is_v41()) {
    // V4.1 has no hc_head: the last FFN site's pre collapses the streams.
    const int streams = c.hc_mult;
    head_mix_.resize(static_cast<size_t>(n * streams));
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(head_mix_.data() + i * streams, scratch_.lagged_pre.data() + rows[i] * streams,
                  sizeof(float) * streams);
    HcCollapse(ops_, c, gathered.data(), head_mix_.data(), n, head_in_.data());
  } else {
    HcHead(ops_, c, hc, gathered.data(), n, head_in_.data(), &head_mix_);
  }
  ops_.RmsNormRows(head_in_.data(), norm.data(), n, d, d, static_cast<float>(c.norm_eps), head_in_.data(), d);
  // With QAT on, the final norm's output in BF16, as REF casts a norm's output to the activation
  // dtype before its fp32 head (v4-architecture.md sections 3.1 and 4.5): the BF16 head's
  // products are then exact BF16 x BF16, which the AVX512-BF16 kernels compute with dot
  // products in the f32 path's order (kernels/gemm: MatMulArgs::bf16_pairs). QAT off keeps f32.
  if (ops_.qat()) ops_.RoundRowsToBf16(head_in_.data(), n, d, d);
  ops_.Linear(model_.weights().head, head_in_.data(), n, d, logits, c.vocab_size);
}

base::Result<ForwardResult> Engine::Forward(std::span<const ForwardRequest> batch) {
  FS_RETURN_IF_ERROR(Validate(batch));
  ops_.ResetStats();
  const model::ModelConfig& c = model_.config();
  for (const ForwardRequest& r : batch) {
    if (r.undo == nullptr) continue;
    r.undo->Begin(*r.state);
    r.undo->tokens.assign(r.tokens.begin(), r.tokens.end());
  }
  RowBatch rows;
  BuildRows(batch, &rows);
  const int64_t width = c.hc_dim();
  x_.resize(static_cast<size_t>(rows.num_rows() * width));
  {
    Ops::ScopedPhase t(ops_, Phase::kEmbed);
    Embed(rows, x_.data());
  }
  if (c.is_v41()) {  // layer 0's attention collapses stream 0 only
    scratch_.lagged_pre.assign(static_cast<size_t>(rows.num_rows() * c.hc_mult), 0.0f);
    for (int64_t r = 0; r < rows.num_rows(); ++r) scratch_.lagged_pre[static_cast<size_t>(r * c.hc_mult)] = 1.0f;
  }
  const bool dspark = c.dspark.present() && std::any_of(batch.begin(), batch.end(), [](const ForwardRequest& r) {
    return r.state->with_mtp();
  });
  for (int layer = 0; layer < c.num_layers; ++layer) {
    for (int slot = 0; dspark && slot < c.dspark.stages(); ++slot)
      if (c.dspark.target_layers[static_cast<size_t>(slot)] == layer) CaptureDsparkFeatures(slot, rows, x_.data());
    RunBlock(ops_, model_, layer, rows, x_.data(), &scratch_);
  }
  if (dspark) InjectDsparkContext(rows);
  for (const SeqRows& seq : rows.seqs)
    if (seq.undo != nullptr && seq.state->with_mtp() && c.num_mtp_layers > 0)
      seq.undo->streams.assign(x_.data() + seq.row_begin * width, x_.data() + seq.row_end * width);

  ForwardResult out;
  out.vocab_size = c.vocab_size;
  std::vector<int64_t> logit_rows;
  out.logits_begin.push_back(0);
  for (size_t i = 0; i < batch.size(); ++i) {
    const SeqRows& seq = rows.seqs[i];
    if (batch[i].logits == LogitsMode::kAll) {
      for (int64_t r = seq.row_begin; r < seq.row_end; ++r) logit_rows.push_back(r);
    } else if (batch[i].logits == LogitsMode::kLast) {
      logit_rows.push_back(seq.row_end - 1);
    }
    out.logits_begin.push_back(static_cast<int64_t>(logit_rows.size()));
  }
  // Every element is written by the head: a recycled buffer is grown, never cleared.
  out.logits = std::move(spare_logits_);
  spare_logits_ = {};
  out.logits.resize(logit_rows.size() * static_cast<size_t>(c.vocab_size));
  {
    Ops::ScopedPhase t(ops_, Phase::kHead);
    Head(model_.weights().hc_head, model_.weights().norm, x_.data(), logit_rows, out.logits.data());
  }
  RunMtp(batch, rows, x_.data(), &out);
  for (size_t i = 0; i < rows.seqs.size(); ++i) {
    const SeqRows& seq = rows.seqs[i];
    seq.state->set_position(seq.start_pos + (seq.row_end - seq.row_begin));
    if (dspark && seq.state->with_mtp()) seq.state->set_mtp_position(seq.state->position());  // no lag
    seq.state->PushTokens(batch[i].tokens);
  }
  stats_ = ops_.stats();
  return out;
}

void Engine::Recycle(ForwardResult&& used) {
  // A buffer larger than this (a long prompt's logits of every row) is let go.
  constexpr size_t kMostKeptFloats = size_t{64} << 20;
  auto keep = [](std::vector<float>& spare, std::vector<float>& from) {
    if (from.capacity() > spare.capacity() && from.capacity() <= kMostKeptFloats) spare = std::move(from);
  };
  keep(spare_logits_, used.logits);
  keep(spare_mtp_logits_, used.mtp_logits);
}

}  // namespace flashserve::engine
