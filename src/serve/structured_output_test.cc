// Structured outputs in the serving loop, on a small generated model whose random weights leave
// all the work to the grammar: every choice's text is in the language, ends by EOS where the
// grammar allows, stays deterministic alone and batched, frees the reasoning before </think>,
// and ends with `length` when max_tokens cuts a structure short.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "engine/test_model.h"
#include "grammar/grammar_cache.h"
#include "serve/engine_loop.h"

namespace flashserve::serve {
namespace {

using engine::testing::RandomTokens;
using engine::testing::TestModel;
using protocol::ConstraintKind;
using protocol::FinishReason;

constexpr int32_t kEos = 1, kThinkEnd = 7;

// Ids 100..355: single bytes; 400+: a few multi-byte pieces that cross JSON boundaries.
const std::vector<std::string> kPieces = {"{\"", "\":", "\",", "\"}", "ab", "12", "a\"", " \"", "}\n", "\n  "};

std::shared_ptr<grammar::GrammarCache> Grammars() {
  std::vector<std::string> bytes(1280);
  for (int b = 0; b < 256; ++b) bytes[static_cast<size_t>(100 + b)] = std::string(1, static_cast<char>(b));
  for (size_t i = 0; i < kPieces.size(); ++i) bytes[400 + i] = kPieces[i];
  return std::make_shared<grammar::GrammarCache>(std::make_shared<const grammar::Vocabulary>(bytes, std::vector<int32_t>{kEos}));
}

std::string Text(const std::vector<int32_t>& tokens) {
  std::string out;
  for (int32_t t : tokens) {
    if (t >= 100 && t < 356) out.push_back(static_cast<char>(t - 100));
    else if (t >= 400 && t < 400 + static_cast<int32_t>(kPieces.size())) out += kPieces[static_cast<size_t>(t - 400)];
    else out += fmt::format("<{}>", t);
  }
  return out;
}

struct Outcome {
  std::map<int, std::vector<int32_t>> tokens;
  std::map<int, FinishReason> finish;
  bool done = false;
  std::string error;
};

protocol::GenerateRequest Constrained(std::string id, ConstraintKind kind, std::string text, int max_tokens, uint64_t seed) {
  protocol::GenerateRequest r;
  r.id = std::move(id);
  r.prompt = RandomTokens(24, static_cast<uint32_t>(seed));
  r.max_tokens = max_tokens;
  r.sampling.seed = seed;
  r.sampling.has_seed = true;
  r.constraint = {kind, std::move(text)};
  return r;
}

class StructuredOutputTest : public ::testing::Test {
 protected:
  StructuredOutputTest() : loop_(TestModel(), engine::EngineOptions{}, Config()) { loop_.SetGrammars(Grammars()); }
  static LoopConfig Config() {
    LoopConfig c;
    c.sched.max_step_tokens = 256;
    return c;
  }
  void Run(const std::vector<protocol::GenerateRequest>& requests, std::vector<Outcome>* outs) {
    outs->resize(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      Outcome* o = &(*outs)[i];
      ASSERT_TRUE(loop_.Submit(requests[i], [o](const protocol::GenerateEvent& e) {
                           for (const auto& t : e.tokens) o->tokens[e.choice].push_back(t.token);
                           if (e.finish != FinishReason::kNone) o->finish[e.choice] = e.finish;
                           if (!e.error.empty()) o->error = e.error;
                           o->done = o->done || e.request_done;
                         }).ok());
    }
    for (int step = 0; step < 5000; ++step) {
      if (std::all_of(outs->begin(), outs->end(), [](const Outcome& o) { return o.done; })) return;
      loop_.StepOnce();
    }
    FAIL() << "requests did not finish";
  }
  EngineLoop loop_;
};

TEST_F(StructuredOutputTest, EveryChoiceMatchesTheRegexAndEndsWhereItMay) {
  protocol::GenerateRequest r = Constrained("re", ConstraintKind::kRegex, "[ab]{3}-[0-9]{1,2}", 40, 5);
  r.n = 4;
  std::vector<Outcome> outs;
  Run({r}, &outs);
  ASSERT_EQ(outs[0].tokens.size(), 4u) << outs[0].error;
  std::set<std::string> distinct;
  for (const auto& [choice, tokens] : outs[0].tokens) {
    const std::string text = Text(tokens);
    EXPECT_TRUE(std::regex_match(text, std::regex("[ab]{3}-[0-9]{1,2}"))) << text;
    EXPECT_EQ(outs[0].finish[choice], FinishReason::kStop);
    distinct.insert(text);
  }
  EXPECT_GT(distinct.size(), 1u) << "choices sample with their own seeds";
}

TEST_F(StructuredOutputTest, JsonSchemaOutputsParseAndValidate) {
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":99},
      "b":{"enum":["x","yz"]},"c":{"type":"array","items":{"type":"boolean"},"maxItems":2}},"required":["a","b"]})";
  std::vector<protocol::GenerateRequest> rs;
  for (int i = 0; i < 4; ++i) rs.push_back(Constrained("js" + std::to_string(i), ConstraintKind::kJsonSchema, schema, 200, 11 + i));
  std::vector<Outcome> outs;
  Run(rs, &outs);
  for (const Outcome& o : outs) {
    const std::string text = Text(o.tokens.at(0));
    ASSERT_EQ(o.finish.at(0), FinishReason::kStop) << text;
    const auto j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << text;
    ASSERT_TRUE(j["a"].is_number_integer()) << text;
    EXPECT_GE(j["a"].get<int>(), -5);
    EXPECT_LE(j["a"].get<int>(), 99);
    EXPECT_TRUE(j["b"] == "x" || j["b"] == "yz") << text;
    if (j.contains("c")) {
      EXPECT_LE(j["c"].size(), 2u) << text;
    }
  }
}

