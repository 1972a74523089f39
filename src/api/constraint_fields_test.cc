// Structured-output fields through each dialect's route: which constraint serve receives
// (kind, text, after </think>), and the 400s (in each dialect's error shape) for two
// constraints, unsupported schema keywords (named down to the keyword) and grammars that do
// not parse.
#include "api/dialect_test_fixture.h"

namespace flashserve::api {
namespace {

using protocol::ConstraintKind;
using testing::Json;

class ConstraintFieldsTest : public testing::DialectTest {
 protected:
  std::shared_ptr<testing::FakeExchange> Chat(Json extra) {
    Json body = {{"model", "test-model"}, {"messages", Json::array({{{"role", "user"}, {"content", "Hi"}}})},
                 {"thinking", {{"type", "disabled"}}}};
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    return Run(HandleChatCompletions, body, "/v1/chat/completions");
  }
  static Json Error(const testing::FakeExchange& ex) { return Json::parse(ex.body)["error"]; }
  const protocol::OutputConstraint& Sent() const { return service_.submitted.back().constraint; }
};

const Json kSchema = {{"type", "object"}, {"properties", {{"b", {{"type", "integer"}}}, {"a", {{"type", "string"}}}}}};

TEST_F(ConstraintFieldsTest, ResponseFormatSchemaKeepsPropertyOrderAndStrictIsEnforced) {
  auto ex = Chat({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", kSchema}, {"strict", true}}}}}});
  ASSERT_EQ(ex->status, 200) << ex->body;
  EXPECT_EQ(Sent().kind, ConstraintKind::kJsonSchema);
  EXPECT_EQ(Sent().text, kSchema.dump());
  EXPECT_LT(Sent().text.find("\"b\""), Sent().text.find("\"a\""));
  EXPECT_FALSE(service_.submitted.back().constrain_after_think);
  ASSERT_EQ(Chat({{"response_format", {{"type", "json_object"}}}})->status, 200);
  EXPECT_EQ(Sent().kind, ConstraintKind::kJsonObject);
  ASSERT_EQ(Chat({{"response_format", {{"type", "text"}}}})->status, 200);
  EXPECT_FALSE(Sent().active());
}

TEST_F(ConstraintFieldsTest, VllmAndSglangFields) {
  const std::vector<std::pair<Json, ConstraintKind>> cases = {
      {{{"guided_json", kSchema}}, ConstraintKind::kJsonSchema},
      {{{"guided_json", kSchema.dump()}}, ConstraintKind::kJsonSchema},
      {{{"guided_regex", "[a-z]+"}}, ConstraintKind::kRegex},
      {{{"guided_choice", {"yes", "no"}}}, ConstraintKind::kChoice},
      {{{"guided_grammar", "root ::= \"a\"+"}}, ConstraintKind::kGrammar},
      {{{"structured_outputs", {{"json", kSchema}}}}, ConstraintKind::kJsonSchema},
      {{{"structured_outputs", {{"choice", {"a", "b"}}}}}, ConstraintKind::kChoice},
      {{{"structured_outputs", {{"json_object", true}}}}, ConstraintKind::kJsonObject},
      {{{"regex", "x+"}}, ConstraintKind::kRegex},
      {{{"ebnf", "root ::= \"b\""}}, ConstraintKind::kGrammar},
      {{{"json_schema", kSchema.dump()}}, ConstraintKind::kJsonSchema},
  };
  for (const auto& [fields, kind] : cases) {
    auto ex = Chat(fields);
    ASSERT_EQ(ex->status, 200) << fields.dump() << " " << ex->body;
    EXPECT_EQ(Sent().kind, kind) << fields.dump();
  }
  auto completion = Run(HandleCompletions, {{"model", "test-model"}, {"prompt", "Hi"}, {"guided_regex", "[0-9]+"}}, "/v1/completions");
  ASSERT_EQ(completion->status, 200) << completion->body;
  EXPECT_EQ(Sent().kind, ConstraintKind::kRegex);
  EXPECT_EQ(Sent().text, "[0-9]+");
}

TEST_F(ConstraintFieldsTest, MetricsCountCompilesHitsAndRefusals) {
  ASSERT_EQ(Chat({{"guided_regex", "[0-9]+"}})->status, 200);
  ASSERT_EQ(Chat({{"guided_regex", "[0-9]+"}})->status, 200);
  ASSERT_EQ(Chat({{"guided_regex", "(?=x)"}})->status, 400);
  auto ex = std::make_shared<testing::FakeExchange>("", "GET", "/metrics");
  HandleMetrics(ctx_, ex);
  EXPECT_NE(ex->body.find("flashserve_grammar_compiles_total 1"), std::string::npos) << ex->body;
  EXPECT_NE(ex->body.find("flashserve_grammar_cache_hits_total 1"), std::string::npos);
  EXPECT_NE(ex->body.find("flashserve_grammar_refused_total 1"), std::string::npos);
}

TEST_F(ConstraintFieldsTest, WithThinkingTheConstraintStartsAfterThinkEnd) {
  auto ex = Chat({{"thinking", {{"type", "enabled"}}}, {"guided_choice", {"yes", "no"}}});
  ASSERT_EQ(ex->status, 200) << ex->body;
  EXPECT_TRUE(service_.submitted.back().constrain_after_think);
  EXPECT_EQ(service_.submitted.back().think_end_token, tok_->TokenId("</think>").value());
}

TEST_F(ConstraintFieldsTest, RefusalsNameTheField) {
  auto two = Chat({{"guided_regex", "a"}, {"response_format", {{"type", "json_object"}}}});
  ASSERT_EQ(two->status, 400);
  EXPECT_EQ(Error(*two)["param"], "response_format");
  EXPECT_NE(Error(*two)["message"].get<std::string>().find("only one structured-output constraint"), std::string::npos);

  Json unique = {{"type", "object"}, {"properties", {{"tags", {{"type", "array"}, {"uniqueItems", true}}}}}};
  auto kw = Chat({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", unique}}}}}});
  ASSERT_EQ(kw->status, 400);
  EXPECT_EQ(Error(*kw)["param"], "response_format.json_schema.schema.properties.tags.uniqueItems");

  auto ebnf = Chat({{"guided_grammar", "root ::= \"a\"\nitem ::= [b"}});
  ASSERT_EQ(ebnf->status, 400);
  EXPECT_EQ(Error(*ebnf)["param"], "guided_grammar");
  EXPECT_NE(Error(*ebnf)["message"].get<std::string>().find("line 2"), std::string::npos);

  auto regex = Chat({{"guided_regex", "(?=a)"}});
  ASSERT_EQ(regex->status, 400);
  EXPECT_NE(Error(*regex)["message"].get<std::string>().find("lookaround"), std::string::npos);

  EXPECT_EQ(Chat({{"guided_choice", Json::array()}})->status, 400);
  EXPECT_EQ(Chat({{"structured_outputs", {{"structural_tag", "x"}}}})->status, 400);
}

TEST_F(ConstraintFieldsTest, ResponsesAndMessagesNameTheirOwnFields) {
  Json bad = {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}, {"multipleOf", 3}}}}}};
  auto responses = Run(HandleResponses, {{"model", "test-model"}, {"input", "Hi"},
                                         {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", bad}, {"strict", true}}}}}},
                       "/v1/responses");
  ASSERT_EQ(responses->status, 400) << responses->body;
  EXPECT_EQ(Error(*responses)["param"], "text.format.schema.properties.n.multipleOf");

  auto good = Run(HandleResponses, {{"model", "test-model"}, {"input", "Hi"},
                                    {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", kSchema}, {"strict", true}}}}}},
                  "/v1/responses");
  ASSERT_EQ(good->status, 200) << good->body;
  EXPECT_EQ(Sent().kind, ConstraintKind::kJsonSchema);

  auto messages = Run(HandleMessages, {{"model", "test-model"}, {"max_tokens", 64},
                                       {"messages", Json::array({{{"role", "user"}, {"content", "Hi"}}})},
                                       {"output_config", {{"format", {{"type", "json_schema"}, {"schema", bad}}}}}},
                      "/v1/messages");
  ASSERT_EQ(messages->status, 400) << messages->body;
  const Json body = Json::parse(messages->body);
  EXPECT_EQ(body["type"], "error");  // Anthropic's error shape
  EXPECT_NE(body["error"]["message"].get<std::string>().find("output_config.format.schema.properties.n.multipleOf"),
            std::string::npos);
}

const Json kWeather = {{"type", "function"},
                       {"function", {{"name", "get_weather"}, {"strict", true},
                                     {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}}}}}};
const Json kNow = {{"type", "function"}, {"function", {{"name", "now"}, {"parameters", {{"type", "object"}}}}}};

TEST_F(ConstraintFieldsTest, ForcedAndStrictToolCallsBecomeAToolCallConstraint) {
  ASSERT_EQ(Chat({{"tools", {kWeather, kNow}}, {"tool_choice", "required"}})->status, 200);
  ASSERT_EQ(Sent().kind, ConstraintKind::kToolCalls);
  Json spec = Json::parse(Sent().text);
  EXPECT_EQ(spec["mode"], "required");
  EXPECT_EQ(spec["parallel"], true);
  ASSERT_EQ(spec["tools"].size(), 2u);
  EXPECT_EQ(spec["tools"][0]["strict"], true);
  EXPECT_EQ(spec["tools"][1]["name"], "now");

  ASSERT_EQ(Chat({{"tools", {kWeather, kNow}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "now"}}}}},
                  {"parallel_tool_calls", false}})->status, 200);
  spec = Json::parse(Sent().text);
  EXPECT_EQ(spec["tools"].size(), 1u);
  EXPECT_EQ(spec["parallel"], false);

  ASSERT_EQ(Chat({{"tools", {kWeather}}})->status, 200);  // a strict tool: auto, arguments held to the schema
  EXPECT_EQ(Json::parse(Sent().text)["mode"], "auto");
  ASSERT_EQ(Chat({{"tools", {kNow}}})->status, 200);  // free tools: no constraint
  EXPECT_FALSE(Sent().active());

  auto both = Chat({{"tools", {kNow}}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}});
  ASSERT_EQ(both->status, 400);
  EXPECT_EQ(Error(*both)["param"], "tools");
}

