// Per-state token classification over the vocabulary trie (grammar/compiled_grammar.h).
#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "grammar/pda.h"

namespace flashserve::grammar {
namespace {

// A depth-first walk of the trie carrying the set of stacks each prefix leads to.
class Classifier {
 public:
  Classifier(const Automaton& a, const Vocabulary& v, int32_t state, int32_t context)
      : a_(a), v_(v), follow_(a.follow(a.info(context >= 0 ? context : state).rule)), bits_(v.mask_words(), 0),
        nonascii_(a.num_states(), -1) {
    size_t depth = 0;
    for (const Vocabulary::Node& n : v.nodes()) depth = std::max<size_t>(depth, n.depth);
    sets_.resize(depth + 2);
    exps_.resize(depth + 2);
    const int32_t parent = context == kAlone ? kSentinelParent : context == kAtRoot ? kRootParent : pool_.Intern(context, kSentinelParent);
    sets_[0] = {Stack{state, parent}};
  }

  TokenClasses Run() {
    Walk(0, 0, false);
    TokenClasses out;
    if (accepted_count_ > v_.mask_words()) {
      out.accepted_bits = std::move(bits_);
    } else {
      for (size_t w = 0; w < bits_.size(); ++w) {
        for (uint32_t b = bits_[w]; b; b &= b - 1) out.accepted.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(b))));
      }
    }
    std::sort(uncertain_.begin(), uncertain_.end());
    out.uncertain = std::move(uncertain_);
    return out;
  }

 private:
  void Accept(int32_t begin, int32_t end) {
    const auto sorted = v_.sorted_tokens();
    for (int32_t i = begin; i < end; ++i) {
      const auto t = static_cast<size_t>(sorted[static_cast<size_t>(i)]);
      bits_[t / 32] |= 1u << (t % 32);
    }
    accepted_count_ += static_cast<size_t>(end - begin);
  }

  bool Simple(int32_t state) const {
    const StateInfo& info = a_.info(state);
    return !info.accepting && info.refs_begin == info.refs_end;
  }

  void Walk(int32_t node, size_t depth, bool pending) {
    const std::vector<Stack>& set = sets_[depth];
    if (set.size() == 1 && Simple(set[0].top)) return WalkSimple(node, depth, set[0].top, set[0].parent, pending);
    Expansion& e = exps_[depth];
    Expand(a_, &pool_, set, &e, &scratch_);
    const auto nodes = v_.nodes();
    const auto sorted = v_.sorted_tokens();
    for (int32_t c = node + 1; c < nodes[static_cast<size_t>(node)].subtree_end; c = nodes[static_cast<size_t>(c)].subtree_end) {
      const Vocabulary::Node& child = nodes[static_cast<size_t>(c)];
      std::vector<Stack>& next = sets_[depth + 1];
      Step(a_, e.scannable, child.byte, &next);
      const bool pend = pending || (e.escaped && follow_[child.byte]);
      if (!next.empty()) {
        Accept(child.tokens_begin, child.exact_end);
        if (child.subtree_end > c + 1) Walk(c, depth + 1, pend);
      } else if (pend) {
        for (int32_t i = child.tokens_begin; i < child.tokens_end; ++i) uncertain_.push_back(sorted[static_cast<size_t>(i)]);
      }
    }
  }

  // The common case without vectors: one stack whose top neither enters nor leaves a rule, so a
  // child is one transition of the top state.
  void WalkSimple(int32_t node, size_t depth, int32_t top, int32_t parent, bool pending) {
    const ByteSet& loop = a_.loop_bytes(top);
    const bool loop_nonascii = LoopsOnNonAscii(top);
    const auto nodes = v_.nodes();
    const auto sorted = v_.sorted_tokens();
    for (int32_t c = node + 1; c < nodes[static_cast<size_t>(node)].subtree_end; c = nodes[static_cast<size_t>(c)].subtree_end) {
      const Vocabulary::Node& child = nodes[static_cast<size_t>(c)];
      // Every token below is read, without a choice, along states that all take each of its
      // bytes: a state that loops on them (ASCII, and UTF-8 characters where it loops on every
      // other character), or a chain of single successors (a counted repetition) long enough.
      const ByteSet& below = v_.subtree_bytes(child);
      if ((((below & kAscii) & ~loop).none() && ((below & ~kAscii).none() || (loop_nonascii && child.utf8_tail))) ||
          (below & ~ChainBytes(top, child.span)).none()) {
        Accept(child.tokens_begin, child.tokens_end);
        continue;
      }
      const int32_t next = a_.Next(top, child.byte);
      if (next < 0) {
        if (pending) {
          for (int32_t i = child.tokens_begin; i < child.tokens_end; ++i) uncertain_.push_back(sorted[static_cast<size_t>(i)]);
        }
        continue;
      }
      Accept(child.tokens_begin, child.exact_end);
      if (child.subtree_end == c + 1) continue;
      if (Simple(next)) {
        WalkSimple(c, depth + 1, next, parent, pending);
      } else {
        sets_[depth + 1].assign(1, Stack{next, parent});
        Walk(c, depth + 1, pending);
      }
    }
  }

  // The bytes that lead from `state` along its chain of main successors for `length` steps: the
  // main successor takes the most bytes; step i needs the bytes every state up to it takes.
  // chain(S)[i] = C(S) & chain(succ(S))[i - 1], memoized per state.
  const ByteSet& ChainBytes(int32_t state, size_t length) {
    static const ByteSet kNone;
    if (length == 0 || length > kMaxChain) return kNone;
    return Chain(state)[length - 1];
  }

  const std::vector<ByteSet>& Chain(int32_t state) {
    auto it = chains_.find(state);
    if (it != chains_.end()) return it->second;
    std::vector<ByteSet> chain(kMaxChain);
    const auto [next, bytes] = MainSuccessor(state);
    chains_[state];  // a cycle back here reads an empty (so conservative) chain
    if (next >= 0) {
      chain[0] = bytes;
      if (next == state) {
        for (size_t i = 1; i < kMaxChain; ++i) chain[i] = bytes;
      } else {
        const std::vector<ByteSet>& rest = Chain(next);
        for (size_t i = 1; i < kMaxChain && !rest.empty(); ++i) chain[i] = bytes & rest[i - 1];
      }
    }
    return chains_[state] = std::move(chain);
  }

  std::pair<int32_t, ByteSet> MainSuccessor(int32_t state) const {
    if (!Simple(state)) return {-1, ByteSet{}};
    std::array<int32_t, 256> target{};
    for (int b = 0; b < 256; ++b) target[static_cast<size_t>(b)] = a_.Next(state, static_cast<uint8_t>(b));
    std::pair<int32_t, ByteSet> best{-1, ByteSet{}};
    size_t best_count = 0;
    for (int b = 0; b < 256; ++b) {
      const int32_t t = target[static_cast<size_t>(b)];
      if (t < 0 || t == best.first) continue;
      ByteSet bytes;
      for (int c = b; c < 256; ++c) {
        if (target[static_cast<size_t>(c)] == t) bytes.set(static_cast<size_t>(c));
      }
      if (bytes.count() > best_count) best = {t, bytes}, best_count = bytes.count();
    }
    return best;
  }

  // Whether reading any non-ASCII character from `state` leads back to it.
  bool LoopsOnNonAscii(int32_t state) {
    int8_t& known = nonascii_[static_cast<size_t>(state)];
    if (known >= 0) return known > 0;
    bool ok = true;
    for (int lead = 0xC2; lead <= 0xF4 && ok; ++lead) {
      const int n = lead <= 0xDF ? 1 : lead <= 0xEF ? 2 : 3;
      const int lo = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
      const int hi = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
      std::vector<int32_t> states = {a_.Next(state, static_cast<uint8_t>(lead))};
      for (int k = 0; k < n && ok; ++k) {
        std::vector<int32_t> next;
        for (int32_t s : states) {
          if (s < 0) { ok = false; break; }
          for (int c = k == 0 ? lo : 0x80; c <= (k == 0 ? hi : 0xBF); ++c) next.push_back(a_.Next(s, static_cast<uint8_t>(c)));
        }
        std::sort(next.begin(), next.end());
        next.erase(std::unique(next.begin(), next.end()), next.end());
        states = std::move(next);
      }
      ok = ok && states.size() == 1 && states[0] == state;
    }
    known = ok ? 1 : 0;
    return ok;
  }

  static inline const ByteSet kAscii = [] {
    ByteSet s;
    for (int b = 0; b < 0x80; ++b) s.set(static_cast<size_t>(b));
    return s;
  }();

  const Automaton& a_;
  const Vocabulary& v_;
  const ByteSet& follow_;
  FramePool pool_;
  ExpandScratch scratch_;
  std::vector<std::vector<Stack>> sets_;
  std::vector<Expansion> exps_;
  std::vector<uint32_t> bits_;
  size_t accepted_count_ = 0;
  std::vector<int32_t> uncertain_;
  std::vector<int8_t> nonascii_;  // per state: -1 unknown, else LoopsOnNonAscii
  static constexpr size_t kMaxChain = 160;  // longer than any token of the vocabularies served
  std::unordered_map<int32_t, std::vector<ByteSet>> chains_;
};

}  // namespace

