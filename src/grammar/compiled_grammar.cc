// Per-state token classification over the vocabulary trie (grammar/compiled_grammar.h).
#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <array>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "grammar/char_profile.h"
#include "grammar/pda.h"

namespace flashserve::grammar {
namespace {

// A state that neither enters nor leaves a rule: reading a byte is one transition.
bool IsSimple(const Automaton& a, int32_t state) {
  const StateInfo& info = a.info(state);
  return !info.accepting && info.refs_begin == info.refs_end;
}

// Stores the accepted tokens of `bits` (`count` of them) as the bitset, or as a list when that
// is smaller.
void SetAccepted(std::vector<uint32_t> bits, size_t count, TokenClasses* out) {
  out->accepted.clear();
  out->accepted_bits.clear();
  if (count > bits.size()) {
    out->accepted_bits = std::move(bits);
    return;
  }
  for (size_t w = 0; w < bits.size(); ++w) {
    for (uint32_t b = bits[w]; b; b &= b - 1) out->accepted.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(b))));
  }
}

// A depth-first walk of the trie carrying the set of stacks each prefix leads to.
class Classifier {
 public:
  // With `profile` (v is its others()), subtrees whose tokens all stop being characters at a
  // byte of `dead` (no state of the run takes it) are rejected without a walk.
  Classifier(const Automaton& a, const Vocabulary& v, int32_t state, int32_t context, const ChainSteps& steps,
             const CharProfile* profile = nullptr, const ByteSet& dead = {})
      : a_(a), v_(v), steps_(steps), profile_(profile), dead_(dead), follow_(a.follow(a.info(context >= 0 ? context : state).rule)), bits_(v.mask_words(), 0),
        uncertain_cap_(context == kAlone ? kContextAbove : SIZE_MAX) {
    const size_t depth = v.max_token_bytes();
    sets_.resize(depth + 2);
    exps_.resize(depth + 2);
    const int32_t parent = context == kAlone ? kSentinelParent : context == kAtRoot ? kRootParent : pool_.Intern(context, kSentinelParent);
    sets_[0] = {Stack{state, parent}};
  }

