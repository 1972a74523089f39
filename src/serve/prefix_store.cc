// Prefix store (serve/prefix_store.h).
#include "serve/prefix_store.h"

#include "base/log.h"
#include "engine/state_codec.h"
#include "model/config.h"

namespace flashserve::serve {

PrefixStore::PrefixStore(const engine::Model& model, std::string fingerprint, int64_t capacity_bytes)
    : model_(model), fingerprint_(std::move(fingerprint)), cache_(capacity_bytes) {}

int64_t PrefixStore::Probe(const std::string& ns, std::span<const int32_t> tokens, int64_t limit,
                           kv::PrefixMatch* match) {
  const int64_t max_blocks = std::min<int64_t>(static_cast<int64_t>(tokens.size()), limit) / kv::kBlockTokens;
  if (max_blocks <= 0) return 0;
  std::vector<kv::BlockHash> hashes =
      kv::BlockHashes(kv::HashSeed(fingerprint_, ns), tokens.subspan(0, static_cast<size_t>(max_blocks * kv::kBlockTokens)));
  *match = cache_.Lookup(hashes);
  return match->num_blocks * kv::kBlockTokens;
}

std::unique_ptr<engine::SequenceState> PrefixStore::Restore(const kv::PrefixMatch& match, bool with_mtp) {
  std::vector<std::string_view> blocks;
  for (const auto& b : match.blocks) blocks.push_back(*b);
  auto state = engine::AssembleState(*match.boundary, blocks, model_.config(), model_.plan());
  if (!state.ok()) {
    FS_LOG(kWarning, "prefix cache: cannot restore a cached prefix ({}); recomputing", state.error().ToString());
    return nullptr;
  }
  if ((*state)->with_mtp() != with_mtp) return nullptr;
  return std::move(state).value();
}

void PrefixStore::Persist(const std::string& ns, std::span<const int32_t> tokens, const engine::SequenceState& state) {
  const int64_t position = state.position();
  if (position <= 0 || position % kv::kBlockTokens != 0 || static_cast<int64_t>(tokens.size()) < position) return;
  std::vector<kv::BlockHash> hashes = kv::BlockHashes(kv::HashSeed(fingerprint_, ns), tokens.subspan(0, position));
  for (size_t b = 0; b < hashes.size(); ++b) {
    if (cache_.HasBlock(hashes[b])) continue;
    cache_.PutBlock(hashes[b], std::make_shared<const std::string>(
                                   engine::SerializeBlock(state, model_.config(), model_.plan(), static_cast<int64_t>(b))));
  }
  cache_.PutBoundary(hashes.back(),
                     std::make_shared<const std::string>(engine::SerializeBoundary(state, model_.config(), model_.plan())));
}

std::string ModelFingerprint(const engine::Model& model, bool qat) {
  std::string digest_input = model::ModelConfigToJson(model.config());
  digest_input += qat ? "|qat" : "|noqat";
  digest_input += "|state-v2";
  const model::Checkpoint& ckpt = model.checkpoint();
  for (const std::string& name : ckpt.Names()) {
    const model::TensorInfo* t = ckpt.Find(name);
    digest_input += "|" + name + ":" + std::string(model::DTypeName(t->dtype)) + t->ShapeString();
    digest_input.append(reinterpret_cast<const char*>(t->data), std::min<size_t>(t->num_bytes, 32));
  }
  return kv::ToHex(kv::Sha256(digest_input));
}

}  // namespace flashserve::serve