TokenClasses ClassifyState(const Automaton& automaton, const Vocabulary& vocab, int32_t state, int32_t context) {
  return Classifier(automaton, vocab, state, context).Run();
}

CompiledGrammar::CompiledGrammar(Automaton automaton, std::shared_ptr<const Vocabulary> vocab)
    : automaton_(std::move(automaton)), vocab_(std::move(vocab)) {
  automaton_bytes_ = automaton_.num_states() * (static_cast<size_t>(automaton_.num_classes()) * sizeof(int32_t) +
                                                sizeof(StateInfo) + 2 * sizeof(ByteSet));
}

size_t CompiledGrammar::memory_bytes() const {
  return automaton_bytes_ + class_bytes_.load(std::memory_order_relaxed);
}

CompiledGrammar::~CompiledGrammar() = default;

const TokenClasses& CompiledGrammar::Classes(int32_t state, int32_t context) const {
  const uint64_t key = Stack{state, context}.key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = classes_.find(key); it != classes_.end()) return *it->second;
  }
  auto computed = std::make_unique<const TokenClasses>(ClassifyState(automaton_, *vocab_, state, context));
  std::lock_guard<std::mutex> lock(mu_);
  const size_t bytes = (computed->accepted_bits.size() + computed->accepted.size() + computed->uncertain.size()) * 4 + 64;
  auto [it, fresh] = classes_.emplace(key, std::move(computed));  // another thread may have won
  if (fresh) class_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return *it->second;
}

size_t CompiledGrammar::classified() const {
  std::lock_guard<std::mutex> lock(mu_);
  return classes_.size();
}

}  // namespace flashserve::grammar
