// SequenceState serialisation (engine/state_codec.h). Layouts (little-endian, each followed by
// an FNV-1a 64 checksum of the bytes before it):
//   state/boundary: "FSST" version flags position mtp_position first_block num_layers
//                   per layer: ring rows, compressor pools, entries from block first_block on
//                   pending MTP streams; with flag 2 (V4.1 Engram) the last token ids
//   block:          "FSBK" version block_index num_layers, per compressed layer: its entries
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

constexpr uint32_t kStateMagic = 0x54535346;  // "FSST"
constexpr uint32_t kBlockMagic = 0x4B425346;  // "FSBK"
constexpr uint32_t kVersion = 2;

Error Corrupt(const std::string& what) { return Error(ErrorCode::kDataLoss, "sequence state: " + what); }

// The compact forms the QAT round trips leave the values in (v4-architecture.md 3.3).
EntryEncoding RingEncoding(const model::ModelConfig& c) {
  return c.is_v41() ? EntryEncoding::kFp8Block32 : EntryEncoding::kFp8Nope;
}
EntryEncoding EntriesEncoding(const model::ModelConfig& c) {
  return c.is_v41() ? EntryEncoding::kFp4E4m3 : EntryEncoding::kFp8Nope;
}

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

// Appends exactly expected_count decoded rows to *out.
bool GetEntries(ByteReader* r, int dim, int nope, int64_t expected_count, base::AlignedVector<float>* out) {
  uint8_t enc;
  uint64_t count, size;
  std::string_view body;
  if (!r->Get(&enc) || !r->Get(&count) || !r->Get(&size) || !r->View(size, &body)) return false;
  if (enc > kMaxEntryEncoding || static_cast<int64_t>(count) != expected_count) return false;
  const size_t offset = out->size();
  out->resize(offset + static_cast<size_t>(count) * dim);
  return DecodeEntries(static_cast<EntryEncoding>(enc), body, static_cast<int64_t>(count), dim, nope, out->data() + offset);
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

// Entries of a compressed layer that belong to blocks [first, last).
int64_t FirstEntry(const model::LayerSpec& spec, int64_t block) { return block * kBlockTokens / spec.compress_ratio; }

void Seal(ByteWriter* w) { w->Put<uint64_t>(base::Fnv1a64(w->str())); }

bool Unseal(std::string_view bytes, std::string_view* body) {
  if (bytes.size() < 8) return false;
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  *body = bytes.substr(0, bytes.size() - 8);
  return base::Fnv1a64(*body) == stored;
}

}  // namespace

class StateCodec {
 public:
  static std::string Serialize(const SequenceState& s, const model::ModelConfig& c, const model::LayerPlan& plan,
                               int64_t first_block, StateSizes* sizes);
  static std::string Block(const SequenceState& s, const model::ModelConfig& c, const model::LayerPlan& plan,
                           int64_t block);
  static base::Result<std::unique_ptr<SequenceState>> Assemble(std::string_view bytes,
                                                               std::span<const std::string_view> blocks,
                                                               const model::ModelConfig& c,
                                                               const model::LayerPlan& plan);

 private:
  static base::Status ReadBlock(std::string_view bytes, int64_t block, const model::ModelConfig& c,
                                const model::LayerPlan& plan, SequenceState* s);
  static base::Status ReadLayer(ByteReader* r, const model::ModelConfig& c, const model::LayerSpec& spec,
                                int64_t first_block, SequenceState* s, LayerState* ls);
};

