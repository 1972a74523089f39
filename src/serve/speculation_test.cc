// Speculative decoding in the serving loop emits exactly the tokens and log-probs of plain
// decoding: greedy and seeded sampling with penalties, batched, n choices, stop tokens and
// max_tokens inside an accepted run, a prefix-cache resume and a JSON grammar; with the
// checkpoint's MTP drafts (which random weights rarely get right) and with an oracle replaying
// the plain continuation with some drafts spoilt (so runs are accepted, cut and finished).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>
#include <mutex>

#include "engine/test_model.h"
#include "grammar/grammar_cache.h"
#include "serve/engine_loop.h"
#include "serve/test_requests.h"
#include "serve/test_store.h"
#include "serve/verify_budget.h"

namespace flashserve::serve {
namespace {

using engine::testing::RandomTokens;
using engine::testing::TestModel;

using Outcome = testing::Collected;

protocol::GenerateRequest Request(std::string id, std::vector<int32_t> prompt, int max_tokens, uint64_t seed,
                                  float temperature) {
  protocol::GenerateRequest r = testing::Request(std::move(id), std::move(prompt), max_tokens, seed);
  r.sampling.temperature = temperature;
  return r;
}

// A mix: greedy, sampled, sampled with top-p and penalties, two choices.
std::vector<protocol::GenerateRequest> Mix() {
  std::vector<protocol::GenerateRequest> out;
  out.push_back(Request("greedy", RandomTokens(140, 1), 40, 1, 0.0f));
  out.push_back(Request("sampled", RandomTokens(60, 2), 40, 7, 0.9f));
  protocol::GenerateRequest p = Request("penalised", RandomTokens(30, 3), 40, 9, 0.7f);
  p.sampling.top_p = 0.8f;
  p.sampling.presence_penalty = 0.5f;
  p.sampling.frequency_penalty = 0.3f;
  out.push_back(p);
  protocol::GenerateRequest n = Request("choices", RandomTokens(50, 4), 24, 11, 1.0f);
  n.n = 2;
  out.push_back(n);
  return out;
}

std::map<std::string, Outcome> RunAll(const LoopConfig& config, const std::vector<protocol::GenerateRequest>& requests,
                                   std::shared_ptr<grammar::GrammarCache> grammars = nullptr,
                                   ServiceStats* stats = nullptr, const engine::Model& model = TestModel()) {
  EngineLoop loop(model, engine::EngineOptions{}, config);
  if (grammars) loop.SetGrammars(grammars);
  std::map<std::string, Outcome> outs;
  for (const protocol::GenerateRequest& r : requests) {
    Outcome* o = &outs[r.id];
    EXPECT_TRUE(loop.Submit(r, testing::Collect(o)).ok());
  }
  for (int step = 0; step < 5000; ++step) {
    if (std::all_of(outs.begin(), outs.end(), [](const auto& kv) { return kv.second.done; })) break;
    loop.StepOnce();
  }
  for (const auto& [id, o] : outs) EXPECT_TRUE(o.done) << id;
  if (stats) *stats = loop.Stats();
  return outs;
}

LoopConfig Plain() {
  LoopConfig c;
  c.sched.max_step_tokens = 256;
  return c;
}

void ExpectSameOutput(const std::map<std::string, Outcome>& a, const std::map<std::string, Outcome>& b,
                      const std::string& what) {
  for (const auto& [id, o] : a) {
    const Outcome& other = b.at(id);
    EXPECT_EQ(o.tokens, other.tokens) << what << ": " << id;
    EXPECT_EQ(o.logprobs, other.logprobs) << what << ": " << id;
    EXPECT_EQ(o.finish, other.finish) << what << ": " << id;
    EXPECT_EQ(o.error, other.error) << what << ": " << id;
    EXPECT_EQ(o.usage.completion_tokens, other.usage.completion_tokens) << what << ": " << id;
  }
}

// Drafts from the plain run's output of whichever request has these tokens as a prefix, every
// `spoil`-th draft replaced by another token; none for prompts it does not know.
struct Oracle {
  std::vector<std::vector<int32_t>> runs;  // prompt + plain output of each choice
  int spoil = 4;
  mutable std::mutex mu;
  mutable int64_t calls = 0;

