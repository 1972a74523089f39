// SequenceState serialisation (engine/state_codec.h). Layout (little-endian):
//   "FSST" u32 version | flags u32 | position i64 | mtp_position i64 | num_layers u32
//   per layer: ring section, compressor pools, entry sections (main, indexer)
//   pending MTP streams | FNV-1a 64 checksum of everything before it.
#include "engine/state_codec.h"

#include <cstring>

#include "base/bytes.h"
#include "engine/entry_codec.h"

namespace flashserve::engine {

using base::ByteReader;
using base::ByteWriter;
using base::Error;
using base::ErrorCode;

namespace {

constexpr uint32_t kMagic = 0x54535346;  // "FSST"
constexpr uint32_t kVersion = 1;

Error Corrupt(const std::string& what) { return Error(ErrorCode::kDataLoss, "sequence state: " + what); }

// Writes count rows with the first encoding (of the candidates) that is exact.
void PutEntries(ByteWriter* w, const float* rows, int64_t count, int dim, int nope, EntryEncoding preferred) {
  std::string body;
  EntryEncoding enc = preferred;
  if (!EncodeEntries(enc, rows, count, dim, nope, &body)) {
    enc = EntryEncoding::kRawF32;
    body.clear();
    EncodeEntries(enc, rows, count, dim, nope, &body);
  }
  w->Put<uint8_t>(static_cast<uint8_t>(enc));
  w->Put<uint64_t>(static_cast<uint64_t>(count));
  w->Put<uint64_t>(body.size());
  w->PutBytes(body.data(), body.size());
}

bool GetEntries(ByteReader* r, int dim, int nope, int64_t expected_count, std::vector<float>* out) {
  uint8_t enc;
  uint64_t count, size;
  std::string_view body;
  if (!r->Get(&enc) || !r->Get(&count) || !r->Get(&size) || !r->View(size, &body)) return false;
  if (enc > 2 || static_cast<int64_t>(count) != expected_count) return false;
  out->assign(static_cast<size_t>(count) * dim, 0.0f);
  return DecodeEntries(static_cast<EntryEncoding>(enc), body, static_cast<int64_t>(count), dim, nope, out->data());
}

void PutPool(ByteWriter* w, const SoftmaxPool& p, int dim) {
  w->Put<int32_t>(p.count);
  if (p.count == 0) return;  // an empty pool is fully described by its dimension
  w->PutBytes(p.max.data(), sizeof(float) * dim);
  w->PutBytes(p.sum.data(), sizeof(float) * dim);
  w->PutBytes(p.wsum.data(), sizeof(float) * dim);
}

bool GetPool(ByteReader* r, int dim, SoftmaxPool* p) {
  p->Reset(dim);
  if (!r->Get(&p->count) || p->count < 0) return false;
  if (p->count == 0) return true;
  return r->GetBytes(p->max.data(), sizeof(float) * dim) && r->GetBytes(p->sum.data(), sizeof(float) * dim) &&
         r->GetBytes(p->wsum.data(), sizeof(float) * dim);
}

}  // namespace

class StateCodec {
 public:
  static std::string Serialize(const SequenceState& s, const model::ModelConfig& c, const model::LayerPlan& plan,
                               StateSizes* sizes);
  static base::Result<std::unique_ptr<SequenceState>> Deserialize(std::string_view bytes, const model::ModelConfig& c,
                                                                  const model::LayerPlan& plan);
};

std::string StateCodec::Serialize(const SequenceState& s, const model::ModelConfig& c, const model::LayerPlan& plan,
                                  StateSizes* sizes) {
  ByteWriter w;
  StateSizes local;
  w.Put<uint32_t>(kMagic);
  w.Put<uint32_t>(kVersion);
  w.Put<uint32_t>(s.with_mtp_ ? 1u : 0u);
  w.Put<int64_t>(s.position_);
  w.Put<int64_t>(s.mtp_position_);
  w.Put<uint32_t>(static_cast<uint32_t>(s.layers_.size()));
  for (size_t i = 0; i < s.layers_.size(); ++i) {
    const LayerState& ls = s.layers_[i];
    const model::LayerSpec& spec = plan[i];
    const int64_t pos = spec.is_mtp ? s.mtp_position_ : s.position_;
    // The next query at `pos` needs positions [pos - window + 1, pos): saved oldest first.
    const int64_t keep = std::min<int64_t>(pos, ls.window - 1);
    std::vector<float> ring(static_cast<size_t>(keep * ls.dim));
    for (int64_t k = 0; k < keep; ++k) {
      const int64_t p = pos - keep + k;
      std::memcpy(ring.data() + k * ls.dim, ls.ring.data() + (p % ls.window) * ls.dim, sizeof(float) * ls.dim);
    }
    size_t before = w.size();
    PutEntries(&w, ring.data(), keep, ls.dim, c.nope_dim(), EntryEncoding::kFp8Nope);
    local.rings += static_cast<int64_t>(w.size() - before);
    before = w.size();
    if (spec.compress_ratio > 0) {
      PutPool(&w, ls.compressor.cur, ls.dim);
      if (ls.compressor.overlap) PutPool(&w, ls.compressor.next, ls.dim);
    }
    if (spec.attention == model::AttentionKind::kCsa) {
      PutPool(&w, ls.index_compressor.cur, ls.index_dim);
      PutPool(&w, ls.index_compressor.next, ls.index_dim);
    }
    local.carries += static_cast<int64_t>(w.size() - before);
    before = w.size();
    if (spec.compress_ratio > 0)
      PutEntries(&w, ls.compressed.data(), ls.num_entries(), ls.dim, c.nope_dim(), EntryEncoding::kFp8Nope);
    if (spec.attention == model::AttentionKind::kCsa)
      PutEntries(&w, ls.index_keys.data(), ls.num_entries(), ls.index_dim, 0, EntryEncoding::kFp4);
    local.entries += static_cast<int64_t>(w.size() - before);
  }
  w.Put<uint64_t>(s.pending_hidden_.size());
  w.PutBytes(s.pending_hidden_.data(), sizeof(float) * s.pending_hidden_.size());
  local.carries += 8 + static_cast<int64_t>(sizeof(float) * s.pending_hidden_.size());
  w.Put<uint64_t>(base::Fnv1a64(w.str()));
  local.total = static_cast<int64_t>(w.size());
  if (sizes) *sizes = local;
  return std::move(w.str());
}

base::Result<std::unique_ptr<SequenceState>> StateCodec::Deserialize(std::string_view bytes,
                                                                     const model::ModelConfig& c,
                                                                     const model::LayerPlan& plan) {
  if (bytes.size() < 8) return Corrupt("too short");
  uint64_t stored_sum;
  std::memcpy(&stored_sum, bytes.data() + bytes.size() - 8, 8);
  if (base::Fnv1a64(bytes.substr(0, bytes.size() - 8)) != stored_sum) return Corrupt("checksum mismatch");
  ByteReader r(bytes.substr(0, bytes.size() - 8));
  uint32_t magic, version, flags, num_layers;
  int64_t position, mtp_position;
  if (!r.Get(&magic) || magic != kMagic) return Corrupt("bad magic");
  if (!r.Get(&version) || version != kVersion) return Corrupt("unsupported version " + std::to_string(version));
  if (!r.Get(&flags) || !r.Get(&position) || !r.Get(&mtp_position) || !r.Get(&num_layers)) return Corrupt("truncated header");
  auto s = std::make_unique<SequenceState>(c, plan, (flags & 1u) != 0);
  if (num_layers != s->layers_.size()) return Error(ErrorCode::kBadState, "sequence state: layer count does not match the model");
  if (position < 0 || position > c.max_position || mtp_position < 0 || mtp_position > position)
    return Corrupt("bad position");
  s->position_ = position;
  s->mtp_position_ = mtp_position;
  for (size_t i = 0; i < s->layers_.size(); ++i) {
    LayerState& ls = s->layers_[i];
    const model::LayerSpec& spec = plan[i];
    const int64_t pos = spec.is_mtp ? mtp_position : position;
    const int64_t keep = std::min<int64_t>(pos, ls.window - 1);
    std::vector<float> ring;
    if (!GetEntries(&r, ls.dim, c.nope_dim(), keep, &ring)) return Corrupt("layer " + std::to_string(i) + " ring");
    for (int64_t k = 0; k < keep; ++k)
      std::memcpy(ls.ring.data() + ((pos - keep + k) % ls.window) * ls.dim, ring.data() + k * ls.dim, sizeof(float) * ls.dim);
    bool ok = true;
    if (spec.compress_ratio > 0) {
      ok = GetPool(&r, ls.dim, &ls.compressor.cur) && (!ls.compressor.overlap || GetPool(&r, ls.dim, &ls.compressor.next));
    }
    if (ok && spec.attention == model::AttentionKind::kCsa)
      ok = GetPool(&r, ls.index_dim, &ls.index_compressor.cur) && GetPool(&r, ls.index_dim, &ls.index_compressor.next);
    if (ok && spec.compress_ratio > 0) ok = GetEntries(&r, ls.dim, c.nope_dim(), pos / spec.compress_ratio, &ls.compressed);
    if (ok && spec.attention == model::AttentionKind::kCsa) ok = GetEntries(&r, ls.index_dim, 0, pos / 4, &ls.index_keys);
    if (!ok) return Corrupt("layer " + std::to_string(i) + " compressed state");
  }
  uint64_t pending;
  if (!r.Get(&pending) || (pending != 0 && pending != static_cast<uint64_t>(c.hc_dim()))) return Corrupt("MTP streams");
  s->pending_hidden_.resize(pending);
  if (!r.GetBytes(s->pending_hidden_.data(), sizeof(float) * pending) || r.remaining() != 0) return Corrupt("trailing bytes");
  return s;
}

std::string SerializeState(const SequenceState& state, const model::ModelConfig& config, const model::LayerPlan& plan,
                           StateSizes* sizes) {
  return StateCodec::Serialize(state, config, plan, sizes);
}

base::Result<std::unique_ptr<SequenceState>> DeserializeState(std::string_view bytes, const model::ModelConfig& config,
                                                              const model::LayerPlan& plan) {
  return StateCodec::Deserialize(bytes, config, plan);
}

}  // namespace flashserve::engine