std::string StateCodec::Serialize(const SequenceState& s, const model::ModelConfig& c, const model::LayerPlan& plan,
                                  int64_t first_block, StateSizes* sizes) {
  ByteWriter w;
  StateSizes local;
  w.Put<uint32_t>(kStateMagic);
  w.Put<uint32_t>(kVersion);
  w.Put<uint32_t>((s.with_mtp_ ? 1u : 0u) | (s.engram_lookback_ > 0 ? 2u : 0u));
  w.Put<int64_t>(s.position_);
  w.Put<int64_t>(s.mtp_position_);
  w.Put<int64_t>(first_block);
  w.Put<uint32_t>(static_cast<uint32_t>(s.layers_.size()));
  for (size_t i = 0; i < s.layers_.size(); ++i) {
    const LayerState& ls = s.layers_[i];
    const model::LayerSpec& spec = plan[i];
    const int64_t pos = spec.is_mtp ? s.mtp_position_ : s.position_;
    // The next query at `pos` needs positions [pos - window + 1, pos): saved oldest first.
    const int64_t keep = std::min<int64_t>(pos, ls.window - 1);
    std::vector<float> ring(static_cast<size_t>(keep * ls.dim));
    for (int64_t k = 0; k < keep; ++k)
      std::memcpy(ring.data() + k * ls.dim, ls.ring.data() + ((pos - keep + k) % ls.window) * ls.dim,
                  sizeof(float) * ls.dim);
    size_t before = w.size();
    PutEntries(&w, ring.data(), keep, ls.dim, c.nope_dim(), RingEncoding(c));
    local.rings += static_cast<int64_t>(w.size() - before);
    before = w.size();
    if (spec.owns_compressor) {
      PutPool(&w, ls.compressor.cur, ls.dim);
      if (ls.compressor.overlap) PutPool(&w, ls.compressor.next, ls.dim);
    }
    if (spec.index_compressor) {
      PutPool(&w, ls.index_compressor.cur, ls.index_dim);
      PutPool(&w, ls.index_compressor.next, ls.index_dim);
    }
    local.carries += static_cast<int64_t>(w.size() - before);
    before = w.size();
    if (spec.owns_compressor) {
      const int64_t first = FirstEntry(spec, first_block);
      PutEntries(&w, ls.compressed.data() + first * ls.dim, ls.num_entries() - first, ls.dim, c.nope_dim(),
                 EntriesEncoding(c));
      if (spec.owns_index_keys)
        PutEntries(&w, ls.index_keys.data() + first * ls.index_dim, ls.num_entries() - first, ls.index_dim, 0,
                   EntryEncoding::kFp4);
    }
    local.entries += static_cast<int64_t>(w.size() - before);
  }
  w.Put<uint64_t>(s.pending_hidden_.size());
  w.PutBytes(s.pending_hidden_.data(), sizeof(float) * s.pending_hidden_.size());
  local.carries += 8 + static_cast<int64_t>(sizeof(float) * s.pending_hidden_.size());
  if (s.engram_lookback_ > 0) {  // V4.1 Engram look-back (only written for such models)
    w.Put<uint32_t>(static_cast<uint32_t>(s.recent_tokens_.size()));
    w.PutBytes(s.recent_tokens_.data(), sizeof(int32_t) * s.recent_tokens_.size());
    local.carries += 4 + static_cast<int64_t>(sizeof(int32_t) * s.recent_tokens_.size());
  }
  Seal(&w);
  local.total = static_cast<int64_t>(w.size());
  if (sizes) *sizes = local;
  return std::move(w.str());
}

std::string StateCodec::Block(const SequenceState& s, const model::ModelConfig& c, const model::LayerPlan& plan,
                              int64_t block) {
  FS_CHECK(s.position_ >= (block + 1) * kBlockTokens, "block %ld is not complete", static_cast<long>(block));
  ByteWriter w;
  w.Put<uint32_t>(kBlockMagic);
  w.Put<uint32_t>(kVersion);
  w.Put<int64_t>(block);
  w.Put<uint32_t>(static_cast<uint32_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerState& ls = s.layers_[static_cast<size_t>(i)];
    const model::LayerSpec& spec = plan[static_cast<size_t>(i)];
    if (!spec.owns_compressor) continue;
    const int64_t first = FirstEntry(spec, block), count = FirstEntry(spec, block + 1) - first;
    PutEntries(&w, ls.compressed.data() + first * ls.dim, count, ls.dim, c.nope_dim(), EntriesEncoding(c));
    if (spec.owns_index_keys)
      PutEntries(&w, ls.index_keys.data() + first * ls.index_dim, count, ls.index_dim, 0, EntryEncoding::kFp4);
  }
  Seal(&w);
  return std::move(w.str());
}

