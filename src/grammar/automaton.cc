// Grammar -> Automaton (grammar/automaton.h): byte classes, one Thompson NFA and subset
// construction per rule, then productivity pruning, the left-recursion check and FOLLOW sets.
#include "grammar/automaton.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace flashserve::grammar {
namespace {

using base::Error;
using base::ErrorCode;

enum class EdgeKind : uint8_t { kEpsilon, kSet, kRef };

struct NfaEdge {
  EdgeKind kind;
  int32_t arg;  // kSet: index into the set list; kRef: rule
  int32_t to;
};

struct Nfa {
  std::vector<std::vector<NfaEdge>> out;
  int32_t NewState() {
    out.emplace_back();
    return static_cast<int32_t>(out.size() - 1);
  }
};

Error TooLarge(const char* what, size_t limit) {
  return Error(ErrorCode::kResourceExhausted, fmt::format("grammar too large: more than {} {}", limit, what));
}

}  // namespace

class AutomatonBuilder {
 public:
  AutomatonBuilder(const Grammar& g, const BuildLimits& limits) : g_(g), limits_(limits) {}

  base::Result<Automaton> Run() {
    FS_RETURN_IF_ERROR(CheckRules());
    CollectSets();
    ComputeClasses();
    for (size_t r = 0; r < g_.rules().size(); ++r) FS_RETURN_IF_ERROR(BuildRule(static_cast<int32_t>(r)));
    a_.root_ = g_.root();
    for (const Rule& r : g_.rules()) a_.rule_names_.push_back(r.name);
    FS_RETURN_IF_ERROR(Prune());
    FS_RETURN_IF_ERROR(CheckLeftRecursion());
    ComputeFollow();
    ComputeLoops();
    return std::move(a_);
  }

 private:
  base::Status CheckRules() {
    if (g_.root() < 0) return Error(ErrorCode::kInvalidArgument, "grammar has no root rule");
    for (const Rule& r : g_.rules()) {
      if (r.body < 0) return Error(ErrorCode::kInvalidArgument, fmt::format("rule '{}' is used but never defined", r.name));
    }
    return base::Status::Ok();
  }

  // Every byte set the grammar mentions, so bytes no set tells apart share one class.
  void CollectSets() {
    set_index_.assign(g_.num_exprs(), -1);
    for (size_t i = 0; i < g_.num_exprs(); ++i) {
      const Expr& e = g_.expr(static_cast<ExprId>(i));
      if (e.kind == ExprKind::kSet) {
        set_index_[i] = static_cast<int32_t>(sets_.size());
        sets_.push_back(e.set);
      } else if (e.kind == ExprKind::kBytes) {
        for (unsigned char c : e.bytes) byte_set_index(c);
      } else if (e.kind == ExprKind::kAvoid) {
        avoid_[i] = AvoidEdges(e.bytes);
      }
    }
  }

  // The automaton of "bytes without `word`": state k = the longest prefix of `word` just read
  // (k < |word|); edges (from, to, byte set), the sets registered for the byte classes.
  struct AvoidEdge {
    int32_t from, to, set;
  };
  std::vector<AvoidEdge> AvoidEdges(const std::string& word) {
    const size_t n = word.size();
    std::vector<size_t> fail(n + 1, 0);  // KMP failure function
    for (size_t i = 1, k = 0; i < n; ++i) {
      while (k > 0 && word[i] != word[k]) k = fail[k];
      if (word[i] == word[k]) ++k;
      fail[i + 1] = k;
    }
    std::vector<AvoidEdge> edges;
    for (size_t k = 0; k < n; ++k) {
      std::map<size_t, ByteSet> by_target;
      for (int b = 0; b < 256; ++b) {
        size_t j = k;
        while (j > 0 && static_cast<unsigned char>(word[j]) != b) j = fail[j];
        if (static_cast<unsigned char>(word[j]) == b) ++j;
        if (j < n) by_target[j].set(static_cast<size_t>(b));
      }
      for (const auto& [to, set] : by_target) {
        sets_.push_back(set);
        edges.push_back({static_cast<int32_t>(k), static_cast<int32_t>(to), static_cast<int32_t>(sets_.size() - 1)});
      }
    }
    return edges;
  }

