// Every top-level field each generation route accepts (dialect/field_lists.h) is held to what the
// docs say of it: an implemented field, sent with a sample value, changes the request serve
// receives, the response, or the status (a refusal that names it); a hint changes nothing the
// model sees and is listed as a HINT in docs/api.md. A field added to a table without a sample
// here fails the test.
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "api/dialect_test_fixture.h"
#include "dialect/field_lists.h"

namespace flashserve::api {
namespace {

using testing::Json;

// What serve receives, as comparable text.
std::string RequestPrint(const protocol::GenerateRequest& r) {
  const protocol::SamplingParams& s = r.sampling;
  Json j = {{"prompt", r.prompt}, {"n", r.n}, {"max_tokens", r.max_tokens}, {"stop_ids", r.stop_token_ids},
            {"ignore_eos", r.ignore_eos}, {"ttl", r.ttl_class}, {"budget", r.reasoning_budget},
            {"t", s.temperature}, {"top_p", s.top_p}, {"top_k", s.top_k}, {"min_p", s.min_p},
            {"pres", s.presence_penalty}, {"freq", s.frequency_penalty}, {"rep", s.repetition_penalty},
            {"seed", s.has_seed ? static_cast<int64_t>(s.seed) : -1}, {"logprobs", s.logprobs},
            {"top_logprobs", s.top_logprobs}, {"constraint", protocol::ConstraintKindName(r.constraint.kind)},
            {"constraint_text", r.constraint.text}, {"after_think", r.constrain_after_think}};
  for (const auto& [token, bias] : s.logit_bias) j["bias"].push_back({token, bias});
  return j.dump();
}

// A response without what differs between any two runs (ids, times, sealed blobs).
std::string ResponsePrint(const std::string& body) {
  static const std::regex kVolatile(
      R"re((chatcmpl-|cmpl-|msg_|resp_|rs_|fc_|call_|toolu_)[0-9a-f]{24}|fsr1\.[A-Za-z0-9_-]+|"(created|created_at)":\d+)re");
  return std::regex_replace(body, kVolatile, "~");
}

struct Route {
  const char* name;
  void (*handler)(const RouteContext&, const ExchangePtr&);
  const char* path;
  Json base;
  dialect::FieldList fields;
  std::map<std::string, Json> samples;  // implemented field -> a value with an effect
  std::map<std::string, Json> hints;    // hint -> a value
  // Fields whose effect needs another field set: that field's patch, applied to both sides of
  // the comparison, so the effect is the sample's alone.
  std::map<std::string, Json> context = {};
};

class FieldCoverageTest : public testing::DialectTest {
 protected:
  struct Outcome {
    int status;
    std::string request, response;
  };
  Outcome Send(const Route& route, const Json& body) {
    const size_t before = service_.submitted.size();
    auto ex = Run(route.handler, body, route.path);
    Outcome o{ex->status, "", ResponsePrint(ex->body)};
    if (service_.submitted.size() > before) o.request = RequestPrint(service_.submitted.back());
    return o;
  }
  // The outcome of `base`: the baseline unless a context patch changed it.
  Outcome OutcomeOf(const Route& route, const Json& base, const Outcome& baseline) {
    return base == route.base ? baseline : Send(route, base);
  }
  static Json With(Json base, const std::string& key, const Json& value) {
    base[key] = value;
    return base;
  }

