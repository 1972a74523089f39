// Byte-level BPE (tokenizer/bpe.h): alphabet tables, byte-keyed vocab, merge table and the
// rank-ordered merge loop (lowest rank first, leftmost on ties), O(n log n) per pre-token.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include <fmt/format.h>

namespace flashserve::tokenizer {
namespace {

struct ByteTables {
  uint32_t byte_to_cp[256];
  int16_t cp_to_byte[512];  // the alphabet lies below U+0144
  ByteTables() {
    std::fill(std::begin(cp_to_byte), std::end(cp_to_byte), int16_t{-1});
    uint32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      byte_to_cp[b] = printable ? static_cast<uint32_t>(b) : next_extra++;
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables tables;
  return tables;
}

uint64_t HashBytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0x100000001B3ull);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

inline uint64_t MergeKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

inline size_t MixKey(uint64_t key) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 17); }

}  // namespace

uint32_t ByteToCodepoint(uint8_t byte) { return Tables().byte_to_cp[byte]; }

int CodepointToByte(uint32_t codepoint) {
  return codepoint < 512 ? Tables().cp_to_byte[codepoint] : -1;
}

bool ByteLevelToBytes(std::string_view text, std::string* bytes) {
  bytes->clear();
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<uint8_t>(text[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < text.size()) {  // the alphabet is at most 2 bytes
      cp = ((c & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;
    }
    const int b = CodepointToByte(cp);
    if (b < 0) return false;
    bytes->push_back(static_cast<char>(b));
  }
  return true;
}

std::string BytesToByteLevel(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) {
    const uint32_t cp = ByteToCodepoint(static_cast<uint8_t>(ch));
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

// ---- BytesToIdMap ----

size_t BytesToIdMap::FindSlot(std::string_view key, uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id < 0) return i;
    if (s.hash == hash && s.length == key.size() &&
        std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0) {
      return i;
    }
  }
}

void BytesToIdMap::Grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    size_t i = s.hash & mask;
    while (slots_[i].id >= 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void BytesToIdMap::Insert(std::string_view key, int32_t id) {
  if ((num_entries_ + 1) * 2 > slots_.size()) Grow();
  const uint64_t hash = HashBytes(key);
  Slot& s = slots_[FindSlot(key, hash)];
  if (s.id < 0) {
    s.hash = hash;
    s.offset = static_cast<uint32_t>(arena_.size());
    s.length = static_cast<uint32_t>(key.size());
    arena_.append(key);
    ++num_entries_;
  }
  s.id = id;
}

int32_t BytesToIdMap::Find(std::string_view key) const {
  if (slots_.empty()) return -1;
  return slots_[FindSlot(key, HashBytes(key))].id;
}

// ---- BpeModel ----

const BpeModel::MergeSlot* BpeModel::FindMerge(int32_t left, int32_t right) const {
  const uint64_t key = MergeKey(left, right);
  const size_t mask = merges_.size() - 1;
  for (size_t i = MixKey(key) & mask;; i = (i + 1) & mask) {
    const MergeSlot& s = merges_[i];
    if (s.key == key) return &s;
    if (s.key == ~0ull) return nullptr;
  }
}

void BpeModel::InsertMerge(int32_t left, int32_t right, int32_t rank, int32_t new_id) {
  const uint64_t key = MergeKey(left, right);
  const size_t mask = merges_.size() - 1;
  size_t i = MixKey(key) & mask;
  while (merges_[i].key != ~0ull && merges_[i].key != key) i = (i + 1) & mask;
  merges_[i] = MergeSlot{key, rank, new_id};  // a repeated pair keeps its last rank, as in HF
}

base::Result<BpeModel> BpeModel::Build(const BpeConfig& config) {
  auto bad = [](std::string msg) { return base::MakeError(base::ErrorCode::kBadTokenizer, std::move(msg)); };
  BpeModel model;
  BytesToIdMap text_to_id;  // byte-level text -> id, for the merge table below
  std::string bytes;
  for (const auto& [text, id] : config.vocab) {
    text_to_id.Insert(text, id);
    if (ByteLevelToBytes(text, &bytes)) model.bytes_to_id_.Insert(bytes, id);
  }
  auto lookup = [&](std::string_view text) { return text_to_id.Find(text); };
  for (int b = 0; b < 256; ++b) {
    model.byte_id_[b] = model.bytes_to_id_.Find(std::string_view(reinterpret_cast<const char*>(&b), 1));
  }
  size_t capacity = 1024;
  while (capacity < config.merges.size() * 2) capacity *= 2;
  model.merges_.assign(capacity, MergeSlot{});
  std::string joined;
  for (size_t rank = 0; rank < config.merges.size(); ++rank) {
    const auto& [left, right] = config.merges[rank];
    joined.assign(left).append(right);
    const int32_t left_id = lookup(left), right_id = lookup(right), new_id = lookup(joined);
    if (left_id < 0 || right_id < 0 || new_id < 0) {
      const std::string& missing = left_id < 0 ? left : right_id < 0 ? right : joined;
      return bad(fmt::format("merge {} (\"{} {}\"): token \"{}\" is not in the vocab", rank, left,
                             right, missing));
    }
    model.InsertMerge(left_id, right_id, static_cast<int32_t>(rank), new_id);
  }
  if (!config.unk_token.empty()) {
    model.unk_id_ = lookup(config.unk_token);
    if (model.unk_id_ < 0) return bad(fmt::format("unk_token \"{}\" is not in the vocab", config.unk_token));
  }
  model.fuse_unk_ = config.fuse_unk;
  model.ignore_merges_ = config.ignore_merges;
  model.ComputeStableTokens(config);
  return model;
}

void BpeModel::ComputeStableTokens(const BpeConfig& config) {
  int32_t max_id = -1;
  for (const auto& entry : config.vocab) max_id = std::max(max_id, entry.second);
  stable_.assign(static_cast<size_t>(max_id + 1), 0);
  BpeScratch scratch;
  std::vector<int32_t> ids;
  std::string bytes;
  for (const auto& [text, id] : config.vocab) {
    if (!ByteLevelToBytes(text, &bytes) || bytes.empty()) continue;
    ids.clear();
    Tokenize(bytes, &scratch, &ids);
    stable_[id] = ids.size() == 1 && ids[0] == id;
  }
}

void BpeModel::Tokenize(std::string_view bytes, BpeScratch* scratch, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    const int32_t id = FindBytes(bytes);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  auto& symbols = scratch->symbols;
  symbols.clear();
  int32_t unk_length = 0;  // pending unknown bytes (HF keeps one unk symbol, fused or not)
  auto add = [&symbols](int32_t id, int32_t length) {
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, length});
  };
  for (char ch : bytes) {
    const int32_t id = byte_id_[static_cast<uint8_t>(ch)];
    if (id >= 0) {
      if (unk_length > 0) add(unk_id_, unk_length);
      unk_length = 0;
      add(id, 1);
    } else if (unk_id_ >= 0) {
      if (unk_length > 0 && !fuse_unk_) add(unk_id_, unk_length), unk_length = 0;
      unk_length += 1;
    }
  }
  if (unk_length > 0) add(unk_id_, unk_length);
  if (symbols.empty()) return;
  symbols.back().next = -1;
  if (symbols.size() > 1) Merge(scratch);
  for (const auto& s : symbols) {
    if (s.length > 0) out->push_back(s.id);
  }
}