  std::vector<int32_t> operator()(std::span<const int32_t> tokens, int k) const {
    std::lock_guard<std::mutex> lock(mu);
    for (const std::vector<int32_t>& run : runs) {
      if (run.size() <= tokens.size() || !std::equal(tokens.begin(), tokens.end(), run.begin())) continue;
      std::vector<int32_t> drafts;
      for (size_t i = tokens.size(); i < run.size() && static_cast<int>(drafts.size()) < k; ++i) {
        const bool spoilt = ++calls % spoil == 0;
        drafts.push_back(spoilt ? (run[i] + 1) % 1280 : run[i]);
      }
      return drafts;
    }
    return {};
  }
};

std::shared_ptr<Oracle> OracleOf(const std::vector<protocol::GenerateRequest>& requests,
                                 const std::map<std::string, Outcome>& plain, int spoil) {
  auto oracle = std::make_shared<Oracle>();
  oracle->spoil = spoil;
  for (const protocol::GenerateRequest& r : requests)
    for (const auto& [choice, tokens] : plain.at(r.id).tokens) {
      std::vector<int32_t> run = r.prompt;
      run.insert(run.end(), tokens.begin(), tokens.end());
      oracle->runs.push_back(std::move(run));
    }
  return oracle;
}

TEST(Speculation, MtpDraftsGiveThePlainOutput) {
  const auto requests = Mix();
  const auto plain = RunAll(Plain(), requests);
  for (int k : {1, 3}) {
    LoopConfig c = Plain();
    c.speculative.drafter = true;
    c.speculative.num_draft_tokens = k;
    ServiceStats stats;
    const auto spec = RunAll(c, requests, nullptr, &stats);
    ExpectSameOutput(plain, spec, "mtp K=" + std::to_string(k));
    EXPECT_GT(spec.at("greedy").usage.speculative_drafted, 0);
    EXPECT_GT(stats.speculative_drafted, 0);
    EXPECT_EQ(stats.speculative_drafted_at.size(), static_cast<size_t>(k));
    std::printf("MTP drafts, K=%d: %lld verified, %lld accepted (random weights)\n", k,
                static_cast<long long>(stats.speculative_drafted), static_cast<long long>(stats.speculative_accepted));
  }
}

// The DSpark stages' blocks, every K up to the block size, fixed and adaptive budgets; an oracle
// on DSpark states (most drafts right: long accepted runs rolled back with the stages' rings);
// then a resume from the prefix cache.
TEST(Speculation, DsparkDraftsGiveThePlainOutput) {
  const engine::Model& model = engine::testing::TestModelDspark();
  const auto requests = Mix();
  const auto plain = RunAll(Plain(), requests, nullptr, nullptr, model);
  for (int k : {1, 3, 5}) {
    for (bool adaptive : {false, true}) {
      LoopConfig c = Plain();
      c.speculative.drafter = true;
      c.speculative.num_draft_tokens = k;
      c.speculative.adaptive = adaptive;
      ServiceStats stats;
      const auto spec = RunAll(c, requests, nullptr, &stats, model);
      const std::string what = "dspark K=" + std::to_string(k) + (adaptive ? " adaptive" : " fixed");
      ExpectSameOutput(plain, spec, what);
      if (!adaptive) EXPECT_GT(spec.at("greedy").usage.speculative_drafted, 0) << what;
      std::printf("DSpark drafts, %s: %lld verified, %lld accepted (random weights)\n", what.c_str(),
                  static_cast<long long>(stats.speculative_drafted), static_cast<long long>(stats.speculative_accepted));
    }
  }
  {
    auto oracle = OracleOf(requests, plain, /*spoil=*/6);
    LoopConfig c = Plain();
    c.speculative.drafter = true;  // DSpark states, drafts from the oracle
    c.speculative.num_draft_tokens = 5;
    c.speculative.external = [oracle](std::span<const int32_t> t, int n) { return (*oracle)(t, n); };
    ServiceStats stats;
    const auto spec = RunAll(c, requests, nullptr, &stats, model);
    ExpectSameOutput(plain, spec, "oracle on DSpark states");
    EXPECT_GT(stats.speculative_accepted, stats.speculative_drafted / 2);
  }
  std::vector<int32_t> first = RandomTokens(300, 18), second = first;
  const std::vector<int32_t> extra = RandomTokens(20, 19);
  second.insert(second.end(), extra.begin(), extra.end());
  const std::vector<protocol::GenerateRequest> resume = {Request("a", first, 4, 1, 0.0f), Request("b", second, 30, 2, 0.0f)};
  const auto alone = RunAll(Plain(), resume, nullptr, nullptr, model);
  LoopConfig c = Plain();
  c.speculative.drafter = true;
  c.speculative.num_draft_tokens = 5;
  EngineLoop loop(model, engine::EngineOptions{}, c);
  std::map<std::string, Outcome> spec;
  for (const protocol::GenerateRequest& r : resume) {
    Outcome* o = &spec[r.id];
    ASSERT_TRUE(loop.Submit(r, testing::Collect(o)).ok());
    for (int step = 0; step < 2000 && !o->done; ++step) loop.StepOnce();
  }
  EXPECT_EQ(spec.at("b").usage.cached_tokens, 256);
  EXPECT_GT(spec.at("b").usage.speculative_drafted, 0);
  ExpectSameOutput(alone, spec, "dspark resume");
}

TEST(Speculation, OracleDraftsAreAcceptedCutAndGiveThePlainOutput) {
  auto requests = Mix();
  protocol::GenerateRequest stop = Request("stop", RandomTokens(45, 5), 30, 13, 0.8f);
  requests.push_back(stop);
  auto plain = RunAll(Plain(), requests);
  // A stop token the plain run meets at its 10th token: the speculative run must stop there too.
  const int32_t stop_token = plain.at("stop").tokens[0][9];
  requests.back().stop_token_ids = {stop_token};
  requests.back().ignore_eos = false;
  plain = RunAll(Plain(), requests);
  ASSERT_EQ(plain.at("stop").finish[0], protocol::FinishReason::kStop);
  ASSERT_LE(plain.at("stop").tokens[0].size(), 9u);
  for (int k : {2, 5}) {
    auto oracle = OracleOf(requests, plain, /*spoil=*/5);
    LoopConfig c = Plain();
    c.speculative.num_draft_tokens = k;
    c.speculative.external = [oracle](std::span<const int32_t> t, int n) { return (*oracle)(t, n); };
    ServiceStats stats;
    const auto spec = RunAll(c, requests, nullptr, &stats);
    ExpectSameOutput(plain, spec, "oracle K=" + std::to_string(k));
    const protocol::Usage& u = spec.at("greedy").usage;
    EXPECT_GT(u.speculative_accepted, 0);
    EXPECT_LT(u.speculative_accepted, u.speculative_drafted);
    EXPECT_GT(stats.speculative_accepted, stats.speculative_drafted / 4);  // 4 of 5 drafts are right
    ASSERT_EQ(stats.speculative_accepted_at.size(), static_cast<size_t>(k));
    EXPECT_GE(stats.speculative_accepted_at[0], stats.speculative_accepted_at[k - 1]);
  }
}

TEST(Speculation, DraftRowsCountAgainstTheStepTokens) {
  const auto requests = Mix();  // five choices decoding together
  LoopConfig small = Plain();
  small.sched.max_step_tokens = 12;
  ServiceStats plain_stats;
  const auto plain = RunAll(small, requests, nullptr, &plain_stats);
  EXPECT_EQ(plain_stats.step_rows_max, 12);  // prompts are chunked to the limit
  auto oracle = OracleOf(requests, plain, /*spoil=*/6);
  LoopConfig c = small;
  c.speculative.num_draft_tokens = 4;  // five choices with four drafts each would be 25 rows
  c.speculative.external = [oracle](std::span<const int32_t> t, int n) { return (*oracle)(t, n); };
  ServiceStats stats;
  const auto spec = RunAll(c, requests, nullptr, &stats);
  ExpectSameOutput(plain, spec, "max step tokens 12");
  EXPECT_LE(stats.step_rows_max, 12);
  EXPECT_GT(stats.speculative_accepted, 0);
  EXPECT_LT(stats.steps_total, plain_stats.steps_total);  // the drafts still save steps
  EXPECT_GT(stats.step_rows_total, 0);
}

TEST(Speculation, APrefixCacheResumeSpeculatesToThePlainOutput) {
  std::vector<int32_t> first = RandomTokens(300, 8), second = first;
  const std::vector<int32_t> extra = RandomTokens(20, 9);
  second.insert(second.end(), extra.begin(), extra.end());
  const std::vector<protocol::GenerateRequest> requests = {Request("a", first, 4, 1, 0.0f), Request("b", second, 30, 2, 0.0f)};
  const auto plain = RunAll(Plain(), requests);
  LoopConfig c = Plain();
  c.speculative.drafter = true;
  c.speculative.num_draft_tokens = 2;
  EngineLoop loop(TestModel(), engine::EngineOptions{}, c);
  std::map<std::string, Outcome> spec;
  for (const protocol::GenerateRequest& r : requests) {  // one after the other: b resumes a's prefix
    Outcome* o = &spec[r.id];
    ASSERT_TRUE(loop.Submit(r, testing::Collect(o)).ok());
    for (int step = 0; step < 2000 && !o->done; ++step) loop.StepOnce();
  }
  EXPECT_EQ(spec.at("b").usage.cached_tokens, 256);
  ExpectSameOutput(plain, spec, "resume");
}

// A grammar whose masks change with every token: drafts are checked against it before the
// verify, and each verify row is sampled with the mask after the tokens before it.
TEST(Speculation, UnderAGrammarTheOracleGivesThePlainOutput) {
  std::vector<std::string> bytes(1280);
  for (int b = 0; b < 256; ++b) bytes[static_cast<size_t>(100 + b)] = std::string(1, static_cast<char>(b));
  auto grammars = std::make_shared<grammar::GrammarCache>(
      std::make_shared<const grammar::Vocabulary>(bytes, std::vector<int32_t>{1}));
  std::vector<protocol::GenerateRequest> requests;
  for (int i = 0; i < 3; ++i) {
    protocol::GenerateRequest r = Request("json" + std::to_string(i), RandomTokens(20, 30 + i), 60, 40 + i, 0.9f);
    r.ignore_eos = false;
    r.constraint = {protocol::ConstraintKind::kJsonSchema,
                    R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","maxLength":12}},"required":["a","b"]})"};
    requests.push_back(r);
  }
  const auto plain = RunAll(Plain(), requests, grammars);
  for (const auto& [id, o] : plain) EXPECT_EQ(o.error, "") << id;
  // Right drafts, then one the grammar refuses (id 5 is no grammar token): it is cut before the
  // verify, so every verified draft is kept.
  auto oracle = OracleOf(requests, plain, /*spoil=*/1 << 30);
  LoopConfig c = Plain();
  c.speculative.num_draft_tokens = 4;
  c.speculative.external = [oracle](std::span<const int32_t> t, int n) {
    std::vector<int32_t> drafts = (*oracle)(t, n);
    if (drafts.size() >= 2) drafts.back() = 5;
    return drafts;
  };
  ServiceStats stats;
  const auto spec = RunAll(c, requests, grammars, &stats);
  EXPECT_GT(stats.speculative_drafted, 0);
  EXPECT_EQ(stats.speculative_accepted, stats.speculative_drafted);
  ExpectSameOutput(plain, spec, "grammar");
  EXPECT_GT(spec.at("json0").usage.speculative_accepted, 0);
}

// The adaptive budget keeps the drafts whose expected tokens pay for their rows: where a row
// costs nothing every draft is verified; where a step's time grows with its rows, drafts are
// verified only beside prefill chunks (whose rows make a verify row cheap by comparison). The
// output is the plain one either way.
TEST(Speculation, TheAdaptiveBudgetFollowsTheStepProfile) {
  const auto requests = Mix();
  const auto plain = RunAll(Plain(), requests);
  auto oracle = OracleOf(requests, plain, /*spoil=*/1000);
  int64_t drafted_cheap = 0;
  size_t asked_cheap = 0;
  for (bool cheap : {true, false}) {
    LoopConfig c = Plain();
    c.speculative.num_draft_tokens = 3;
    c.speculative.adaptive = true;
    auto asked = std::make_shared<std::vector<int>>();  // k of each call to the drafter
    c.speculative.external = [oracle, asked](std::span<const int32_t> t, int n) {
      asked->push_back(n);
      return (*oracle)(t, n);
    };
    c.speculative.profile = std::make_shared<const StepProfile>(
        cheap ? std::vector<std::pair<int64_t, double>>{{1, 0.01}, {1000, 0.01}}
              : std::vector<std::pair<int64_t, double>>{{1, 0.01}, {1000, 10.0}});
    ServiceStats stats;
    const auto spec = RunAll(c, requests, nullptr, &stats);
    ExpectSameOutput(plain, spec, cheap ? "cheap rows" : "dear rows");
    if (cheap) {
      EXPECT_GT(stats.speculative_accepted, 0);
      ASSERT_EQ(stats.speculative_drafted_at.size(), 3u);
      EXPECT_GT(stats.speculative_drafted_at[2], 0);  // third drafts too
      drafted_cheap = stats.speculative_drafted;
      asked_cheap = asked->size();
    } else {
      EXPECT_LT(stats.speculative_drafted * 4, drafted_cheap);
      // Where the budget keeps no drafts, drafting backs off (to every 16th step) and probes
      // one draft deep: it is asked far less often, and for less.
      int64_t decode_steps = 0;  // one per token after each choice's first, without drafts kept
      for (const auto& [id, o] : plain)
        for (const auto& [choice, tokens] : o.tokens) decode_steps += static_cast<int64_t>(tokens.size()) - 1;
      EXPECT_LT(static_cast<int64_t>(asked->size()) * 4, decode_steps) << asked_cheap;
      EXPECT_GT(std::count(asked->begin(), asked->end(), 1) * 2, static_cast<int64_t>(asked->size()));
    }
  }
}

// Drafts that cannot be verified (an external drafter's id outside the vocabulary) leave the
// step without drafts: the requests go on to the plain output and nothing is counted.
TEST(Speculation, BadDraftsAreDroppedAndTheStepGoesOn) {
  const auto requests = Mix();
  const auto plain = RunAll(Plain(), requests);
  LoopConfig c = Plain();
  c.speculative.num_draft_tokens = 2;
  c.speculative.external = [](std::span<const int32_t>, int k) { return std::vector<int32_t>(static_cast<size_t>(k), 1 << 20); };
  ServiceStats stats;
  const auto spec = RunAll(c, requests, nullptr, &stats);
  ExpectSameOutput(plain, spec, "bad drafts");
  EXPECT_EQ(stats.speculative_drafted, 0);
}

// T(rows) = fixed + per_row * rows.
StepProfile Linear(double fixed, double per_row) { return StepProfile({{1, fixed + per_row}, {1001, fixed + 1001 * per_row}}); }

TEST(VerifyBudget, TakesDraftsBestFirstWhileTokensPerSecondRise) {
  // One sequence, drafts of confidence 0.9: worth 0.9, 0.81, 0.729 tokens. Rows at a quarter of
  // the first row's time each: every one raises tokens/s.
  EXPECT_EQ(ChooseVerifyBudget(Linear(0.75, 0.25), 1, 1, {{0.9, 0.9, 0.9}}, 0), (std::vector<int>{3}));
  // A row that costs what the first does: none pays.
  EXPECT_EQ(ChooseVerifyBudget(Linear(0, 1), 1, 1, {{0.9, 0.9, 0.9}}, 0), (std::vector<int>{0}));
  // Best first across sequences: the sure first drafts of both (worth 1, 1), then the second
  // sequence's 0.9, then its 0.45; with rows at 0.6 of a token's worth the walk stops before
  // the 0.45 (the first candidate that lowers tokens/s ends it, though a later one is not looked at).
  const StepProfile dear = Linear(1.0, 0.6);
  EXPECT_EQ(ChooseVerifyBudget(dear, 2, 2, {{1.0, 0.2}, {1.0, 0.9, 0.5}}, 0), (std::vector<int>{1, 2}));
}

TEST(VerifyBudget, AGainInsideTheLeastGainTakesNothing) {
  // Rows cost nearly a token each: every sure draft raises tokens/s a little (4 tokens in 4.1 s
  // to 8 in 8.1 s: +1.2%), so all are taken with no least gain and none with 5%.
  const StepProfile near = Linear(0.1, 1.0);
  const std::vector<std::vector<double>> sure = {{1, 1}, {1, 1}};
  EXPECT_EQ(ChooseVerifyBudget(near, 4, 4, sure, 0), (std::vector<int>{2, 2}));
  EXPECT_EQ(ChooseVerifyBudget(near, 4, 4, sure, 0.05), (std::vector<int>{0, 0}));
  EXPECT_EQ(ChooseVerifyBudget(Linear(1.0, 0.1), 4, 4, sure, 0.05), (std::vector<int>{2, 2}));
  EXPECT_TRUE(ChooseVerifyBudget(near, 4, 4, {}, 0.05).empty());
  // Drafting's own time counts against the drafts: 8 tokens in 1.8 + 0.5 s pays (+22% over 4 in
  // 1.4 s), in 1.8 + 1.5 s it does not.
  EXPECT_EQ(ChooseVerifyBudget(Linear(1.0, 0.1), 4, 4, sure, 0.05, 0.5), (std::vector<int>{2, 2}));
  EXPECT_EQ(ChooseVerifyBudget(Linear(1.0, 0.1), 4, 4, sure, 0.05, 1.5), (std::vector<int>{0, 0}));
}

TEST(DraftSchedule, DraftsAsDeepAsKeptAndBacksOffWhereNoneAre) {
  DraftSchedule s;
  EXPECT_EQ(s.Depth(3, 7), 3);  // no record: all k
  s.Record(3, 1);               // the budget cut to 1: next time 2 deep
  EXPECT_EQ(s.Depth(3, 8), 2);
  s.Record(2, 2);               // all kept: one deeper
  EXPECT_EQ(s.Depth(3, 9), 3);
  EXPECT_EQ(s.Depth(1, 9), 1);  // never past k
  s.Record(1, 1);               // a cap outside the budget cut it: the depth stays
  EXPECT_EQ(s.Depth(3, 10), 3);
  s.Record(0, 0);               // nothing reached the budget: no change
  EXPECT_EQ(s.Depth(3, 10), 3);
  // None kept: one-deep probes on steps that are multiples of 2, 4, 8, 16, 16.
  for (int backoff : {2, 4, 8, 16, 16}) {
    s.Record(3, 0);
    EXPECT_EQ(s.backoff(), backoff);
    for (uint64_t step = 32; step < 32 + 16; ++step) EXPECT_EQ(s.Depth(3, step), step % backoff == 0 ? 1 : 0) << step;
  }
  s.Record(1, 1);  // a probe kept: every step again, two deep
  EXPECT_EQ(s.backoff(), 0);
  EXPECT_EQ(s.Depth(3, 33), 2);
  // A drafting call of 1.6 plain steps: the back-off goes on to 32 (a probe then costs 1.6 of 32
  // steps); of 3 steps to 64; of a tenth of a step it stops at 16.
  for (auto [cost, longest] : std::vector<std::pair<double, int>>{{1.6, 32}, {3.0, 64}, {0.1, 16}}) {
    DraftSchedule t;
    for (int i = 0; i < 8; ++i) t.Record(3, 0, cost);
    EXPECT_EQ(t.backoff(), longest) << cost;
  }
}

TEST(ConfidenceCalibration, ScalesConfidencesToTheAcceptanceFound) {
  ConfidenceCalibration sure_but_wrong, shy_but_right;
  EXPECT_DOUBLE_EQ(sure_but_wrong.Calibrated(0, 0.8), 0.8);  // no record: as given
  for (int i = 0; i < 40; ++i) {
    sure_but_wrong.Learn(std::vector<float>{0.8f, 0.9f}, 0);
    shy_but_right.Learn(std::vector<float>{0.5f, 0.5f}, 2);
  }
  EXPECT_LT(sure_but_wrong.Calibrated(0, 0.8), 0.1);
  EXPECT_DOUBLE_EQ(sure_but_wrong.Calibrated(1, 0.9), 0.9);  // never reached: no evidence
  EXPECT_GT(shy_but_right.Calibrated(0, 0.5), 0.9);
  EXPECT_LE(shy_but_right.Calibrated(1, 0.5), 1.0);
}

TEST(StepProfileTest, InterpolatesBetweenPointsAndAlongTheLastSlope) {
  const StepProfile p({{1, 0.010}, {4, 0.016}, {8, 0.032}});
  EXPECT_DOUBLE_EQ(p.Seconds(1), 0.010);
  EXPECT_DOUBLE_EQ(p.Seconds(0), 0.010);
  EXPECT_DOUBLE_EQ(p.Seconds(2), 0.012);
  EXPECT_DOUBLE_EQ(p.Seconds(6), 0.024);
  EXPECT_DOUBLE_EQ(p.Seconds(12), 0.048);
  EXPECT_DOUBLE_EQ(p.StepsPerSecond(4), 62.5);
  const StepProfile falling({{1, 0.010}, {2, 0.004}});
  EXPECT_DOUBLE_EQ(falling.Seconds(10), 0.010);  // never below one row's time
  engine::Engine engine(TestModel(), engine::EngineOptions{});
  const StepProfile measured = StepProfile::Measure(engine, 20, 3);
  ASSERT_EQ(measured.points().size(), 6u);  // 1, 2, 4, 8, 16, 20
  EXPECT_EQ(measured.points().back().first, 20);
  for (const auto& [rows, seconds] : measured.points()) EXPECT_GT(seconds, 0) << rows;
}

// A prefix stored by a worker with MTP layers restores on one without, and the other way round
// (the layers are added fresh or dropped): the resume is a cache hit with the plain output, and
// a speculating reader drafts on the converted state.
void CheckPrefixesRestoreEitherWay(const engine::Model& model) {
  std::vector<int32_t> prompt = RandomTokens(300, 50), longer = prompt;
  const std::vector<int32_t> extra = RandomTokens(20, 51);
  longer.insert(longer.end(), extra.begin(), extra.end());
  const protocol::GenerateRequest writer = Request("w", prompt, 3, 1, 0.0f), reader = Request("r", longer, 20, 2, 0.0f);
  const auto plain = RunAll(Plain(), {reader}, nullptr, nullptr, model);
  for (bool writer_mtp : {false, true}) {
    const std::string dir = std::filesystem::temp_directory_path() / ("fs_spec_store_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    base::SystemClock clock;
    auto run = [&](bool mtp, const protocol::GenerateRequest& r, Outcome* out) {
      LoopConfig c = Plain();
      c.speculative.drafter = mtp;
      c.speculative.num_draft_tokens = 2;
      EngineLoop loop(model, engine::EngineOptions{}, c, testing::OpenTestStore(model, clock, {dir, ""}));
      ASSERT_TRUE(loop.Submit(r, testing::Collect(out)).ok());
      for (int i = 0; i < 20000 && !out->done; ++i)
        if (!loop.StepOnce()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      loop.Stop();
      ASSERT_TRUE(out->done);
    };
    Outcome written, read;
    run(writer_mtp, writer, &written);
    run(!writer_mtp, reader, &read);
    EXPECT_EQ(read.usage.cached_tokens, 256) << "writer with MTP: " << writer_mtp;
    EXPECT_EQ(read.tokens, plain.at("r").tokens) << "writer with MTP: " << writer_mtp;
    if (!writer_mtp) {
      EXPECT_GT(read.usage.speculative_drafted, 0);
    }
    std::filesystem::remove_all(dir);
  }
}

TEST(Speculation, PrefixesStoredWithAndWithoutMtpRestoreEitherWay) { CheckPrefixesRestoreEitherWay(TestModel()); }
TEST(Speculation, PrefixesStoredWithAndWithoutDsparkRestoreEitherWay) {
  CheckPrefixesRestoreEitherWay(engine::testing::TestModelDspark());
}

}  // namespace
}  // namespace flashserve::serve