  void Check(const Route& route) {
    const Outcome baseline = Send(route, route.base);
    ASSERT_EQ(baseline.status, 200) << route.name << ": " << baseline.response;
    for (std::string_view f : route.fields.implemented) {
      const std::string field(f);
      if (route.base.contains(field) && !route.samples.contains(field)) continue;  // required: varied below
      auto it = route.samples.find(field);
      ASSERT_NE(it, route.samples.end()) << route.name << ": no sample for implemented field " << field;
      Json base = route.base;
      if (auto c = route.context.find(field); c != route.context.end()) base.update(c->second);
      const Outcome before = OutcomeOf(route, base, baseline);
      const Outcome o = Send(route, With(base, field, it->second));
      EXPECT_TRUE(o.status != before.status || o.request != before.request || o.response != before.response)
          << route.name << ": " << field << " = " << it->second.dump() << " had no effect";
      if (o.status == 400) {
        EXPECT_NE(o.response.find(field), std::string::npos) << route.name << ": " << o.response;
      }
    }
    for (std::string_view f : route.fields.hints) {
      const std::string field(f);
      auto it = route.hints.find(field);
      ASSERT_NE(it, route.hints.end()) << route.name << ": no sample for hint " << field;
      const Outcome o = Send(route, With(route.base, field, it->second));
      EXPECT_EQ(o.status, 200) << route.name << ": hint " << field << ": " << o.response;
      EXPECT_EQ(o.request, baseline.request) << route.name << ": hint " << field << " changed the request";
      EXPECT_TRUE(DocumentedAsHint(route.name, field)) << route.name << ": hint " << field << " not listed in docs/api.md";
    }
  }

  // docs/api.md: the route's section has a table row naming `field` with status HINT.
  static bool DocumentedAsHint(const std::string& section, const std::string& field) {
    std::ifstream in(std::string(FLASHSERVE_ROOT) + "/docs/api.md");
    std::string line;
    bool inside = false;
    while (std::getline(in, line)) {
      if (line.rfind("### ", 0) == 0) inside = line.find(section) != std::string::npos;
      if (inside && line.rfind("| ", 0) == 0 && line.find("`" + field + "`") != std::string::npos &&
          line.find("HINT") != std::string::npos)
        return true;
    }
    return false;
  }
};

const Json kUser = Json::array({{{"role", "user"}, {"content", "Hi"}}});
const Json kTool = {{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}};

TEST_F(FieldCoverageTest, ChatCompletions) {
  Check({"Chat Completions", HandleChatCompletions, "/v1/chat/completions",
         {{"model", "test-model"}, {"messages", kUser}, {"thinking", {{"type", "disabled"}}}},
         dialect::kChatFields,
         {{"model", "other"}, {"messages", Json::array({{{"role", "user"}, {"content", "Bye"}}})}, {"stream", true},
          {"stream_options", {{"include_usage", true}}}, {"max_tokens", 5}, {"max_completion_tokens", 5},
          {"temperature", 0.5}, {"top_p", 0.5}, {"top_k", 5}, {"min_p", 0.1}, {"presence_penalty", 1},
          {"frequency_penalty", 1}, {"repetition_penalty", 1.5}, {"stop", "o"}, {"seed", 3}, {"n", 2}, {"logprobs", true},
          {"top_logprobs", 2}, {"logit_bias", {{"5", 1}}}, {"tools", Json::array({kTool})}, {"tool_choice", "required"},
          {"parallel_tool_calls", false}, {"response_format", {{"type", "json_object"}}},
          {"thinking", {{"type", "enabled"}}}, {"reasoning_effort", "max"}, {"stop_token_ids", {5}},
          {"ignore_eos", true}, {"cache_ttl", "agent"}, {"structured_outputs", {{"regex", "a+"}}},
          {"guided_json", {{"type", "integer"}}}, {"guided_regex", "a+"}, {"guided_choice", {"x", "y"}},
          {"guided_grammar", "root ::= \"a\""}, {"regex", "b+"}, {"ebnf", "root ::= \"b\""},
          {"json_schema", "{\"type\": \"boolean\"}"}},
         {{"user", "u1"}, {"metadata", {{"a", "b"}}}, {"store", false}, {"service_tier", "auto"},
          {"safety_identifier", "s1"}, {"prompt_cache_key", "k1"}},
         {{"reasoning_effort", {{"thinking", {{"type", "enabled"}}}}}, {"parallel_tool_calls", {{"tools", Json::array({kTool})}}}}});
}

TEST_F(FieldCoverageTest, Completions) {
  Check({"Completions", HandleCompletions, "/v1/completions", {{"model", "test-model"}, {"prompt", "Hi"}},
         dialect::kCompletionFields,
         {{"model", "other"}, {"prompt", "Bye"}, {"stream", true}, {"stream_options", {{"include_usage", true}}},
          {"max_tokens", 5}, {"temperature", 0.5}, {"top_p", 0.5}, {"top_k", 5}, {"min_p", 0.1},
          {"presence_penalty", 1}, {"frequency_penalty", 1}, {"repetition_penalty", 1.5}, {"stop", "o"}, {"seed", 3},
          {"n", 2}, {"logprobs", 1}, {"logit_bias", {{"5", 1}}}, {"stop_token_ids", {5}}, {"ignore_eos", true},
          {"cache_ttl", "agent"}, {"echo", true}, {"suffix", "tail"}, {"best_of", 3},
          {"structured_outputs", {{"choice", {"x", "y"}}}}, {"guided_json", {{"type", "integer"}}}, {"guided_regex", "a+"},
          {"guided_choice", {"x", "y"}}, {"guided_grammar", "root ::= \"a\""}, {"regex", "b+"},
          {"ebnf", "root ::= \"b\""}, {"json_schema", "{\"type\": \"boolean\"}"}},
         {{"user", "u1"}, {"metadata", {{"a", "b"}}}, {"prompt_cache_key", "k1"}}});
}

TEST_F(FieldCoverageTest, AnthropicMessages) {
  const Json thinking = {{"type", "thinking"}, {"thinking", "plan"}, {"signature", seal_.Seal("plan")}};
  const Json use = {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "Read"}, {"input", Json::object()}};
  const Json result = {{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "x"}};
  const Json history = Json::array({{{"role", "user"}, {"content", "go"}},
                                    {{"role", "assistant"}, {"content", Json::array({thinking, use})}},
                                    {{"role", "user"}, {"content", Json::array({result})}}});
  const Json tools = Json::array({{{"name", "Read"}, {"input_schema", {{"type", "object"}}}}});
  Check({"Anthropic Messages", HandleMessages, "/v1/messages",
         {{"model", "test-model"}, {"max_tokens", 64}, {"messages", history}, {"tools", tools},
          {"thinking", {{"type", "disabled"}}}},
         dialect::kMessagesFields,
         {{"model", "other"}, {"max_tokens", 5}, {"messages", kUser}, {"system", "be brief"}, {"stop_sequences", {"o"}},
          {"stream", true}, {"temperature", 0.5}, {"top_p", 0.5}, {"top_k", 5}, {"tools", Json::array()},
          {"tool_choice", {{"type", "none"}}}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 9}}},
          {"output_config", {{"effort", "extreme"}}},
          {"context_management", {{"edits", Json::array({{{"type", "clear_thinking_20251015"},
                                                          {"keep", {{"type", "thinking_turns"}, {"value", 0}}}}})}}}},
         {{"metadata", {{"user_id", "u"}}}, {"service_tier", "auto"}, {"cache_control", {{"type", "ephemeral"}}}},
         {{"context_management", {{"thinking", {{"type", "enabled"}}}}}}});
}

