// Prefix store over the tiered KV store (serve/prefix_store.h).
#include "serve/prefix_store.h"

#include <algorithm>

#include <fmt/format.h>

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

kv::BlockHash PrefixStore::Seed(const std::string& cache_namespace) const {
  return kv::HashSeed(fingerprint_, cache_namespace);
}

std::vector<kv::BlockHash> PrefixStore::Hashes(const kv::BlockHash& seed, std::span<const int32_t> tokens,
                                               std::span<const kv::ImageExtent> images, int64_t limit) const {
  const int64_t max_blocks = std::min<int64_t>(static_cast<int64_t>(tokens.size()), limit) / kv::kBlockTokens;
  if (max_blocks <= 0) return {};
  return kv::BlockHashes(seed, tokens.subspan(0, static_cast<size_t>(max_blocks * kv::kBlockTokens)), images);
}

std::optional<Tier> PrefixStore::InMemory(const ObjectKey& key) const {
  const std::optional<Tier> tier = store_->Locate(key);
  return tier == Tier::kMemory ? tier : std::nullopt;
}

kv::ResumePoint PrefixStore::Lookup(const kv::BlockHash& seed, std::span<const int32_t> tokens,
                                    std::span<const kv::ImageExtent> images) const {
  const int64_t limit = kv::MaxResumeBlocks(static_cast<int64_t>(tokens.size())) * kv::kBlockTokens;
  const std::vector<kv::BlockHash> hashes = Hashes(seed, tokens, images, limit);
  return kv::LongestResumePoint(std::span<const kv::BlockHash>(hashes), [&](const ObjectKey& k) { return InMemory(k); });
}

Restored PrefixStore::Restore(const kv::BlockHash& seed, std::span<const int32_t> tokens,
                              std::span<const kv::ImageExtent> images, int64_t blocks, bool with_mtp) {
  const std::vector<kv::BlockHash> hashes = Hashes(seed, tokens, images, blocks * kv::kBlockTokens);
  if (blocks <= 0 || static_cast<int64_t>(hashes.size()) != blocks) return {};
  std::vector<kvstore::Payload> payloads;
  for (const kv::BlockHash& h : hashes) {
    payloads.push_back(store_->GetMemory(ObjectKey{ObjectKind::kBlock, h}));
    if (!payloads.back()) return {nullptr, /*objects_gone=*/true};  // evicted since the lookup
  }
  const kvstore::Payload boundary = store_->GetMemory(ObjectKey{ObjectKind::kBoundary, hashes.back()});
  if (!boundary) return {nullptr, /*objects_gone=*/true};
  std::vector<std::string_view> views;
  for (const auto& p : payloads) views.push_back(*p);
  auto state = engine::AssembleState(*boundary, views, model_.config(), model_.plan());
  if (!state.ok()) {
    FS_LOG(kWarning, "prefix cache: cannot restore a cached prefix ({}); recomputing", state.error().ToString());
    return {};
  }
  (*state)->SetMtp(with_mtp, model_.config(), model_.plan());  // stored by a worker speculating otherwise
  return {std::move(state).value(), false};
}

FetchPlan PrefixStore::PlanFetch(const kv::BlockHash& seed, std::span<const int32_t> tokens,
                                 std::span<const kv::ImageExtent> images) {
  FetchPlan plan;
  const int64_t limit = kv::MaxResumeBlocks(static_cast<int64_t>(tokens.size())) * kv::kBlockTokens;
  const std::vector<kv::BlockHash> hashes = Hashes(seed, tokens, images, limit);
  const std::span<const kv::BlockHash> blocks(hashes);
  std::optional<ObjectKey> first_missing;  // the first block the walk through L1 did not find
  plan.memory = kv::LongestResumePoint(blocks, [&](const ObjectKey& key) {
    const std::optional<Tier> tier = InMemory(key);
    if (!tier && key.kind == ObjectKind::kBlock) first_missing = key;
    return tier;
  });
  if (first_missing) (void)store_->GetMemory(*first_missing);  // counts the L1 miss
  plan.any = kv::LongestResumePoint(blocks, [&](const ObjectKey& key) {
    const std::optional<Tier> tier = store_->Locate(key);
    if (tier && key.kind == ObjectKind::kBlock) plan.block_tiers.push_back(*tier);  // asked in block order
    return tier;
  });
  plan.block_tiers.resize(static_cast<size_t>(plan.any.blocks));  // blocks past the last boundary do not count
  for (int64_t b = 0; b < plan.any.blocks; ++b) {
    const ObjectKey block{ObjectKind::kBlock, hashes[static_cast<size_t>(b)]};
    (plan.block_tiers[static_cast<size_t>(b)] == Tier::kMemory ? plan.resident : plan.keys).push_back(block);
  }
  if (plan.any.blocks > 0) {
    const ObjectKey boundary{ObjectKind::kBoundary, hashes[static_cast<size_t>(plan.any.blocks - 1)]};
    (plan.any.boundary_tier == Tier::kMemory ? plan.resident : plan.keys).push_back(boundary);
  }
  return plan;
}

