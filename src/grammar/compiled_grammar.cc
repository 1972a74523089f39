// Per-state token classification over the vocabulary trie (grammar/compiled_grammar.h).
#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <array>
#include <tuple>
#include <unordered_map>

#include "grammar/pda.h"

namespace flashserve::grammar {
namespace {

// A state that neither enters nor leaves a rule: reading a byte is one transition.
bool IsSimple(const Automaton& a, int32_t state) {
  const StateInfo& info = a.info(state);
  return !info.accepting && info.refs_begin == info.refs_end;
}

// A depth-first walk of the trie carrying the set of stacks each prefix leads to.
class Classifier {
 public:
  Classifier(const Automaton& a, const Vocabulary& v, int32_t state, int32_t context, const ChainSteps& steps)
      : a_(a), v_(v), steps_(steps), follow_(a.follow(a.info(context >= 0 ? context : state).rule)), bits_(v.mask_words(), 0) {
    const size_t depth = v.max_token_bytes();
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

  bool Simple(int32_t state) const { return IsSimple(a_, state); }

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
    const Chains& chains = ChainsOf(top);
    const auto nodes = v_.nodes();
    const auto sorted = v_.sorted_tokens();
    for (int32_t c = node + 1; c < nodes[static_cast<size_t>(node)].subtree_end; c = nodes[static_cast<size_t>(c)].subtree_end) {
      const Vocabulary::Node& child = nodes[static_cast<size_t>(c)];
      // Every token below is read, without a choice, along states that all take each of its
      // bytes: a state that loops on them (ASCII, and UTF-8 characters where it loops on every
      // other character), a chain of single successors (a counted repetition) long enough, or a
      // chain of character steps (a counted repetition of characters) long enough.
      const ByteSet& below = v_.subtree_bytes(child);
      const bool utf8 = child.utf8_tail && child.char_span > 0;
      if ((((below & kAscii) & ~loop).none() && ((below & ~kAscii).none() || (chains.loops_on_nonascii && utf8))) ||
          (below & ~chains.main->Upto(child.span)).none() ||
          (utf8 && (below & ~chains.chars->Upto(child.char_span) & kAscii).none() && chains.chars->Upto(child.char_span).any())) {
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

  struct Chains {
    const ChainRuns* main = nullptr;
    const ChainRuns* chars = nullptr;
    bool loops_on_nonascii = false;  // every non-ASCII character leads back to the state
  };

  const Chains& ChainsOf(int32_t state) {
    auto [it, fresh] = chains_.try_emplace(state);
    if (fresh) {
      it->second = {&steps_.MainChain(state), &steps_.CharChain(state), steps_.Get(state).char_next == state};
    }
    return it->second;
  }

  static inline const ByteSet kAscii = [] {
    ByteSet s;
    for (int b = 0; b < 0x80; ++b) s.set(static_cast<size_t>(b));
    return s;
  }();

  const Automaton& a_;
  const Vocabulary& v_;
  const ChainSteps& steps_;
  const ByteSet& follow_;
  FramePool pool_;
  ExpandScratch scratch_;
  std::vector<std::vector<Stack>> sets_;
  std::vector<Expansion> exps_;
  std::vector<uint32_t> bits_;
  size_t accepted_count_ = 0;
  std::vector<int32_t> uncertain_;
  std::unordered_map<int32_t, Chains> chains_;  // memo of steps_ lookups for this walk
};

// Where every valid non-ASCII character from `state` leads, if to one state through states that
// neither enter nor leave a rule; -1 otherwise. Bytes of one class lead alike, so a run of them
// is read once.
int32_t NonAsciiTarget(const Automaton& a, int32_t state) {
  constexpr size_t kMaxStates = 8;  // more distinct states mid-character: give up (no shortcut)
  int32_t target = -1;
  int prev_lead = -1, prev_n = 0, prev_lo = 0, prev_hi = 0;
  for (int lead = 0xC2; lead <= 0xF4; ++lead) {
    const int n = lead <= 0xDF ? 1 : lead <= 0xEF ? 2 : 3;
    const int lo = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
    const int hi = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
    const bool same = prev_lead >= 0 && a.class_of(static_cast<uint8_t>(lead)) == a.class_of(static_cast<uint8_t>(prev_lead)) &&
                      n == prev_n && lo == prev_lo && hi == prev_hi;
    prev_lead = lead, prev_n = n, prev_lo = lo, prev_hi = hi;
    if (same) continue;  // reads exactly as the previous lead
    std::array<int32_t, kMaxStates> cur{}, next{};
    size_t num_cur = 1;
    cur[0] = a.Next(state, static_cast<uint8_t>(lead));
    for (int k = 0; k < n; ++k) {
      size_t num_next = 0;
      for (size_t i = 0; i < num_cur; ++i) {
        if (cur[i] < 0 || !IsSimple(a, cur[i])) return -1;
        const int first = k == 0 ? lo : 0x80, last = k == 0 ? hi : 0xBF;
        for (int c = first; c <= last; ++c) {
          if (c > first && a.class_of(static_cast<uint8_t>(c)) == a.class_of(static_cast<uint8_t>(c - 1))) continue;
          const int32_t t = a.Next(cur[i], static_cast<uint8_t>(c));
          if (std::find(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(num_next), t) != next.begin() + static_cast<std::ptrdiff_t>(num_next)) continue;
          if (num_next == kMaxStates) return -1;
          next[num_next++] = t;
        }
      }
      cur = next;
      num_cur = num_next;
    }
    if (num_cur != 1 || cur[0] < 0 || (target >= 0 && cur[0] != target)) return -1;
    target = cur[0];
  }
  return target;
}

// The byte successor that takes the most bytes of `state`, and those bytes.
std::pair<int32_t, ByteSet> MainSuccessor(const Automaton& a, int32_t state) {
  std::vector<std::pair<int32_t, ByteSet>> targets;
  for (int b = 0; b < 256; ++b) {
    const int32_t t = a.Next(state, static_cast<uint8_t>(b));
    if (t < 0) continue;
    auto it = std::find_if(targets.begin(), targets.end(), [t](const auto& e) { return e.first == t; });
    if (it == targets.end()) it = targets.insert(targets.end(), {t, ByteSet{}});
    it->second.set(static_cast<size_t>(b));
  }
  std::pair<int32_t, ByteSet> best{-1, ByteSet{}};
  for (const auto& e : targets) {
    if (e.second.count() > best.second.count()) best = e;
  }
  return best;
}

}  // namespace

ChainStep ChainSteps::Get(int32_t state) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = steps_.find(state); it != steps_.end()) return it->second;
  }
  ChainStep step;
  if (IsSimple(a_, state)) {
    std::tie(step.main_next, step.main_bytes) = MainSuccessor(a_, state);
    step.char_next = NonAsciiTarget(a_, state);
    for (int b = 0; b < 0x80 && step.char_next >= 0; ++b) {
      if (a_.Next(state, static_cast<uint8_t>(b)) == step.char_next) step.char_ascii.set(static_cast<size_t>(b));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (steps_.emplace(state, step).second) bytes_.fetch_add(sizeof(ChainStep) + 32, std::memory_order_relaxed);
  return step;
}

const ByteSet& ChainRuns::Upto(size_t length) const {
  static const ByteSet kNone;
  if (length == 0) return kNone;
  for (const auto& [last, bytes] : runs) {
    if (length - 1 <= last) return bytes;
  }
  return kNone;
}

const ChainRuns& ChainSteps::MainChain(int32_t state) const { return Chain(state, false); }
const ChainRuns& ChainSteps::CharChain(int32_t state) const { return Chain(state, true); }

const ChainRuns& ChainSteps::Chain(int32_t state, bool chars) const {
  auto& memo = chars ? char_chains_ : main_chains_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = memo.find(state); it != memo.end()) return it->second;
  }
  ChainRuns chain;
  ByteSet common;
  common.set();
  size_t steps = 0;
  for (int32_t s = state; steps < kMaxChain;) {
    const ChainStep step = Get(s);
    const int32_t next = chars ? step.char_next : step.main_next;
    if (next < 0) break;
    const ByteSet now = common & (chars ? step.char_ascii : step.main_bytes);
    if (steps > 0 && now == common) {
      chain.runs.back().first = static_cast<uint16_t>(steps);
    } else {
      chain.runs.emplace_back(static_cast<uint16_t>(steps), now);
    }
    common = now;
    ++steps;
    if (next == s) {  // a loop: every further step is this one
      chain.runs.back().first = static_cast<uint16_t>(kMaxChain - 1);
      break;
    }
    s = next;
  }
  const size_t bytes = 64 + chain.runs.size() * sizeof(chain.runs[0]);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = memo.emplace(state, std::move(chain));
  if (fresh) bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return it->second;
}

size_t ChainSteps::memory_bytes() const { return bytes_.load(std::memory_order_relaxed); }

TokenClasses ClassifyState(const Automaton& automaton, const Vocabulary& vocab, int32_t state, int32_t context,
                           const ChainSteps* steps) {
  if (steps == nullptr) {
    const ChainSteps local(automaton);
    return Classifier(automaton, vocab, state, context, local).Run();
  }
  return Classifier(automaton, vocab, state, context, *steps).Run();
}

CompiledGrammar::CompiledGrammar(Automaton automaton, std::shared_ptr<const Vocabulary> vocab)
    : automaton_(std::move(automaton)), vocab_(std::move(vocab)) {
  automaton_bytes_ = automaton_.num_states() * (static_cast<size_t>(automaton_.num_classes()) * sizeof(int32_t) +
                                                sizeof(StateInfo) + 2 * sizeof(ByteSet));
}

size_t CompiledGrammar::memory_bytes() const {
  return automaton_bytes_ + class_bytes_.load(std::memory_order_relaxed) + chain_steps_.memory_bytes();
}

CompiledGrammar::~CompiledGrammar() = default;

const TokenClasses& CompiledGrammar::Classes(int32_t state, int32_t context) const {
  const uint64_t key = Stack{state, context}.key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = classes_.find(key); it != classes_.end()) return *it->second;
  }
  auto computed = std::make_unique<const TokenClasses>(ClassifyState(automaton_, *vocab_, state, context, &chain_steps_));
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