TEST_F(FieldCoverageTest, Responses) {
  Check({"OpenAI Responses", HandleResponses, "/v1/responses", {{"model", "test-model"}, {"input", "Hi"}},
         dialect::kResponsesFields,
         {{"model", "other"}, {"input", "Bye"}, {"instructions", "be brief"},
          {"tools", Json::array({{{"type", "function"}, {"name", "f"}, {"parameters", {{"type", "object"}}}}})},
          {"tool_choice", "required"}, {"parallel_tool_calls", false}, {"text", {{"format", {{"type", "json_object"}}}}},
          {"reasoning", {{"effort", "none"}}}, {"max_output_tokens", 5}, {"temperature", 0.5}, {"top_p", 0.5},
          {"top_logprobs", 2}, {"include", {"reasoning.encrypted_content"}}, {"stream", true}, {"store", true},
          {"truncation", "auto"}, {"previous_response_id", "resp_1"}, {"background", true},
          {"conversation", "conv_1"}, {"prompt", {{"id", "p"}}}},
         {{"metadata", {{"a", "b"}}}, {"user", "u1"}, {"client_metadata", {{"x", "y"}}}, {"service_tier", "auto"},
          {"safety_identifier", "s1"}, {"prompt_cache_key", "k1"}, {"prompt_cache_retention", "24h"}}});
}

}  // namespace
}  // namespace flashserve::api