  int32_t byte_set_index(uint8_t c) {
    auto it = single_.find(c);
    if (it != single_.end()) return it->second;
    ByteSet s;
    s.set(c);
    sets_.push_back(s);
    return single_[c] = static_cast<int32_t>(sets_.size() - 1);
  }

  void ComputeClasses() {
    std::vector<int> cls(256, 0);
    int n = 1;
    for (const ByteSet& s : sets_) {
      std::map<std::pair<int, bool>, int> remap;
      int next = 0;
      for (int b = 0; b < 256; ++b) {
        auto key = std::make_pair(cls[static_cast<size_t>(b)], static_cast<bool>(s[static_cast<size_t>(b)]));
        auto [it, fresh] = remap.emplace(key, next);
        if (fresh) ++next;
        cls[static_cast<size_t>(b)] = it->second;
      }
      n = next;
    }
    a_.num_classes_ = n;
    representative_.assign(static_cast<size_t>(n), 0);
    for (int b = 255; b >= 0; --b) {
      a_.class_of_[static_cast<size_t>(b)] = static_cast<uint8_t>(cls[static_cast<size_t>(b)]);
      representative_[static_cast<size_t>(cls[static_cast<size_t>(b)])] = static_cast<uint8_t>(b);
    }
  }

  base::Status AddExpr(Nfa* nfa, ExprId id, int32_t from, int32_t to) {
    if (nfa->out.size() > limits_.max_nfa_states) return TooLarge("automaton states while expanding", limits_.max_nfa_states);
    const Expr& e = g_.expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty:
        nfa->out[static_cast<size_t>(from)].push_back({EdgeKind::kEpsilon, 0, to});
        break;
      case ExprKind::kBytes: {
        int32_t cur = from;
        for (size_t i = 0; i < e.bytes.size(); ++i) {
          const int32_t next = i + 1 == e.bytes.size() ? to : nfa->NewState();
          nfa->out[static_cast<size_t>(cur)].push_back({EdgeKind::kSet, byte_set_index(static_cast<uint8_t>(e.bytes[i])), next});
          cur = next;
        }
        break;
      }
      case ExprKind::kSet:
        nfa->out[static_cast<size_t>(from)].push_back({EdgeKind::kSet, set_index_[static_cast<size_t>(id)], to});
        break;
      case ExprKind::kRef:
        nfa->out[static_cast<size_t>(from)].push_back({EdgeKind::kRef, e.rule, to});
        break;
      case ExprKind::kSeq: {
        int32_t cur = from;
        for (size_t i = 0; i < e.items.size(); ++i) {
          const int32_t next = i + 1 == e.items.size() ? to : nfa->NewState();
          FS_RETURN_IF_ERROR(AddExpr(nfa, e.items[i], cur, next));
          cur = next;
        }
        break;
      }
      case ExprKind::kAlt:
        for (ExprId item : e.items) FS_RETURN_IF_ERROR(AddExpr(nfa, item, from, to));
        break;
      case ExprKind::kAvoid: {
        const std::vector<AvoidEdge>& edges = avoid_.at(static_cast<size_t>(id));
        std::vector<int32_t> states(g_.expr(id).bytes.size());
        for (int32_t& s : states) {
          s = nfa->NewState();
          nfa->out[static_cast<size_t>(s)].push_back({EdgeKind::kEpsilon, 0, to});
        }
        nfa->out[static_cast<size_t>(from)].push_back({EdgeKind::kEpsilon, 0, states[0]});
        for (const AvoidEdge& e : edges) {
          nfa->out[static_cast<size_t>(states[static_cast<size_t>(e.from)])].push_back({EdgeKind::kSet, e.set, states[static_cast<size_t>(e.to)]});
        }
        break;
      }
      case ExprKind::kRepeat: {
        int32_t cur = from;
        for (int32_t i = 0; i < e.min; ++i) {
          const int32_t next = nfa->NewState();
          FS_RETURN_IF_ERROR(AddExpr(nfa, e.items[0], cur, next));
          cur = next;
        }
        if (e.max == kUnbounded) {
          const int32_t loop = nfa->NewState(), back = nfa->NewState();
          nfa->out[static_cast<size_t>(cur)].push_back({EdgeKind::kEpsilon, 0, loop});
          FS_RETURN_IF_ERROR(AddExpr(nfa, e.items[0], loop, back));
          nfa->out[static_cast<size_t>(back)].push_back({EdgeKind::kEpsilon, 0, loop});
          nfa->out[static_cast<size_t>(loop)].push_back({EdgeKind::kEpsilon, 0, to});
        } else {
          for (int32_t i = e.min; i < e.max; ++i) {
            nfa->out[static_cast<size_t>(cur)].push_back({EdgeKind::kEpsilon, 0, to});
            const int32_t next = nfa->NewState();
            FS_RETURN_IF_ERROR(AddExpr(nfa, e.items[0], cur, next));
            cur = next;
          }
          nfa->out[static_cast<size_t>(cur)].push_back({EdgeKind::kEpsilon, 0, to});
        }
        break;
      }
    }
    return base::Status::Ok();
  }

  static std::vector<int32_t> Closure(const Nfa& nfa, std::vector<int32_t> states, int32_t final) {
    std::vector<char> seen(nfa.out.size(), 0);
    std::vector<int32_t> work = states;
    for (int32_t s : states) seen[static_cast<size_t>(s)] = 1;
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      for (const NfaEdge& e : nfa.out[static_cast<size_t>(s)]) {
        if (e.kind == EdgeKind::kEpsilon && !seen[static_cast<size_t>(e.to)]) {
          seen[static_cast<size_t>(e.to)] = 1;
          states.push_back(e.to);
          work.push_back(e.to);
        }
      }
    }
    // Only states that read something (or the final one) tell two closures apart, so the
    // state after a loop's entry and the state after one turn of it are the same DFA state.
    std::erase_if(states, [&](int32_t s) {
      if (s == final) return false;
      for (const NfaEdge& e : nfa.out[static_cast<size_t>(s)]) {
        if (e.kind != EdgeKind::kEpsilon) return false;
      }
      return true;
    });
    std::sort(states.begin(), states.end());
    return states;
  }

  // Subset construction of one rule; its states are appended to the automaton.
  base::Status BuildRule(int32_t rule) {
    Nfa nfa;
    const int32_t start = nfa.NewState(), final = nfa.NewState();
    FS_RETURN_IF_ERROR(AddExpr(&nfa, g_.rules()[static_cast<size_t>(rule)].body, start, final));
    const size_t nc = static_cast<size_t>(a_.num_classes_);
    const auto base_id = static_cast<int32_t>(a_.states_.size());
    std::map<std::vector<int32_t>, int32_t> ids;
    std::vector<std::vector<int32_t>> pending;
    auto intern = [&](std::vector<int32_t> set) -> int32_t {
      auto [it, fresh] = ids.emplace(std::move(set), base_id + static_cast<int32_t>(ids.size()));
      if (fresh) pending.push_back(it->first);
      return it->second;
    };
    a_.rule_start_.push_back(intern(Closure(nfa, {start}, final)));
    for (size_t done = 0; done < pending.size(); ++done) {
      if (a_.states_.size() >= limits_.max_states) return TooLarge("automaton states", limits_.max_states);
      const std::vector<int32_t> set = pending[done];
      StateInfo info;
      info.rule = rule;
      info.accepting = std::binary_search(set.begin(), set.end(), final);
      std::vector<int32_t> row(nc, -1);
      std::map<std::vector<int32_t>, int32_t> memo;
      for (size_t c = 0; c < nc; ++c) {
        std::vector<int32_t> targets;
        for (int32_t s : set) {
          for (const NfaEdge& e : nfa.out[static_cast<size_t>(s)]) {
            if (e.kind == EdgeKind::kSet && sets_[static_cast<size_t>(e.arg)][representative_[c]]) targets.push_back(e.to);
          }
        }
        if (targets.empty()) continue;
        std::sort(targets.begin(), targets.end());
        targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
        auto it = memo.find(targets);
        if (it == memo.end()) it = memo.emplace(targets, intern(Closure(nfa, targets, final))).first;
        row[c] = it->second;
        info.has_bytes = true;
      }
      std::map<int32_t, std::vector<int32_t>> by_rule;
      for (int32_t s : set) {
        for (const NfaEdge& e : nfa.out[static_cast<size_t>(s)]) {
          if (e.kind == EdgeKind::kRef) by_rule[e.arg].push_back(e.to);
        }
      }
      info.refs_begin = static_cast<uint32_t>(a_.refs_.size());
      for (auto& [target_rule, targets] : by_rule) {
        std::sort(targets.begin(), targets.end());
        targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
        a_.refs_.push_back({target_rule, intern(Closure(nfa, targets, final))});
      }
      info.refs_end = static_cast<uint32_t>(a_.refs_.size());
      a_.states_.push_back(info);
      a_.next_.insert(a_.next_.end(), row.begin(), row.end());
    }
    return base::Status::Ok();
  }

  // Keeps only what can still finish: a state is live when it accepts or leads (by a byte or a
  // productive rule) to a live state. Edges into dead states are removed, so a matcher never
  // enters a state with no way out.
  base::Status Prune() {
    const size_t n = a_.states_.size(), nc = static_cast<size_t>(a_.num_classes_);
    std::vector<char> live(n, 0), productive(a_.rule_start_.size(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t s = 0; s < n; ++s) {
        if (live[s]) continue;
        bool ok = a_.states_[s].accepting;
        for (size_t c = 0; !ok && c < nc; ++c) {
          const int32_t t = a_.next_[s * nc + c];
          ok = t >= 0 && live[static_cast<size_t>(t)];
        }
        for (const RefEdge& e : a_.refs(static_cast<int32_t>(s))) {
          ok = ok || (productive[static_cast<size_t>(e.rule)] && live[static_cast<size_t>(e.next)]);
        }
        if (!ok) continue;
        live[s] = 1;
        changed = true;
        const int32_t rule = a_.states_[s].rule;
        if (a_.rule_start_[static_cast<size_t>(rule)] == static_cast<int32_t>(s)) productive[static_cast<size_t>(rule)] = 1;
      }
    }
    if (!productive[static_cast<size_t>(a_.root_)]) {
      return Error(ErrorCode::kInvalidArgument, fmt::format("grammar matches nothing: rule '{}' can never finish",
                                                            a_.rule_names_[static_cast<size_t>(a_.root_)]));
    }
    std::vector<RefEdge> refs;
    for (size_t s = 0; s < n; ++s) {
      bool any_byte = false;
      for (size_t c = 0; c < nc; ++c) {
        int32_t& t = a_.next_[s * nc + c];
        if (t >= 0 && !live[static_cast<size_t>(t)]) t = -1;
        any_byte = any_byte || t >= 0;
      }
      StateInfo& info = a_.states_[s];
      const uint32_t begin = static_cast<uint32_t>(refs.size());
      for (uint32_t i = info.refs_begin; i < info.refs_end; ++i) {
        const RefEdge& e = a_.refs_[i];
        if (productive[static_cast<size_t>(e.rule)] && live[static_cast<size_t>(e.next)]) refs.push_back(e);
      }
      info.refs_begin = begin;
      info.refs_end = static_cast<uint32_t>(refs.size());
      info.has_bytes = any_byte;
    }
    a_.refs_ = std::move(refs);
    return base::Status::Ok();
  }

  // ends_[s]: the state's rule can complete from s without a byte; nullable_[r]: rule r can
  // match the empty string. One joint fixpoint.
  void ComputeNullable() {
    const size_t n = a_.states_.size();
    ends_.assign(n, 0);
    nullable_.assign(a_.rule_start_.size(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t s = 0; s < n; ++s) {
        if (ends_[s]) continue;
        bool ok = a_.states_[s].accepting;
        for (const RefEdge& e : a_.refs(static_cast<int32_t>(s))) {
          ok = ok || (nullable_[static_cast<size_t>(e.rule)] && ends_[static_cast<size_t>(e.next)]);
        }
        if (!ok) continue;
        ends_[s] = 1;
        changed = true;
        const int32_t rule = a_.states_[s].rule;
        if (a_.rule_start_[static_cast<size_t>(rule)] == static_cast<int32_t>(s)) nullable_[static_cast<size_t>(rule)] = 1;
      }
    }
  }

  // A rule that can reach itself without consuming a byte would make the stack grow forever.
  base::Status CheckLeftRecursion() {
    ComputeNullable();
    const size_t rules = a_.rule_start_.size();
    std::vector<std::vector<int32_t>> corner(rules);
    std::vector<size_t> stamp(a_.states_.size(), 0);
    for (size_t r = 0; r < rules; ++r) {
      std::vector<int32_t> work = {a_.rule_start_[r]};
      while (!work.empty()) {
        const int32_t s = work.back();
        work.pop_back();
        if (stamp[static_cast<size_t>(s)] == r + 1) continue;
        stamp[static_cast<size_t>(s)] = r + 1;
        for (const RefEdge& e : a_.refs(s)) {
          corner[r].push_back(e.rule);
          if (nullable_[static_cast<size_t>(e.rule)]) work.push_back(e.next);
        }
      }
    }
    std::vector<int> color(rules, 0);  // 0 new, 1 on the path, 2 done
    std::vector<int32_t> path;
    auto visit = [&](auto&& self, int32_t r) -> int32_t {
      color[static_cast<size_t>(r)] = 1;
      path.push_back(r);
      for (int32_t q : corner[static_cast<size_t>(r)]) {
        if (color[static_cast<size_t>(q)] == 1) return q;
        if (color[static_cast<size_t>(q)] == 0) {
          if (int32_t hit = self(self, q); hit >= 0) return hit;
        }
      }
      color[static_cast<size_t>(r)] = 2;
      path.pop_back();
      return -1;
    };
    for (size_t r = 0; r < rules; ++r) {
      if (color[r] != 0) continue;
      if (int32_t hit = visit(visit, static_cast<int32_t>(r)); hit >= 0) {
        std::string cycle;
        auto it = std::find(path.begin(), path.end(), hit);
        for (; it != path.end(); ++it) cycle += a_.rule_names_[static_cast<size_t>(*it)] + " -> ";
        return Error(ErrorCode::kInvalidArgument,
                     fmt::format("left recursion is not supported: {}{}", cycle, a_.rule_names_[static_cast<size_t>(hit)]));
      }
    }
    return base::Status::Ok();
  }

  // FIRST(state): bytes that can come next from a state; FOLLOW(rule): bytes that can come
  // right after the rule completes, in any context.
  void ComputeFollow() {
    const size_t n = a_.states_.size(), nc = static_cast<size_t>(a_.num_classes_);
    std::vector<ByteSet> first(n);
    const std::vector<char>& ends = ends_;
    for (size_t s = 0; s < n; ++s) {
      for (int b = 0; b < 256; ++b) {
        if (a_.next_[s * nc + a_.class_of_[static_cast<size_t>(b)]] >= 0) first[s].set(static_cast<size_t>(b));
      }
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t s = 0; s < n; ++s) {
        ByteSet f = first[s];
        for (const RefEdge& e : a_.refs(static_cast<int32_t>(s))) {
          f |= first[static_cast<size_t>(a_.rule_start_[static_cast<size_t>(e.rule)])];
          if (nullable_[static_cast<size_t>(e.rule)]) f |= first[static_cast<size_t>(e.next)];
        }
        if (f != first[s]) first[s] = f, changed = true;
      }
    }
    a_.follow_.assign(a_.rule_start_.size(), ByteSet{});
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t s = 0; s < n; ++s) {
        for (const RefEdge& e : a_.refs(static_cast<int32_t>(s))) {
          ByteSet f = a_.follow_[static_cast<size_t>(e.rule)] | first[static_cast<size_t>(e.next)];
          if (ends[static_cast<size_t>(e.next)]) f |= a_.follow_[static_cast<size_t>(a_.states_[s].rule)];
          if (f != a_.follow_[static_cast<size_t>(e.rule)]) a_.follow_[static_cast<size_t>(e.rule)] = f, changed = true;
        }
      }
    }
  }

  void ComputeLoops() {
    a_.loops_.assign(a_.states_.size(), ByteSet{});
    for (size_t s = 0; s < a_.states_.size(); ++s) {
      for (int b = 0; b < 256; ++b) {
        if (a_.Next(static_cast<int32_t>(s), static_cast<uint8_t>(b)) == static_cast<int32_t>(s)) a_.loops_[s].set(static_cast<size_t>(b));
      }
    }
  }

  const Grammar& g_;
  BuildLimits limits_;
  Automaton a_;
  std::vector<ByteSet> sets_;
  std::map<uint8_t, int32_t> single_;
  std::map<size_t, std::vector<AvoidEdge>> avoid_;  // by expression id
  std::vector<int32_t> set_index_;
  std::vector<uint8_t> representative_;
  std::vector<char> nullable_, ends_;
};

base::Result<Automaton> Automaton::Build(const Grammar& grammar, const BuildLimits& limits) {
  return AutomatonBuilder(grammar, limits).Run();
}

}  // namespace flashserve::grammar