void BpeModel::Merge(BpeScratch* scratch) const {
  auto& symbols = scratch->symbols;
  auto& heap = scratch->heap;
  heap.clear();
  auto push = [&](int32_t pos) {
    const int32_t left = symbols[pos].id, right = symbols[symbols[pos].next].id;
    const MergeSlot* m = FindMerge(left, right);
    if (m == nullptr) return;
    heap.push_back({(static_cast<uint64_t>(m->rank) << 32) | static_cast<uint32_t>(pos), left, right, m->new_id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const BpeScratch::Candidate top = heap.back();
    heap.pop_back();
    const auto pos = static_cast<int32_t>(top.order & 0xFFFFFFFFu);
    auto& sym = symbols[pos];
    // Stale when a symbol of the pair changed since the push (ids only grow longer, so equal ids
    // mean the same symbols).
    if (sym.length == 0 || sym.next < 0 || sym.id != top.left_id) continue;
    auto& right = symbols[sym.next];
    if (right.id != top.right_id) continue;
    sym.id = top.new_id;
    sym.length += right.length;
    right.length = 0;
    sym.next = right.next;
    if (sym.next >= 0) symbols[sym.next].prev = pos;
    if (sym.prev >= 0) push(sym.prev);
    if (sym.next >= 0) push(pos);
  }
}

}  // namespace flashserve::tokenizer
