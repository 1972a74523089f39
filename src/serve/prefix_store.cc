// Prefix store over the tiered KV store (serve/prefix_store.h).
#include "serve/prefix_store.h"

#include <algorithm>

#include "base/log.h"
#include "engine/state_codec.h"
#include "kernels/gemm/matmul.h"
#include "kvstore/object_file.h"
#include "model/config.h"

namespace flashserve::serve {

using kvstore::ObjectKey;
using kvstore::ObjectKind;
using kvstore::Tier;

PrefixStore::PrefixStore(const engine::Model& model, std::string fingerprint, kvstore::KvStore* store)
    : model_(model), fingerprint_(std::move(fingerprint)), store_(store) {}

std::vector<kv::BlockHash> PrefixStore::Hashes(const std::string& ns, std::span<const int32_t> tokens,
                                               int64_t limit) const {
  const int64_t max_blocks = std::min<int64_t>(static_cast<int64_t>(tokens.size()), limit) / kv::kBlockTokens;
  if (max_blocks <= 0) return {};
  return kv::BlockHashes(kv::HashSeed(fingerprint_, ns),
                         tokens.subspan(0, static_cast<size_t>(max_blocks * kv::kBlockTokens)));
}

int64_t PrefixStore::Probe(const std::string& ns, std::span<const int32_t> tokens, int64_t limit, PrefixMatch* match) {
  *match = PrefixMatch{};
  std::vector<kvstore::Payload> blocks;
  for (const kv::BlockHash& h : Hashes(ns, tokens, limit)) {
    kvstore::Payload block = store_->GetMemory(ObjectKey{ObjectKind::kBlock, h});
    if (!block) break;
    blocks.push_back(std::move(block));
    // Boundaries exist only at persist points: not finding one is no L1 miss.
    if (kvstore::Payload boundary = store_->GetMemory(ObjectKey{ObjectKind::kBoundary, h}, /*count_miss=*/false)) {
      match->num_blocks = static_cast<int64_t>(blocks.size());
      match->blocks = blocks;
      match->boundary = std::move(boundary);
    }
  }
  return match->num_blocks * kv::kBlockTokens;
}

std::unique_ptr<engine::SequenceState> PrefixStore::Restore(const PrefixMatch& match, bool with_mtp) {
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

FetchPlan PrefixStore::PlanFetch(const std::string& ns, std::span<const int32_t> tokens, int64_t limit) const {
  FetchPlan plan;
  std::vector<ObjectKey> missing, resident;  // not in L1 / in L1, for the blocks seen so far
  std::vector<Tier> tiers;
  for (const kv::BlockHash& h : Hashes(ns, tokens, limit)) {
    const ObjectKey block{ObjectKind::kBlock, h}, boundary{ObjectKind::kBoundary, h};
    const std::optional<Tier> block_tier = store_->Locate(block);
    if (!block_tier) break;
    tiers.push_back(*block_tier);
    (*block_tier != Tier::kMemory ? missing : resident).push_back(block);
    const std::optional<Tier> boundary_tier = store_->Locate(boundary);
    if (!boundary_tier) continue;
    const int64_t k = static_cast<int64_t>(tiers.size());
    const bool all_memory = missing.empty() && *boundary_tier == Tier::kMemory;
    if (all_memory) plan.memory_blocks = k;
    plan.total_blocks = k;
    plan.keys = missing;
    plan.resident = resident;
    (*boundary_tier != Tier::kMemory ? plan.keys : plan.resident).push_back(boundary);
    plan.block_tiers = tiers;
  }
  for (const ObjectKey& key : plan.keys) plan.slowest = std::max(plan.slowest, store_->Locate(key).value_or(Tier::kMemory));
  return plan;
}

int64_t PrefixStore::EstimateFetchBytes(int64_t blocks) const {
  const int64_t block = stored_blocks_ > 0 ? stored_block_bytes_ / stored_blocks_ : 64 << 10;
  const int64_t boundary = stored_boundaries_ > 0 ? stored_boundary_bytes_ / stored_boundaries_ : 1 << 20;
  return blocks * block + boundary;
}

void PrefixStore::Persist(const std::string& ns, std::span<const int32_t> tokens, const engine::SequenceState& state,
                          const std::string& ttl_class) {
  const int64_t position = state.position();
  if (position <= 0 || position % kv::kBlockTokens != 0 || static_cast<int64_t>(tokens.size()) < position) return;
  const std::vector<kv::BlockHash> hashes = Hashes(ns, tokens, position);
  for (size_t b = 0; b < hashes.size(); ++b) {
    const ObjectKey key{ObjectKind::kBlock, hashes[b]};
    if (store_->Locate(key)) continue;
    auto payload = base::MakeSharedBytes(
        engine::SerializeBlock(state, model_.config(), model_.plan(), static_cast<int64_t>(b)));
    stored_block_bytes_ += static_cast<int64_t>(payload->size());
    ++stored_blocks_;
    store_->Put(key, std::move(payload), static_cast<int64_t>(b + 1) * kv::kBlockTokens, ttl_class);
  }
  auto boundary = base::MakeSharedBytes(engine::SerializeBoundary(state, model_.config(), model_.plan()));
  stored_boundary_bytes_ += static_cast<int64_t>(boundary->size());
  ++stored_boundaries_;
  store_->Put(ObjectKey{ObjectKind::kBoundary, hashes.back()}, std::move(boundary), position, ttl_class);
}

std::string ModelFingerprint(const engine::Model& model, const engine::EngineOptions& options) {
  std::string digest_input = model::ModelConfigToJson(model.config());
  digest_input += options.qat ? "|qat" : "|noqat";
  digest_input += "|numerics=" + (options.reference_kernels ? std::string("reference") : kernels::NumericsName());
  digest_input += "|state-v2";
  // Readers delete objects of another format version as corrupt, so a new object format must
  // live under another directory: workers of two versions sharing an L3 then never meet.
  // (Version 1 adds nothing, which keeps the directories of existing stores.)
  if (kvstore::kObjectFormatVersion != 1) {
    digest_input += "|object-v" + std::to_string(kvstore::kObjectFormatVersion);
  }
  const model::Checkpoint& ckpt = model.checkpoint();
  for (const std::string& name : ckpt.Names()) {
    const model::TensorInfo* t = ckpt.Find(name);
    digest_input += "|" + name + ":" + std::string(model::DTypeName(t->dtype)) + t->ShapeString();
    digest_input.append(reinterpret_cast<const char*>(t->data), std::min<size_t>(t->num_bytes, 32));
  }
  return kv::ToHex(kv::Sha256(digest_input));
}

}  // namespace flashserve::serve
