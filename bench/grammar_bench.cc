// Structured-output costs on the DeepSeek vocabulary: for every schema of a set, compile time
// (schema -> automaton), then a seeded random walk of allowed tokens timing each token mask
// (first uses of a state include its vocabulary classification), then the same walk again on
// the same compiled grammar (a schema sent again: the server caches compiled grammars). Prints
// p50 / p99 / max and the fraction of schemas supported, next to the goals; asserts nothing.
//
//   grammar_bench [--tokenizer PATH] [--schemas FILE.jsonl] [--tokens N] [--only NAME] [--slowest K] [--trace US]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "grammar/grammar_cache.h"
#include "grammar/matcher.h"
#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace flashserve;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

struct Walk {
  std::vector<double> masks_us;
  int tokens = 0;
  bool completed = false;
};

// trace_us > 0: print every mask slower than that, with the classifications it made.
Walk RandomWalk(const std::shared_ptr<const grammar::CompiledGrammar>& g, uint32_t seed, int max_tokens, double trace_us = 0) {
  Walk w;
  grammar::Matcher m(g);
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(g->vocab().mask_words());
  std::vector<int32_t> allowed;
  const int32_t end = g->vocab().end_tokens()[0];
  int32_t last = -1;
  for (int step = 0; step < max_tokens && !m.terminated(); ++step) {
    const size_t classified = g->classified();
    const double t0 = base::MonotonicSeconds();
    m.FillMask(mask);
    w.masks_us.push_back((base::MonotonicSeconds() - t0) * 1e6);
    if (trace_us > 0 && w.masks_us.back() > trace_us) {
      std::printf("    step %3d: %7.1f us, %zu states classified, after \"%s\"\n", step, w.masks_us.back(),
                  g->classified() - classified, m.num_tokens() ? g->vocab().bytes(last).c_str() : "");
    }
    allowed.clear();
    for (size_t i = 0; i < mask.size(); ++i) {
      for (uint32_t bits = mask[i]; bits; bits &= bits - 1) allowed.push_back(static_cast<int32_t>(i * 32 + __builtin_ctz(bits)));
    }
    if (allowed.empty()) {
      std::fprintf(stderr, "dead end at step %d\n", step);
      break;
    }
    // Past half the budget, end as soon as the grammar allows (a model answers and stops).
    int32_t pick = allowed[rng() % allowed.size()];
    if (step > max_tokens / 2 && std::find(allowed.begin(), allowed.end(), end) != allowed.end()) pick = end;
    last = pick;
    if (!m.AcceptToken(pick)) {
      std::fprintf(stderr, "mask allowed a token the matcher refused\n");
      break;
    }
    ++w.tokens;
  }
  w.completed = m.terminated();
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tok_path = FLASHSERVE_ROOT "/third_party/tokenizer/deepseek_v3/tokenizer.json";
  std::string schemas_path = FLASHSERVE_ROOT "/bench/data/grammar_schemas.jsonl";
  std::string only;
  int slowest = 0;
  int max_tokens = 128;
  double trace_us = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokenizer")) tok_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--schemas")) schemas_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--tokens")) max_tokens = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--slowest")) slowest = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--trace")) trace_us = std::atof(argv[i + 1]);
  }
  auto tok = tokenizer::Tokenizer::Load(tok_path);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.error().ToString().c_str());
    return 1;
  }
  const double v0 = base::MonotonicSeconds();
  const auto eos = (*tok)->TokenId("<｜end▁of▁sentence｜>");
  auto vocab = grammar::VocabularyFromTokenizer(**tok, {eos.value_or(1)}, (*tok)->vocab_size());
  const double v1 = base::MonotonicSeconds();
  grammar::PrepareJsonStrings(vocab);  // as the server's grammar cache does when it starts
  std::printf("vocabulary: %zu tokens, %zu trie nodes, built in %.1f ms; JSON strings prepared in %.1f ms\n", vocab->size(),
              vocab->nodes().size(), (v1 - v0) * 1e3, (base::MonotonicSeconds() - v1) * 1e3);

  std::ifstream in(schemas_path);
  std::string line;
  std::vector<double> compile_ms, masks_us, first_mask_us, warm_us;
  int total = 0, supported = 0, completed = 0;
  std::vector<std::pair<double, std::string>> slow;  // (first-use masks over 500 us, in us; schema)
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto entry = nlohmann::ordered_json::parse(line);
    const std::string name = entry.value("name", "");
    if (!only.empty() && name != only) continue;
    ++total;
    const protocol::OutputConstraint c{protocol::ConstraintKind::kJsonSchema, entry["schema"].dump()};
    const double t0 = base::MonotonicSeconds();
    auto g = grammar::CompileConstraint(c, vocab);
    const double ms = (base::MonotonicSeconds() - t0) * 1e3;
    if (!g.ok()) {
      std::printf("  unsupported %-28s %s\n", name.c_str(), g.error().message().c_str());
      continue;
    }
    ++supported;
    compile_ms.push_back(ms);
    const Walk w = RandomWalk(*g, static_cast<uint32_t>(total), max_tokens, trace_us);
    if (!w.masks_us.empty()) first_mask_us.push_back(w.masks_us[0]);
    masks_us.insert(masks_us.end(), w.masks_us.begin(), w.masks_us.end());
    const Walk again = RandomWalk(*g, static_cast<uint32_t>(total), max_tokens);
    warm_us.insert(warm_us.end(), again.masks_us.begin(), again.masks_us.end());
    completed += w.completed;
    double over = 0;
    for (double us : w.masks_us) over += us > 500 ? us : 0;
    slow.push_back({over, name});
    if (!only.empty()) {
      std::printf("  %s: compile %.2f ms, %zu states, %d tokens, masks p50 %.1f us max %.1f us\n", name.c_str(), ms,
                  (*g)->automaton().num_states(), w.tokens, Percentile(w.masks_us, 0.5), Percentile(w.masks_us, 1.0));
    }
  }
  std::sort(slow.rbegin(), slow.rend());
  for (int i = 0; i < slowest && i < static_cast<int>(slow.size()); ++i)
    std::printf("  slow: %-32s %.1f ms in first-use masks over 500 us\n", slow[static_cast<size_t>(i)].second.c_str(),
                slow[static_cast<size_t>(i)].first / 1e3);
  std::printf("schemas: %d, supported %d (%.1f%%; goal >= 95%%), walks ended by the grammar %d\n", total, supported,
              total ? 100.0 * supported / total : 0.0, completed);
  std::printf("compile (schema -> automaton): p50 %.2f ms, p99 %.2f ms, max %.2f ms (goal p50 <= 20 ms)\n",
              Percentile(compile_ms, 0.5), Percentile(compile_ms, 0.99), Percentile(compile_ms, 1.0));
  std::printf("first mask of a schema (classifies its first states): p50 %.0f us, p99 %.0f us\n",
              Percentile(first_mask_us, 0.5), Percentile(first_mask_us, 0.99));
  std::printf("token masks, first use of each schema: %zu, p50 %.1f us, p99 %.1f us, max %.1f us (goal p50 <= 50 us, p99 <= 500 us)\n",
              masks_us.size(), Percentile(masks_us, 0.5), Percentile(masks_us, 0.99), Percentile(masks_us, 1.0));
  std::printf("token masks, the schema sent again: %zu, p50 %.1f us, p99 %.1f us, max %.1f us\n", warm_us.size(),
              Percentile(warm_us, 0.5), Percentile(warm_us, 0.99), Percentile(warm_us, 1.0));
  return 0;
}
