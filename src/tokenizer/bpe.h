// Byte-level BPE model (HF `models.BPE` under a ByteLevel pre-tokenizer): the GPT-2 byte<->char
// map, vocab keyed by raw bytes, merge ranks, and HF's merge order. Built once by the loader;
// immutable afterwards and shared by all threads (Tokenize takes caller-owned scratch).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace flashserve::tokenizer {

// GPT-2 byte-level alphabet: every byte maps to one printable code point and back.
uint32_t ByteToCodepoint(uint8_t byte);
// The byte a code point stands for, or -1 when it is not in the alphabet.
int CodepointToByte(uint32_t codepoint);
// Byte-level text ("Ġthe") -> raw bytes (" the"); false when a character is not in the alphabet.
bool ByteLevelToBytes(std::string_view text, std::string* bytes);
// Raw bytes -> byte-level text.
std::string BytesToByteLevel(std::string_view bytes);

// Open-addressing map from byte strings to ids; keys live in one arena.
class BytesToIdMap {
 public:
  void Insert(std::string_view key, int32_t id);  // later inserts of the same key overwrite
  int32_t Find(std::string_view key) const;       // -1 when absent
  size_t size() const { return num_entries_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;
    uint32_t length = 0;
    int32_t id = -1;  // -1: empty slot
  };
  void Grow();
  size_t FindSlot(std::string_view key, uint64_t hash) const;
  std::vector<Slot> slots_;
  std::string arena_;
  size_t num_entries_ = 0;
};

struct BpeConfig {
  std::vector<std::pair<std::string, int32_t>> vocab;      // byte-level text -> id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::string unk_token;  // empty: bytes without a vocab entry are dropped (HF, no unk)
  bool fuse_unk = false;
  bool ignore_merges = false;  // HF: a whole pre-token found in the vocab is one token
};

// Caller-owned working memory for Tokenize; reuse it across calls on one thread.
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    int32_t length;  // bytes covered; 0 once merged into its left neighbour
  };
  // A candidate merge of the pair starting at `position`, stale once either symbol changed.
  struct Candidate {
    uint64_t order;  // rank << 32 | position: lowest rank first, then leftmost
    int32_t left_id;
    int32_t right_id;
    int32_t new_id;
    bool operator>(const Candidate& other) const { return order > other.order; }
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;  // min-heap on order
};

class BpeModel {
 public:
  static base::Result<BpeModel> Build(const BpeConfig& config);

  // Appends the ids of one pre-token (raw bytes) to *out, exactly as HF's BPE::tokenize.
  void Tokenize(std::string_view bytes, BpeScratch* scratch, std::vector<int32_t>* out) const;
  // Id of a vocab entry by its raw bytes (-1 when absent); used for the whole-piece fast path.
  int32_t FindBytes(std::string_view bytes) const { return bytes_to_id_.Find(bytes); }
  // True when Tokenize(bytes of id) yields exactly {id}, so a whole-piece hit may skip merging.
  bool IsWholeTokenStable(int32_t id) const {
    return ignore_merges_ || (id >= 0 && static_cast<size_t>(id) < stable_.size() && stable_[id]);
  }

 private:
  struct MergeSlot {
    uint64_t key = ~0ull;  // (left << 32 | right); ~0: empty
    int32_t rank = 0;
    int32_t new_id = 0;
  };
  const MergeSlot* FindMerge(int32_t left, int32_t right) const;
  void InsertMerge(int32_t left, int32_t right, int32_t rank, int32_t new_id);
  void Merge(BpeScratch* scratch) const;
  void ComputeStableTokens(const BpeConfig& config);

  BytesToIdMap bytes_to_id_;
  std::vector<MergeSlot> merges_;  // open addressing, power-of-two size
  int32_t byte_id_[256] = {};      // id of each single byte, -1 when missing
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::vector<uint8_t> stable_;  // by id
};

}  // namespace flashserve::tokenizer
