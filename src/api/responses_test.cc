// The Responses route against the scripted Service: output items, typed stream events with
// sequence numbers, function calls (plain and namespaced) and their round trip with sealed
// reasoning, usage, incomplete responses, hosted tools, and the stateful fields it refuses.
#include "api/dialect_test_fixture.h"

namespace flashserve::api {
namespace {

using testing::Bytes;
using testing::Json;
using testing::ThinkThen;

class ResponsesTest : public testing::DialectTest {
 protected:
  std::shared_ptr<testing::FakeExchange> Send(Json extra = Json::object()) {
    Json body = {{"model", "test-model"}, {"input", "Hi"}};
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    return Run(HandleResponses, body, "/v1/responses");
  }
  static Json Function(const char* name) {
    return Json{{"type", "function"}, {"name", name}, {"description", "d"}, {"parameters", {{"type", "object"}}}, {"strict", false}};
  }
};

TEST_F(ResponsesTest, ResponseHasReasoningAndMessageItemsAndUsage) {
  service_.reply = ThinkThen("Thinking.", "Hello!");
  service_.cached_tokens = 4;
  auto ex = Send({{"include", {"reasoning.encrypted_content"}}, {"reasoning", {{"summary", "auto"}}}, {"store", false}});
  ASSERT_EQ(ex->status, 200) << ex->body;
  Json r = Json::parse(ex->body);
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u);
  ASSERT_EQ(r["output"].size(), 2u) << r.dump();
  const Json& reasoning = r["output"][0];
  EXPECT_EQ(reasoning["type"], "reasoning");
  EXPECT_EQ(reasoning["content"][0]["text"], "Thinking.");
  EXPECT_EQ(reasoning["summary"][0]["text"], "Thinking.");
  EXPECT_EQ(seal_.Open(reasoning["encrypted_content"].get<std::string>()).value(), "Thinking.");
  const Json& message = r["output"][1];
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["content"][0]["type"], "output_text");
  EXPECT_EQ(message["content"][0]["text"], "Hello!");
  const Json& u = r["usage"];
  EXPECT_EQ(u["input_tokens"], service_.submitted[0].prompt.size());
  EXPECT_EQ(u["input_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(u["output_tokens"], service_.reply.size());
  EXPECT_EQ(u["output_tokens_details"]["reasoning_tokens"], 10);  // "Thinking." and </think>
  EXPECT_EQ(u["total_tokens"], u["input_tokens"].get<int64_t>() + u["output_tokens"].get<int64_t>());
}

TEST_F(ResponsesTest, StreamEventsAreTypedNumberedAndRebuildTheResponse) {
  service_.reply = ThinkThen("Plan.", "Hi" + testing::DsmlCall("get_weather", "city", "Paris"));
  Json tools = Json::array({Function("get_weather")});
  Json whole = Json::parse(Send({{"tools", tools}})->body);
  auto ex = Send({{"tools", tools}, {"stream", true}});
  std::vector<testing::SseEvent> events = testing::Events(ex->body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.front().name, "response.created");
  EXPECT_EQ(events[1].name, "response.in_progress");
  EXPECT_EQ(events.back().name, "response.completed");
  Json items = Json::array();
  std::string text, arguments;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].data["type"], events[i].name);
    EXPECT_EQ(events[i].data["sequence_number"], i);
    if (events[i].name == "response.output_item.done") items.push_back(events[i].data["item"]);
    if (events[i].name == "response.output_text.delta") text += events[i].data["delta"].get<std::string>();
    if (events[i].name == "response.function_call_arguments.delta") arguments += events[i].data["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "Hi");
  EXPECT_EQ(Json::parse(arguments), Json({{"city", "Paris"}}));
  int argument_deltas = 0;
  for (const auto& e : events) argument_deltas += e.name == "response.function_call_arguments.delta";
  EXPECT_GE(argument_deltas, 5);  // as the model writes them, token by token
  const Json& done = events.back().data["response"];
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(done["output"], items);
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(items[i]["type"], whole["output"][i]["type"]);
    EXPECT_EQ(items[i].value("content", Json()), whole["output"][i].value("content", Json()));
  }
  EXPECT_EQ(items[2]["name"], "get_weather");
  EXPECT_EQ(items[2]["call_id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(done["usage"], whole["usage"]);
}

// A call whose block breaks after it began: incomplete in the stream, absent from the response;
// the broken markup comes back as text in both.
TEST_F(ResponsesTest, CallThatBreaksAfterItBeganIsIncompleteInStreamsAndAbsentOtherwise) {
  service_.reply = Bytes(testing::BrokenDsmlCall("get_weather"));
  Json tools = Json::array({Function("get_weather")});
  Json whole = Json::parse(Send({{"tools", tools}, {"reasoning", {{"effort", "none"}}}})->body);
  ASSERT_EQ(whole["output"].size(), 1u) << whole.dump();
  EXPECT_EQ(whole["output"][0]["type"], "message");
  auto ex = Send({{"tools", tools}, {"reasoning", {{"effort", "none"}}}, {"stream", true}});
  Json done;
  for (const auto& e : testing::Events(ex->body))
    if (e.name == "response.completed") done = e.data["response"];
  ASSERT_EQ(done["output"].size(), 2u) << done.dump();
  EXPECT_EQ(done["output"][0]["type"], "function_call");
  EXPECT_EQ(done["output"][0]["status"], "incomplete");
  EXPECT_EQ(done["output"][1]["content"], whole["output"][0]["content"]);
}

// Logprobs cover content tokens only: a tool call's tokens neither carry them nor interrupt the
// call with a message item.
TEST_F(ResponsesTest, LogprobsLeaveToolCallsWhole) {
  service_.reply = Bytes("Hi" + testing::DsmlCall("get_weather", "city", "Paris"));
  Json tools = Json::array({Function("get_weather")});
  const Json extra = {{"tools", tools}, {"reasoning", {{"effort", "none"}}}, {"include", {"message.output_text.logprobs"}}};
  Json whole = Json::parse(Send(extra)->body);
  ASSERT_EQ(whole["output"].size(), 2u) << whole.dump();
  EXPECT_EQ(whole["output"][0]["content"][0]["logprobs"].size(), 2u) << "one per content token";
  EXPECT_EQ(whole["output"][1]["type"], "function_call");
  EXPECT_EQ(whole["output"][1]["status"], "completed");
  EXPECT_EQ(Json::parse(whole["output"][1]["arguments"].get<std::string>()), Json({{"city", "Paris"}}));
  Json streamed = extra;
  streamed["stream"] = true;
  Json done;
  for (const auto& e : testing::Events(Send(streamed)->body))
    if (e.name == "response.completed") done = e.data["response"];
  ASSERT_EQ(done["output"].size(), 2u) << done.dump();
  EXPECT_EQ(done["output"][1]["status"], "completed");
}

TEST_F(ResponsesTest, FunctionCallRoundTripWithSealedReasoningAndNamespaces) {
  service_.reply = ThinkThen("Look it up.", testing::DsmlCall("fs::read", "path", "a.txt"));
  Json tools = Json::array({{{"type", "namespace"}, {"name", "fs"}, {"description", "files"},
                             {"tools", Json::array({Function("read")})}},
                            Function("plain"), {{"type", "web_search"}}});
  auto ex = Send({{"tools", tools}, {"include", {"reasoning.encrypted_content"}}});
  ASSERT_EQ(ex->status, 200) << ex->body;
  EXPECT_EQ(ex->headers.at(0).second, "web_search");
  EXPECT_NE(PromptText().find("\"fs::read\""), std::string::npos) << PromptText();
  Json r = Json::parse(ex->body);
  ASSERT_EQ(r["output"].size(), 2u) << r.dump();
  Json call = r["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "read");
  EXPECT_EQ(call["namespace"], "fs");
  Json input = Json::array({{{"role", "user"}, {"content", Json::array({{{"type", "input_text"}, {"text", "read it"}}})}},
                            r["output"][0], call,
                            {{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "file body"}}});
  service_.reply = ThinkThen("ok", "Done.");
  ex = Send({{"tools", tools}, {"input", input}});
  ASSERT_EQ(ex->status, 200) << ex->body;
  const std::string prompt = PromptText();
  EXPECT_NE(prompt.find("Look it up."), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("invoke name=\"fs::read\""), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<tool_result>file body</tool_result>"), std::string::npos) << prompt;
  input[1]["encrypted_content"] = seal_.Seal("x").substr(0, 20);
  ex = Send({{"tools", tools}, {"input", input}});
  EXPECT_EQ(ex->status, 400);
  EXPECT_EQ(Json::parse(ex->body)["error"]["param"], "input[1].encrypted_content");
}

TEST_F(ResponsesTest, LengthLimitIsIncomplete) {
  service_.reply = Bytes("long answer");
  auto ex = Send({{"max_output_tokens", 3}, {"reasoning", {{"effort", "none"}}}});
  Json r = Json::parse(ex->body);
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["output"][0]["type"], "message");
  EXPECT_EQ(service_.submitted[0].max_tokens, 3);
  EXPECT_EQ(service_.submitted[0].prompt.back(), testing::kThinkEnd);  // effort none: no thinking
}

TEST_F(ResponsesTest, DeveloperInstructionsAndEffortShapeThePrompt) {
  Json input = Json::array({{{"role", "developer"}, {"content", Json::array({{{"type", "input_text"}, {"text", "dev rules"}}})}},
                            {{"role", "user"}, {"content", "question"}}});
  auto ex = Send({{"input", input}, {"instructions", "sys"}, {"reasoning", {{"effort", "xhigh"}}}});
  ASSERT_EQ(ex->status, 200) << ex->body;
  const std::string prompt = PromptText();
  EXPECT_NE(prompt.find("sys"), std::string::npos);
  EXPECT_NE(prompt.find("dev rules"), std::string::npos);
  EXPECT_NE(prompt.find("Reasoning Effort: Absolute maximum"), std::string::npos);  // V4: xhigh -> max
  Json r = Json::parse(ex->body);
  EXPECT_EQ(r["instructions"], "sys");
  EXPECT_EQ(r["reasoning"]["effort"], "xhigh");
}

TEST_F(ResponsesTest, StatefulAndUnsupportedFieldsAreNamed) {
  const std::vector<std::pair<Json, std::string>> cases = {
      {{{"store", true}}, "store"},
      {{{"previous_response_id", "resp_1"}}, "previous_response_id"},
      {{{"background", true}}, "background"},
      {{{"reasoning", {{"summary", "concise"}}}}, "reasoning.summary"},
      {{{"tool_choice", "required"}}, "tool_choice"},
      {{{"parallel_tool_calls", "no"}}, "parallel_tool_calls"},
      {{{"include", {"file_search_call.results"}}}, "include"},
      {{{"input", Json::array({{{"role", "user"}, {"content", Json::array({{{"type", "input_image"}, {"image_url", "x"}}})}}})}},
       "input[0].content[0]"},
      {{{"tools", Json::array({{{"type", "function"}, {"name", "f"}, {"strict", "yes"}}})}}, "tools[0].strict"},
      {{{"frobnicate", 1}}, "frobnicate"},
      {{{"max_output_tokens", 0}}, "max_output_tokens"},
      {{{"max_output_tokens", 1 << 30}}, "max_output_tokens"},
      {{{"text", {{"format", {{"type", "json_schema"}, {"name", 5}}}}}}, "text.format.name"},
  };
  for (const auto& [extra, field] : cases) {
    auto ex = Send(extra);
    EXPECT_EQ(ex->status, 400) << extra.dump() << ex->body;
    EXPECT_EQ(Json::parse(ex->body)["error"]["param"], field) << ex->body;
  }
  EXPECT_EQ(Send({{"metadata", {{"k", "v"}}}, {"prompt_cache_key", "abc"}, {"client_metadata", {{"x", "y"}}}})->status, 200);
  EXPECT_EQ(Send({{"background", false}, {"previous_response_id", nullptr}, {"conversation", ""}})->status, 200);
  EXPECT_EQ(Json::parse(Send({{"input", Json::array({{{"role", "system"}, {"content", "only rules"}}})}})->body)["error"]["param"], "input");
  auto hosted = Send({{"tools", Json::array({{{"type", "web_search\r\nX-Evil: 1"}}})}});
  ASSERT_EQ(hosted->status, 200);
  EXPECT_EQ(hosted->headers.at(0).second.find('\r'), std::string::npos);
}

}  // namespace
}  // namespace flashserve::api