TEST_F(ConstraintFieldsTest, MessagesAndResponsesForceToolsToo) {
  const Json tool = {{"name", "lookup"}, {"input_schema", {{"type", "object"}, {"properties", {{"q", {{"type", "string"}}}}}}}, {"strict", true}};
  auto any = Run(HandleMessages, {{"model", "test-model"}, {"max_tokens", 64}, {"tools", {tool}},
                                  {"messages", Json::array({{{"role", "user"}, {"content", "Hi"}}})},
                                  {"tool_choice", {{"type", "tool"}, {"name", "lookup"}, {"disable_parallel_tool_use", true}}}},
                 "/v1/messages");
  ASSERT_EQ(any->status, 200) << any->body;
  Json spec = Json::parse(Sent().text);
  EXPECT_EQ(spec["mode"], "required");
  EXPECT_EQ(spec["parallel"], false);
  EXPECT_EQ(spec["tools"][0]["strict"], true);

  auto required = Run(HandleResponses, {{"model", "test-model"}, {"input", "Hi"}, {"tool_choice", "required"},
                                        {"tools", Json::array({{{"type", "function"}, {"name", "f"}, {"parameters", {{"type", "object"}}}}})}},
                      "/v1/responses");
  ASSERT_EQ(required->status, 200) << required->body;
  EXPECT_EQ(Json::parse(Sent().text)["mode"], "required");
}

}  // namespace
}  // namespace flashserve::api