int64_t PrefixStore::EstimateFetchBytes(int64_t blocks) const {
  const int64_t block = stored_blocks_ > 0 ? stored_block_bytes_ / stored_blocks_ : 64 << 10;
  const int64_t boundary = stored_boundaries_ > 0 ? stored_boundary_bytes_ / stored_boundaries_ : 1 << 20;
  return blocks * block + boundary;
}

void PrefixStore::Persist(const kv::BlockHash& seed, std::span<const int32_t> tokens,
                          std::span<const kv::ImageExtent> images, const engine::SequenceState& state,
                          const std::string& ttl_class) {
  const int64_t position = state.position();
  if (position <= 0 || position % kv::kBlockTokens != 0 || static_cast<int64_t>(tokens.size()) < position) return;
  const std::vector<kv::BlockHash> hashes = Hashes(seed, tokens, images, position);
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

std::vector<CacheObject> PrefixStore::Export(const kv::BlockHash& seed, std::span<const int32_t> prompt,
                                             int64_t from_block, int64_t upto_tokens) const {
  const int64_t prompt_tokens = static_cast<int64_t>(prompt.size());
  const int64_t max_blocks = upto_tokens >= 0 ? std::min(upto_tokens, prompt_tokens) / kv::kBlockTokens
                                              : kv::MaxResumeBlocks(prompt_tokens);
  const std::vector<kv::BlockHash> hashes = Hashes(seed, prompt, {}, max_blocks * kv::kBlockTokens);  // text only
  const kv::ResumePoint point = kv::LongestResumePoint(static_cast<int64_t>(hashes.size()), [&](ObjectKind kind, int64_t i) {
    if (kind == ObjectKind::kBlock && i < from_block) return std::optional<Tier>(Tier::kMemory);  // the receiver's
    return InMemory(ObjectKey{kind, hashes[static_cast<size_t>(i)]});
  });
  const int64_t k = point.blocks;
  if (k == 0 || (upto_tokens >= 0 && k != max_blocks)) return {};
  std::vector<CacheObject> out;
  for (int64_t b = std::max<int64_t>(from_block, 0); b < k; ++b) {
    const kv::BlockHash& h = hashes[static_cast<size_t>(b)];
    kvstore::Payload block = store_->GetMemory(ObjectKey{ObjectKind::kBlock, h});
    if (!block) return {};
    out.push_back({ObjectKind::kBlock, h, (b + 1) * kv::kBlockTokens, std::move(block)});  // as Persist stores it
  }
  const kv::BlockHash& last = hashes[static_cast<size_t>(k - 1)];
  kvstore::Payload boundary = store_->GetMemory(ObjectKey{ObjectKind::kBoundary, last}, /*count_miss=*/false);
  if (!boundary) return {};
  out.push_back({ObjectKind::kBoundary, last, k * kv::kBlockTokens, std::move(boundary)});
  return out;
}

void PrefixStore::Import(const CacheObject& object) {
  if (object.payload) store_->Put({object.kind, object.hash}, object.payload, object.tokens, "");
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
  std::vector<const model::TensorInfo*> tensors;
  for (const std::string& name : ckpt.Names()) tensors.push_back(ckpt.Find(name));
  // Read from the files, not the mapping: the pages of matrices served from the packed copy
  // (engine/model_packing.cc) stay out of the resident set.
  const base::Result<std::vector<std::string>> prefixes = ckpt.ReadPrefixes(tensors, 32);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const model::TensorInfo* t = tensors[i];
    digest_input += "|" + t->name + ":" + std::string(model::DTypeName(t->dtype)) + t->ShapeString();
    if (prefixes.ok()) digest_input += (*prefixes)[i];
    else digest_input.append(reinterpret_cast<const char*>(t->data), std::min<size_t>(t->num_bytes, 32));
  }
  return kv::ToHex(kv::Sha256(digest_input));
}

std::string TowerFingerprint(const engine::Model& model) {
  const model::ModelConfig& c = model.config();
  if (!c.vision.present()) return "";
  std::string digest_input = fmt::format("tower|{}|{}|{}|{}|{}|{}|{}|{}", c.vision.num_layers, c.vision.dim,
                                         c.vision.num_heads, c.vision.inter_dim, c.vision.patch_size,
                                         c.vision.downsample_ratio, c.vision.norm_eps, c.hidden_size);
  const model::Checkpoint& ckpt = model.checkpoint();
  for (const std::string& name : ckpt.Names()) {
    if (!name.starts_with("vision.") && !name.starts_with("aligner.") && !name.starts_with("image_")) continue;
    const model::TensorInfo* t = ckpt.Find(name);
    digest_input += "|" + name + ":" + std::string(model::DTypeName(t->dtype)) + t->ShapeString();
    const size_t edge = std::min<size_t>(t->num_bytes, 32);
    digest_input.append(reinterpret_cast<const char*>(t->data), edge);
    digest_input.append(reinterpret_cast<const char*>(t->data) + t->num_bytes - edge, edge);
  }
  return kv::ToHex(kv::Sha256(digest_input));
}

}  // namespace flashserve::serve