  TokenClasses Run() {
    Walk(0, 0, false);
    TokenClasses out;
    if (uncertain_.size() > uncertain_cap_) {
      out.needs_context = true;
      return out;
    }
    SetAccepted(std::move(bits_), accepted_count_, &out);
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

  bool Dies(int32_t node) const {
    if (profile_ == nullptr) return false;
    const CharProfile::Exits& e = profile_->exits(static_cast<size_t>(node));
    return !e.inside && (e.at_start & ~dead_).none();
  }

  void Walk(int32_t node, size_t depth, bool pending) {
    const std::vector<Stack>& set = sets_[depth];
    if (set.size() == 1 && Simple(set[0].top)) return WalkSimple(node, depth, set[0].top, set[0].parent, pending);
    Expansion& e = exps_[depth];
    Expand(a_, &pool_, set, &e, &scratch_);
    const auto nodes = v_.nodes();
    const auto sorted = v_.sorted_tokens();
    for (int32_t c = node + 1; c < nodes[static_cast<size_t>(node)].subtree_end; c = nodes[static_cast<size_t>(c)].subtree_end) {
      if (Dies(c)) continue;
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
      if (uncertain_.size() > uncertain_cap_) return;
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
      if (Dies(c)) continue;
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
          if (uncertain_.size() > uncertain_cap_) return;
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
      if (uncertain_.size() > uncertain_cap_) return;
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
  const CharProfile* profile_;
  const ByteSet dead_;
  const ByteSet& follow_;
  FramePool pool_;
  ExpandScratch scratch_;
  std::vector<std::vector<Stack>> sets_;
  std::vector<Expansion> exps_;
  std::vector<uint32_t> bits_;
  size_t accepted_count_ = 0;
  const size_t uncertain_cap_;  // more uncertain tokens than this: stop (the class needs context)
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

// The chain from `state`, step by step (at most kMaxChain steps).
ChainRuns ChainSteps::Follow(int32_t state, bool chars) const {
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
  return chain;
}

namespace {

// The chain of a state whose step takes `bytes`, from the chain of the state it leads to.
ChainRuns Prepend(const ByteSet& bytes, const ChainRuns& tail) {
  constexpr size_t kLast = ChainSteps::kMaxChain - 1;
  ChainRuns out;
  out.runs.emplace_back(uint16_t{0}, bytes);
  for (const auto& [last, set] : tail.runs) {
    const auto at = static_cast<uint16_t>(std::min<size_t>(last + 1u, kLast));
    const ByteSet now = bytes & set;
    if (now == out.runs.back().second) {
      out.runs.back().first = at;
    } else {
      out.runs.emplace_back(at, now);
    }
    if (at == kLast) break;
  }
  return out;
}

}  // namespace

// A state's chain is its step followed by the next state's chain, so the chains of the states
// met before one already known are built back from it: a new position of a long counted
// repetition costs one step, not kMaxChain.
const ChainRuns& ChainSteps::Chain(int32_t state, bool chars) const {
  auto& memo = chars ? char_chains_ : main_chains_;
  auto find = [&](int32_t s) -> const ChainRuns* {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memo.find(s);
    return it == memo.end() ? nullptr : &it->second;
  };
  auto keep = [&](int32_t s, ChainRuns chain) -> const ChainRuns& {
    const size_t bytes = 64 + chain.runs.size() * sizeof(chain.runs[0]);
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = memo.emplace(s, std::move(chain));
    if (fresh) bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return it->second;
  };
  if (const ChainRuns* known = find(state)) return *known;
  std::vector<std::pair<int32_t, ByteSet>> path;  // states without a chain yet, and their step's bytes
  const ChainRuns* tail = nullptr;
  for (int32_t s = state; tail == nullptr;) {
    if ((tail = find(s)) != nullptr) break;
    const ChainStep step = Get(s);
    const int32_t next = chars ? step.char_next : step.main_next;
    if (next < 0 || next == s || path.size() + 1 == kMaxChain) {
      tail = &keep(s, Follow(s, chars));
      break;
    }
    path.emplace_back(s, chars ? step.char_ascii : step.main_bytes);
    s = next;
  }
  for (auto it = path.rbegin(); it != path.rend(); ++it) tail = &keep(it->first, Prepend(it->second, *tail));
  return *tail;
}

size_t ChainSteps::memory_bytes() const { return bytes_.load(std::memory_order_relaxed); }

namespace {

// Whether the state `length` character steps on takes no further character and leaves no rule:
// a token of more characters than the run holds then dies inside it.
bool RunEndsAfter(const Automaton& a, const ChainSteps& steps, int32_t state, size_t length, const ByteSet& ascii) {
  for (size_t i = 0; i < length; ++i) state = steps.Get(state).char_next;
  if (state < 0 || !IsSimple(a, state)) return false;
  for (int b = 0; b < 0x80; ++b) {
    if (ascii[static_cast<size_t>(b)] && a.Next(state, static_cast<uint8_t>(b)) >= 0) return false;
  }
  for (int lead = 0xC2; lead <= 0xF4; ++lead) {
    if (a.Next(state, static_cast<uint8_t>(lead)) >= 0) return false;
  }
  return true;
}

// Of `exits`, the bytes no state of the run takes, from `state` to `last` character steps on
// (the states of the run are simple: a byte they refuse ends the token there). Bytes of one
// class lead alike, so each class is tried once per state.
ByteSet DeadExits(const Automaton& a, const ChainSteps& steps, int32_t state, size_t last, const ByteSet& exits) {
  std::vector<std::pair<uint8_t, ByteSet>> classes;  // (a byte of the class, the class's exits)
  for (size_t b = exits._Find_first(); b < exits.size(); b = exits._Find_next(b)) {
    const uint8_t c = a.class_of(static_cast<uint8_t>(b));
    auto it = std::find_if(classes.begin(), classes.end(), [&](const auto& e) { return a.class_of(e.first) == c; });
    if (it == classes.end()) it = classes.insert(classes.end(), {static_cast<uint8_t>(b), ByteSet{}});
    it->second.set(b);
  }
  for (size_t j = 0; state >= 0 && !classes.empty(); ++j) {
    std::erase_if(classes, [&](const auto& e) { return a.Next(state, e.first) >= 0; });
    if (j == last) break;
    state = steps.Get(state).char_next;
  }
  ByteSet dead;
  for (const auto& e : classes) dead |= e.second;
  return dead;
}

// A state that starts a run of character steps, each taking the same ASCII bytes and every
// non-ASCII character (a JSON string, bounded or not): the tokens made only of those characters
// are accepted when the run holds them and rejected otherwise, by bitset; only the rest of the
// vocabulary is walked. Nothing when the state starts no such run.
std::optional<TokenClasses> ClassifyCharRun(const Automaton& a, const Vocabulary& vocab, int32_t state, int32_t context,
                                            const ChainSteps& steps) {
  if (!IsSimple(a, state)) return std::nullopt;
  const ChainRuns& chain = steps.CharChain(state);
  if (chain.runs.size() != 1 || chain.runs[0].second.none()) return std::nullopt;
  const size_t length = static_cast<size_t>(chain.runs[0].first) + 1;
  const ByteSet& ascii = chain.runs[0].second;
  const CharProfile* profile = vocab.Characters(ascii);
  if (profile == nullptr) return std::nullopt;  // the vocabulary keeps no more profiles
  // A token reads at most `reach` characters along the run; a shorter run must end cleanly.
  const size_t reach = std::max(profile->max_chars(), profile->max_exit_chars());
  if (length <= reach && !RunEndsAfter(a, steps, state, length, ascii)) return std::nullopt;
  const ByteSet dead = DeadExits(a, steps, state, std::min(length, profile->max_exit_chars()), profile->exit_bytes());
  TokenClasses out = Classifier(a, profile->others(), state, context, steps, profile, dead).Run();
  if (out.needs_context) return out;
  std::vector<uint32_t> bits(vocab.mask_words(), 0);
  const std::span<const uint32_t> within = profile->Within(length);
  std::copy(within.begin(), within.end(), bits.begin());
  for (size_t w = 0; w < out.accepted_bits.size(); ++w) bits[w] |= out.accepted_bits[w];
  for (int32_t t : out.accepted) bits[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
  size_t count = 0;
  for (uint32_t w : bits) count += static_cast<size_t>(__builtin_popcount(w));
  SetAccepted(std::move(bits), count, &out);
  return out;
}

}  // namespace

TokenClasses ClassifyState(const Automaton& automaton, const Vocabulary& vocab, int32_t state, int32_t context,
                           const ChainSteps* steps) {
  if (steps == nullptr) {
    const ChainSteps local(automaton);
    return ClassifyState(automaton, vocab, state, context, &local);
  }
  if (auto run = ClassifyCharRun(automaton, vocab, state, context, *steps)) return *std::move(run);
  return Classifier(automaton, vocab, state, context, *steps).Run();
}

TokenClasses ClassifyStateByWalk(const Automaton& automaton, const Vocabulary& vocab, int32_t state, int32_t context) {
  const ChainSteps steps(automaton);
  return Classifier(automaton, vocab, state, context, steps).Run();
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