base::Status StateCodec::ReadBlock(std::string_view bytes, int64_t block, const model::ModelConfig& c,
                                   const model::LayerPlan& plan, SequenceState* s) {
  std::string_view body;
  if (!Unseal(bytes, &body)) return Corrupt("block " + std::to_string(block) + ": checksum mismatch");
  ByteReader r(body);
  uint32_t magic, version, num_layers;
  int64_t index;
  if (!r.Get(&magic) || magic != kBlockMagic || !r.Get(&version) || version != kVersion || !r.Get(&index) ||
      !r.Get(&num_layers))
    return Corrupt("block " + std::to_string(block) + ": bad header");
  if (index != block || static_cast<int>(num_layers) != c.num_layers)
    return Error(ErrorCode::kBadState, "block " + std::to_string(block) + " does not fit this sequence/model");
  for (int i = 0; i < c.num_layers; ++i) {
    LayerState& ls = s->layers_[static_cast<size_t>(i)];
    const model::LayerSpec& spec = plan[static_cast<size_t>(i)];
    if (!spec.owns_compressor) continue;
    const int64_t count = FirstEntry(spec, block + 1) - FirstEntry(spec, block);
    bool ok = GetEntries(&r, ls.dim, c.nope_dim(), count, &ls.compressed);
    if (ok && spec.owns_index_keys) ok = GetEntries(&r, ls.index_dim, 0, count, &ls.index_keys);
    if (!ok) return Corrupt("block " + std::to_string(block) + " layer " + std::to_string(i));
  }
  if (r.remaining() != 0) return Corrupt("block " + std::to_string(block) + ": trailing bytes");
  return base::Status::Ok();
}

base::Status StateCodec::ReadLayer(ByteReader* r, const model::ModelConfig& c, const model::LayerSpec& spec,
                                   int64_t first_block, SequenceState* s, LayerState* ls) {
  const int64_t pos = spec.is_mtp ? s->mtp_position_ : s->position_;
  const int64_t keep = std::min<int64_t>(pos, ls->window - 1);
  base::AlignedVector<float> ring;
  const std::string where = "layer " + std::to_string(spec.index);
  if (!GetEntries(r, ls->dim, c.nope_dim(), keep, &ring)) return Corrupt(where + " ring");
  for (int64_t k = 0; k < keep; ++k)
    std::memcpy(ls->ring.data() + ((pos - keep + k) % ls->window) * ls->dim, ring.data() + k * ls->dim,
                sizeof(float) * ls->dim);
  bool ok = true;
  if (spec.owns_compressor)
    ok = GetPool(r, ls->dim, &ls->compressor.cur) && (!ls->compressor.overlap || GetPool(r, ls->dim, &ls->compressor.next));
  if (ok && spec.index_compressor)
    ok = GetPool(r, ls->index_dim, &ls->index_compressor.cur) && GetPool(r, ls->index_dim, &ls->index_compressor.next);
  if (ok && spec.owns_compressor) {
    const int64_t tail = pos / spec.compress_ratio - FirstEntry(spec, first_block);
    ok = tail >= 0 && GetEntries(r, ls->dim, c.nope_dim(), tail, &ls->compressed);
    if (ok && spec.owns_index_keys) ok = GetEntries(r, ls->index_dim, 0, tail, &ls->index_keys);
  }
  return ok ? base::Status::Ok() : base::Status(Corrupt(where + " compressed state"));
}

