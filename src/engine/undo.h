// What one forward call changed in a sequence's state, kept so that Engine::Rollback can take the
// state back to any position inside the call (speculative verification keeps only the accepted
// prefix): the ring rows it overwrote, the compressor carries it started from and the rows it
// folded (replayed up to the new end), entry counts, MTP streams and Engram look-back.
// Plain data filled by the engine inside Forward; owned by the caller, one per sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/state.h"

namespace flashserve::engine {

// One compressor's rows of the call, in position order: the projected kv and gate rows as
// the fold read them (gate before the learned position bias), and the carry before the call.
struct FoldLog {
  CompressorState start;
  std::vector<int64_t> pos;
  std::vector<float> kv, gate;  // [rows * width]
};

struct LayerUndo {
  std::vector<int64_t> ring_pos;  // positions whose ring slot the call wrote, in order
  std::vector<float> ring_old;    // those slots' rows before the call
  size_t compressed_before = 0, index_keys_before = 0;
  FoldLog main, index;            // index: V4 CSA's indexer-key compressor
};

struct UndoLog {
  int64_t position = 0;           // the state's position before the call
  int64_t mtp_position = 0;
  std::vector<float> pending_hidden;
  std::vector<int32_t> recent_tokens;
  std::vector<int32_t> tokens;    // the call's tokens
  std::vector<float> streams;     // MTP states: the trunk's output streams of every row
  std::vector<LayerUndo> layers;  // per layer of the state

  // Starts a log of the next call on `state` (the carries and sizes it starts from).
  void Begin(const SequenceState& state);
};

}  // namespace flashserve::engine
