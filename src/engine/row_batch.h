// The rows one layer stack processes in a forward call: token ids and absolute positions of
// every row, grouped per sequence into runs of consecutive positions, plus per-row RoPE angles.
// Plain data built by the engine for each call; read by the layer code.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/state.h"
#include "engine/undo.h"
#include "kernels/norm_rope/norm_rope.h"

namespace flashserve::engine {

struct SeqRows {
  int64_t row_begin = 0;
  int64_t row_end = 0;
  int64_t start_pos = 0;  // position of row_begin; rows are consecutive positions
  SequenceState* state = nullptr;
  UndoLog* undo = nullptr;  // the call is logged for a rollback (null: not)
};

struct RowAngles {
  int half = 0;             // rope pairs
  std::vector<float> cos;   // [rows * half]
  std::vector<float> sin;
  void Compute(const kernels::RopeTable& table, const std::vector<int64_t>& pos);
  const float* Cos(int64_t row) const { return cos.data() + row * half; }
  const float* Sin(int64_t row) const { return sin.data() + row * half; }
};

struct RowBatch {
  std::vector<int32_t> ids;
  std::vector<const float*> embedding;  // per row: a given input embedding, or nullptr (look up)
  std::vector<int64_t> pos;
  std::vector<SeqRows> seqs;
  // Per row, the first and last positions of its bidirectional span (-1: causal); empty when
  // every row is causal. The raw window of such a row is [min(first, t - W + 1), last].
  std::vector<int64_t> span_first, span_last;
  RowAngles main_angles, compress_angles;
  int64_t num_rows() const { return static_cast<int64_t>(ids.size()); }
  const RowAngles& angles(bool compress) const { return compress ? compress_angles : main_angles; }
};

}  // namespace flashserve::engine