TEST_F(StructuredOutputTest, SameTokensAloneAndBatched) {
  const auto request = [](const std::string& id) {
    return Constrained(id, ConstraintKind::kJsonObject, "", 60, 42);
  };
  std::vector<Outcome> alone, batched;
  Run({request("alone")}, &alone);
  std::vector<protocol::GenerateRequest> many = {request("b0")};
  for (int i = 1; i < 4; ++i) many.push_back(Constrained(fmt::format("b{}", i), ConstraintKind::kRegex, "[0-9]+", 30, 100 + i));
  Run(many, &batched);
  EXPECT_EQ(alone[0].tokens[0], batched[0].tokens[0]);
}

TEST_F(StructuredOutputTest, ReasoningIsFreeUntilThinkEnd) {
  protocol::GenerateRequest r = Constrained("think", ConstraintKind::kChoice, R"(["yes","no"])", 40, 9);
  r.constrain_after_think = true;
  r.think_end_token = kThinkEnd;
  r.reasoning_budget = 5;  // </think> after five free tokens
  std::vector<Outcome> outs;
  Run({r}, &outs);
  const std::vector<int32_t>& t = outs[0].tokens[0];
  ASSERT_GE(t.size(), 6u);
  EXPECT_EQ(t[5], kThinkEnd);
  const std::string answer = Text({t.begin() + 6, t.end()});
  EXPECT_TRUE(answer == "yes" || answer == "no") << answer;
  EXPECT_EQ(outs[0].finish[0], FinishReason::kStop);
}

TEST_F(StructuredOutputTest, MaxTokensMidStructureEndsWithLength) {
  std::vector<Outcome> outs;
  Run({Constrained("short", ConstraintKind::kRegex, "a{20}", 5, 3)}, &outs);
  EXPECT_EQ(Text(outs[0].tokens[0]).substr(0, 5), "aaaaa");
  EXPECT_EQ(outs[0].finish[0], FinishReason::kLength);
}

TEST_F(StructuredOutputTest, AConstraintThatDoesNotCompileEndsTheRequest) {
  std::vector<Outcome> outs;
  Run({Constrained("bad", ConstraintKind::kGrammar, "root ::= missing", 5, 3)}, &outs);
  EXPECT_NE(outs[0].error.find("missing"), std::string::npos) << outs[0].error;
  EXPECT_TRUE(outs[0].tokens.empty());
}

}  // namespace
}  // namespace flashserve::serve
