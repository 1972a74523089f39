// Per-state token classification over the vocabulary trie (grammar/compiled_grammar.h).
#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <unordered_map>

#include "grammar/pda.h"

namespace flashserve::grammar {
namespace {

// A depth-first walk of the trie carrying the set of stacks each prefix leads to.
class Classifier {
 public:
  Classifier(const Automaton& a, const Vocabulary& v, int32_t state, int32_t context)
      : a_(a), v_(v), follow_(a.follow(a.info(context >= 0 ? context : state).rule)), bits_(v.mask_words(), 0) {
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

  void Walk(int32_t node, size_t depth, bool pending) {
    const std::vector<Stack>& set = sets_[depth];
    Expansion& e = exps_[depth];
    const StateInfo& only = a_.info(set[0].top);
    const bool simple = set.size() == 1 && !only.accepting && only.refs_begin == only.refs_end;
    if (simple) {
      e.scannable = set;  // the common case: one stack inside a rule, no entries or exits
      e.escaped = false;
    } else {
      Expand(a_, &pool_, set, &e, &scratch_);
    }
    const ByteSet* loop = simple ? &a_.loop_bytes(set[0].top) : nullptr;
    const bool loop_nonascii = simple && LoopsOnNonAscii(set[0].top);
    const auto nodes = v_.nodes();
    const auto sorted = v_.sorted_tokens();
    for (int32_t c = node + 1; c < nodes[static_cast<size_t>(node)].subtree_end; c = nodes[static_cast<size_t>(c)].subtree_end) {
      const Vocabulary::Node& child = nodes[static_cast<size_t>(c)];
      if (loop) {
        // Every token below reads back into this state: ASCII bytes it loops on, and (where it
        // loops on every other character) UTF-8 characters.
        const ByteSet below = v_.subtree_bytes(child);
        const bool ascii_ok = ((below & kAscii) & ~*loop).none();
        const bool rest_ok = (below & ~kAscii).none() || (loop_nonascii && child.utf8_tail);
        if (ascii_ok && rest_ok) {
          Accept(child.tokens_begin, child.tokens_end);
          continue;
        }
      }
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

  // Whether reading any non-ASCII character from `state` leads back to it.
  bool LoopsOnNonAscii(int32_t state) {
    if (auto it = nonascii_.find(state); it != nonascii_.end()) return it->second;
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
    nonascii_[state] = ok;
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
  std::unordered_map<int32_t, bool> nonascii_;
  FramePool pool_;
  ExpandScratch scratch_;
  std::vector<std::vector<Stack>> sets_;
  std::vector<Expansion> exps_;
  std::vector<uint32_t> bits_;
  size_t accepted_count_ = 0;
  std::vector<int32_t> uncertain_;
};

}  // namespace

TokenClasses ClassifyState(const Automaton& automaton, const Vocabulary& vocab, int32_t state, int32_t context) {
  return Classifier(automaton, vocab, state, context).Run();
}

CompiledGrammar::CompiledGrammar(Automaton automaton, std::shared_ptr<const Vocabulary> vocab)
    : automaton_(std::move(automaton)), vocab_(std::move(vocab)) {}

CompiledGrammar::~CompiledGrammar() = default;

const TokenClasses& CompiledGrammar::Classes(int32_t state, int32_t context) const {
  const uint64_t key = Stack{state, context}.key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = classes_.find(key); it != classes_.end()) return *it->second;
  }
  auto computed = std::make_unique<const TokenClasses>(ClassifyState(automaton_, *vocab_, state, context));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = classes_.emplace(key, std::move(computed));  // another thread may have won
  return *it->second;
}

size_t CompiledGrammar::classified() const {
  std::lock_guard<std::mutex> lock(mu_);
  return classes_.size();
}

}  // namespace flashserve::grammar
