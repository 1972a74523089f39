// Starting a forward call's undo log (engine/undo.h).
#include "engine/undo.h"

namespace flashserve::engine {

void UndoLog::Begin(const SequenceState& state) {
  position = state.position();
  mtp_position = state.mtp_position();
  pending_hidden = state.pending_hidden();
  recent_tokens = state.recent_tokens();
  tokens.clear();
  streams.clear();
  layers.assign(static_cast<size_t>(state.num_layers()), LayerUndo{});
  for (int i = 0; i < state.num_layers(); ++i) {
    const LayerState& ls = state.layer(i);
    LayerUndo& u = layers[static_cast<size_t>(i)];
    u.compressed_before = ls.compressed.size();
    u.index_keys_before = ls.index_keys.size();
    u.main.start = ls.compressor;
    u.index.start = ls.index_compressor;
  }
}

}  // namespace flashserve::engine