base::Result<std::unique_ptr<SequenceState>> StateCodec::Assemble(std::string_view bytes,
                                                                  std::span<const std::string_view> blocks,
                                                                  const model::ModelConfig& c,
                                                                  const model::LayerPlan& plan) {
  std::string_view body;
  if (!Unseal(bytes, &body)) return Corrupt("checksum mismatch");
  ByteReader r(body);
  uint32_t magic = 0, version = 0, flags = 0, num_layers = 0;
  int64_t position = 0, mtp_position = 0, first_block = 0;
  if (!r.Get(&magic) || magic != kStateMagic) return Corrupt("bad magic");
  if (!r.Get(&version) || version != kVersion) return Corrupt("unsupported version " + std::to_string(version));
  if (!r.Get(&flags) || !r.Get(&position) || !r.Get(&mtp_position) || !r.Get(&first_block) || !r.Get(&num_layers))
    return Corrupt("truncated header");
  auto s = std::make_unique<SequenceState>(c, plan, (flags & 1u) != 0);
  if (num_layers != s->layers_.size() || ((flags & 2u) != 0) != (s->engram_lookback_ > 0))
    return Error(ErrorCode::kBadState, "sequence state: layer count or Engram look-back does not match the model");
  if (position < 0 || position > c.max_position || mtp_position < 0 || mtp_position > position || first_block < 0 ||
      first_block > position / kBlockTokens || (c.dspark.present() && (flags & 1u) != 0 && mtp_position != position))
    return Corrupt("bad position");
  if (static_cast<int64_t>(blocks.size()) != first_block)
    return Error(ErrorCode::kInvalidArgument, "sequence state needs " + std::to_string(first_block) + " blocks, got " +
                                                  std::to_string(blocks.size()));
  s->position_ = position;
  s->mtp_position_ = mtp_position;
  for (int64_t b = 0; b < first_block; ++b) FS_RETURN_IF_ERROR(ReadBlock(blocks[b], b, c, plan, s.get()));
  for (size_t i = 0; i < s->layers_.size(); ++i)
    FS_RETURN_IF_ERROR(ReadLayer(&r, c, plan[i], first_block, s.get(), &s->layers_[i]));
  uint64_t pending;
  if (!r.Get(&pending) || (pending != 0 && pending != static_cast<uint64_t>(c.hc_dim()))) return Corrupt("MTP streams");
  s->pending_hidden_.resize(pending);
  if (!r.GetBytes(s->pending_hidden_.data(), sizeof(float) * pending)) return Corrupt("MTP streams");
  if (s->engram_lookback_ > 0) {
    uint32_t count;
    if (!r.Get(&count) || count != std::min<int64_t>(position, s->engram_lookback_)) return Corrupt("Engram look-back");
    s->recent_tokens_.resize(count);
    if (!r.GetBytes(s->recent_tokens_.data(), sizeof(int32_t) * count)) return Corrupt("Engram look-back");
  }
  if (r.remaining() != 0) return Corrupt("trailing bytes");
  return s;
}

std::string SerializeState(const SequenceState& state, const model::ModelConfig& config, const model::LayerPlan& plan,
                           StateSizes* sizes) {
  return StateCodec::Serialize(state, config, plan, 0, sizes);
}

base::Result<std::unique_ptr<SequenceState>> DeserializeState(std::string_view bytes, const model::ModelConfig& config,
                                                              const model::LayerPlan& plan) {
  return StateCodec::Assemble(bytes, {}, config, plan);
}

std::string SerializeBlock(const SequenceState& state, const model::ModelConfig& config, const model::LayerPlan& plan,
                           int64_t block_index) {
  return StateCodec::Block(state, config, plan, block_index);
}

std::string SerializeBoundary(const SequenceState& state, const model::ModelConfig& config,
                              const model::LayerPlan& plan, StateSizes* sizes) {
  return StateCodec::Serialize(state, config, plan, state.position() / kBlockTokens, sizes);
}

base::Result<std::unique_ptr<SequenceState>> AssembleState(std::string_view boundary,
                                                           std::span<const std::string_view> blocks,
                                                           const model::ModelConfig& config,
                                                           const model::LayerPlan& plan) {
  return StateCodec::Assemble(boundary, blocks, config, plan);
}

}  // namespace flashserve::engine
