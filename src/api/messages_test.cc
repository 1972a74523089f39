// The Anthropic Messages route against the scripted Service: the message object and its
// stream events, thinking blocks sealed and handed back, tool use round trips, stop reasons,
// usage sums, thinking budgets, deferred and hosted tools, count_tokens, and every refusal in
// Anthropic's error shape.
#include "api/dialect_test_fixture.h"

namespace flashserve::api {
namespace {

using testing::Bytes;
using testing::Json;
using testing::ThinkThen;

class MessagesTest : public testing::DialectTest {
 protected:
  std::shared_ptr<testing::FakeExchange> Send(Json extra = Json::object()) {
    Json body = {{"model", "test-model"}, {"max_tokens", 1024},
                 {"messages", Json::array({{{"role", "user"}, {"content", "Hi"}}})}};
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    return Run(HandleMessages, body, "/v1/messages");
  }
  static Json ToolDef(const char* name, bool deferred = false) {
    Json t = {{"name", name}, {"description", std::string("tool ") + name}, {"input_schema", {{"type", "object"}}}};
    if (deferred) t["defer_loading"] = true;
    return t;
  }
};

TEST_F(MessagesTest, MessageHasSealedThinkingTextAndUsageThatSumsToThePrompt) {
  service_.reply = ThinkThen("Let me think.", "Hi there");
  service_.cached_tokens = 2;
  auto ex = Send();
  ASSERT_EQ(ex->status, 200) << ex->body;
  Json m = Json::parse(ex->body);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(m["content"].size(), 2u) << m.dump();
  EXPECT_EQ(m["content"][0]["type"], "thinking");
  EXPECT_EQ(m["content"][0]["thinking"], "Let me think.");
  EXPECT_EQ(seal_.Open(m["content"][0]["signature"].get<std::string>()).value(), "Let me think.");
  EXPECT_EQ(m["content"][1], Json({{"type", "text"}, {"text", "Hi there"}}));
  EXPECT_EQ(m["stop_reason"], "end_turn");
  EXPECT_TRUE(m["stop_sequence"].is_null());
  const Json& u = m["usage"];
  const int64_t prompt = static_cast<int64_t>(service_.submitted[0].prompt.size());
  EXPECT_EQ(u["input_tokens"].get<int64_t>() + u["cache_read_input_tokens"].get<int64_t>(), prompt);
  EXPECT_EQ(u["cache_read_input_tokens"], 2);
  EXPECT_EQ(u["cache_creation_input_tokens"], 0);
  EXPECT_EQ(u["output_tokens"], service_.reply.size());
}

TEST_F(MessagesTest, StreamSendsNamedEventsInAnthropicsOrder) {
  service_.reply = ThinkThen("Plan.", "Hello");
  auto ex = Send({{"stream", true}});
  ASSERT_EQ(ex->status, 200);
  EXPECT_EQ(ex->content_type, "text/event-stream");
  std::vector<testing::SseEvent> events = testing::Events(ex->body);
  std::vector<std::string> names;
  std::string thinking, text, signature;
  for (const auto& e : events) {
    ASSERT_FALSE(e.name.empty());
    EXPECT_EQ(e.data["type"], e.name);
    if (names.empty() || names.back() != e.name) names.push_back(e.name);
    if (e.name != "content_block_delta") continue;
    const Json& d = e.data["delta"];
    if (d["type"] == "thinking_delta") thinking += d["thinking"].get<std::string>();
    if (d["type"] == "text_delta") text += d["text"].get<std::string>();
    if (d["type"] == "signature_delta") signature = d["signature"];
  }
  EXPECT_EQ(names, (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                             "content_block_stop", "content_block_start", "content_block_delta",
                                             "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(thinking, "Plan.");
  EXPECT_EQ(text, "Hello");
  EXPECT_EQ(seal_.Open(signature).value(), "Plan.");
  const Json& delta = events[events.size() - 2].data;
  EXPECT_EQ(delta["delta"]["stop_reason"], "end_turn");
  EXPECT_EQ(delta["usage"]["output_tokens"], service_.reply.size());
  EXPECT_EQ(events[0].data["message"]["usage"]["input_tokens"], service_.submitted[0].prompt.size());
}

TEST_F(MessagesTest, StreamEqualsTheMessageForTheSameOutput) {
  service_.reply = ThinkThen("R", "Answer" + testing::DsmlCall("get_weather", "city", "Paris"));
  Json tools = Json::array({ToolDef("get_weather")});
  Json whole = Json::parse(Send({{"tools", tools}})->body);
  auto ex = Send({{"tools", tools}, {"stream", true}});
  Json blocks = Json::array();
  std::string partial;
  for (const auto& e : testing::Events(ex->body)) {
    if (e.name == "content_block_start") blocks.push_back(e.data["content_block"]);
    if (e.name != "content_block_delta") continue;
    const Json& d = e.data["delta"];
    Json& b = blocks.back();
    if (d["type"] == "thinking_delta") b["thinking"] = b["thinking"].get<std::string>() + d["thinking"].get<std::string>();
    if (d["type"] == "signature_delta") b["signature"] = d["signature"];
    if (d["type"] == "text_delta") b["text"] = b["text"].get<std::string>() + d["text"].get<std::string>();
    if (d["type"] == "input_json_delta") b["input"] = Json::parse(b.value("partial", "") + d["partial_json"].get<std::string>(), nullptr, false), b["partial"] = b.value("partial", "") + d["partial_json"].get<std::string>();
  }
  for (Json& b : blocks) b.erase("partial");
  ASSERT_EQ(blocks.size(), whole["content"].size()) << blocks.dump() << "\n" << whole.dump();
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (const char* key : {"type", "thinking", "text", "name", "input"})
      EXPECT_EQ(blocks[i].value(key, Json()), whole["content"][i].value(key, Json())) << key;
  }
  int input_deltas = 0;
  for (const auto& e : testing::Events(ex->body))
    input_deltas += e.name == "content_block_delta" && e.data["delta"]["type"] == "input_json_delta";
  EXPECT_GE(input_deltas, 5);  // the input streams as the model writes it, token by token
  EXPECT_EQ(whole["stop_reason"], "tool_use");
  EXPECT_EQ(whole["content"][2]["input"], Json({{"city", "Paris"}}));
  EXPECT_EQ(whole["content"][2]["id"].get<std::string>().rfind("toolu_", 0), 0u);
}

// A call whose block breaks after it began: the stream closed the block it had opened; the
// message leaves the call out; both return the broken markup as text and end the turn.
TEST_F(MessagesTest, CallThatBreaksAfterItBeganIsClosedInStreamsAndLeftOutOfMessages) {
  service_.reply = Bytes(testing::BrokenDsmlCall("get_weather"));
  Json tools = Json::array({ToolDef("get_weather")});
  Json whole = Json::parse(Send({{"tools", tools}, {"thinking", {{"type", "disabled"}}}})->body);
  ASSERT_EQ(whole["content"].size(), 1u) << whole.dump();
  EXPECT_EQ(whole["content"][0]["type"], "text");
  EXPECT_NE(whole["content"][0]["text"].get<std::string>().find("oops"), std::string::npos);
  EXPECT_EQ(whole["stop_reason"], "end_turn");
  auto ex = Send({{"tools", tools}, {"thinking", {{"type", "disabled"}}}, {"stream", true}});
  std::vector<std::string> starts;
  int open = 0;
  for (const auto& e : testing::Events(ex->body)) {
    if (e.name == "content_block_start") starts.push_back(e.data["content_block"]["type"]), ++open;
    if (e.name == "content_block_stop") --open;
    if (e.name == "message_delta") {
      EXPECT_EQ(e.data["delta"]["stop_reason"], "end_turn");
    }
  }
  EXPECT_EQ(starts, (std::vector<std::string>{"tool_use", "text"}));
  EXPECT_EQ(open, 0);
}

TEST_F(MessagesTest, ToolUseRoundTripRestoresTheSealedReasoningIntoThePrompt) {
  service_.reply = ThinkThen("Need the weather.", testing::DsmlCall("get_weather", "city", "Paris"));
  Json tools = Json::array({ToolDef("get_weather")});
  Json first = Json::parse(Send({{"tools", tools}})->body);
  ASSERT_EQ(first["stop_reason"], "tool_use") << first.dump();
  Json history = Json::array({{{"role", "user"}, {"content", "Weather?"}},
                              {{"role", "assistant"}, {"content", first["content"]}},
                              {{"role", "user"},
                               {"content", Json::array({{{"type", "tool_result"},
                                                         {"tool_use_id", first["content"][1]["id"]},
                                                         {"content", "sunny"}}})}}});
  service_.reply = ThinkThen("Done.", "It is sunny.");
  auto ex = Send({{"tools", tools}, {"messages", history}});
  ASSERT_EQ(ex->status, 200) << ex->body;
  const std::string prompt = PromptText();
  EXPECT_NE(prompt.find("Need the weather."), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<tool_result>sunny</tool_result>"), std::string::npos) << prompt;
  // A signature another key made, or an edited one, is refused by name.
  Json tampered = history;
  std::string sig = tampered[1]["content"][0]["signature"];
  sig[sig.size() - 3] = sig[sig.size() - 3] == 'A' ? 'B' : 'A';
  tampered[1]["content"][0]["signature"] = sig;
  ex = Send({{"tools", tools}, {"messages", tampered}});
  EXPECT_EQ(ex->status, 400);
  Json err = Json::parse(ex->body);
  EXPECT_EQ(err["type"], "error");
  EXPECT_EQ(err["error"]["message"].get<std::string>().rfind("messages[1].content[0].signature", 0), 0u) << ex->body;
  Json edited = history;
  edited[1]["content"][0]["thinking"] = "Something else.";
  EXPECT_EQ(Send({{"tools", tools}, {"messages", edited}})->status, 400);
}

TEST_F(MessagesTest, OmittedThinkingCarriesOnlyTheSignature) {
  service_.reply = ThinkThen("secret plan", "ok");
  Json m = Json::parse(Send({{"thinking", {{"type", "adaptive"}, {"display", "omitted"}}}})->body);
  EXPECT_EQ(m["content"][0]["thinking"], "");
  EXPECT_EQ(seal_.Open(m["content"][0]["signature"].get<std::string>()).value(), "secret plan");
}

TEST_F(MessagesTest, StopReasonsForStopSequenceAndMaxTokens) {
  service_.reply = ThinkThen("r", "one STOP two");
  Json m = Json::parse(Send({{"stop_sequences", {"STOP"}}})->body);
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "STOP");
  EXPECT_EQ(m["content"][1]["text"], "one ");
  service_.finish_length = true;
  m = Json::parse(Send({{"thinking", {{"type", "disabled"}}}})->body);
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  EXPECT_EQ(m["content"][0]["type"], "text");
}

TEST_F(MessagesTest, BudgetEffortAndThinkingSwitchReachTheRequest) {
  Send({{"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}, {"output_config", {{"effort", "max"}}}});
  ASSERT_EQ(service_.submitted.size(), 1u);
  EXPECT_EQ(service_.submitted[0].reasoning_budget, 1024);
  EXPECT_EQ(service_.submitted[0].think_end_token, testing::kThinkEnd);
  EXPECT_NE(PromptText().find("Reasoning Effort: Absolute maximum"), std::string::npos);
  Send({{"thinking", {{"type", "disabled"}}}});
  EXPECT_EQ(service_.submitted[1].reasoning_budget, -1);
  EXPECT_EQ(service_.submitted[1].prompt.back(), testing::kThinkEnd);  // chat mode: </think> opens the answer
}

TEST_F(MessagesTest, SystemBlocksSystemTurnsDeferredAndHostedTools) {
  Json messages = Json::array({{{"role", "user"}, {"content", Json::array({{{"type", "text"}, {"text", "part one"}},
                                                                           {{"type", "text"}, {"text", "part two"}}})}},
                               {{"role", "system"}, {"content", "mid-conversation note"}}});
  Json tools = Json::array({ToolDef("Read"), ToolDef("Hidden", true),
                            {{"type", "web_search_20250305"}, {"name", "web_search"}}});
  auto ex = Send({{"system", Json::array({{{"type", "text"}, {"text", "You are helpful."}, {"cache_control", {{"type", "ephemeral"}}}},
                                          {{"type", "text"}, {"text", "Be brief."}}})},
                  {"messages", messages}, {"tools", tools}, {"metadata", {{"user_id", "{\"session\":\"x\"}"}}}});
  ASSERT_EQ(ex->status, 200) << ex->body;
  const std::string prompt = PromptText();
  EXPECT_NE(prompt.find("You are helpful.\n\nBe brief."), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("part one\n\npart two"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("mid-conversation note"), std::string::npos);
  EXPECT_NE(prompt.find("\"Read\""), std::string::npos);
  EXPECT_EQ(prompt.find("Hidden"), std::string::npos);  // deferred, never referenced
  EXPECT_EQ(prompt.find("web_search"), std::string::npos);
  ASSERT_EQ(ex->headers.size(), 1u);
  EXPECT_EQ(ex->headers[0], (std::pair<std::string, std::string>("x-flashserve-dropped-tools", "web_search")));
  ctx_.options.hosted_tools = dialect::HostedTools::kReject;
  ex = Send({{"tools", tools}});
  EXPECT_EQ(ex->status, 400);
  EXPECT_NE(ex->body.find("tools[2]"), std::string::npos) << ex->body;
}

// Claude Code's Read tool returns screenshots as image blocks inside tool_result: the tool
// message keeps text and pictures as parts in order (the field path of each picture for its
// errors); is_error prefixes the first text; a text-only result stays one string.
TEST(MessagesToolResultImages, PicturesStayPartsOfTheToolMessage) {
  const std::string png = "data:image/png;base64,iVBORw0KGgo=";
  auto body = [&](bool is_error, Json content) {
    Json result = {{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", std::move(content)}};
    if (is_error) result["is_error"] = true;
    return Json{{"model", "m"}, {"max_tokens", 8},
                {"messages", Json::array({{{"role", "user"}, {"content", "look"}},
                                          {{"role", "assistant"}, {"content", Json::array({{{"type", "tool_use"}, {"id", "toolu_1"},
                                                                                            {"name", "Read"}, {"input", Json::object()}}})}},
                                          {{"role", "user"}, {"content", Json::array({result})}}})}};
  };
  const Json picture = {{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", "iVBORw0KGgo="}}}};
  dialect::DialectContext ctx;
  dialect::DialectRequest out;
  ASSERT_FALSE(dialect::ParseMessagesBody(body(false, Json::array({{{"type", "text"}, {"text", "shot:"}}, picture})), ctx, &out));
  const protocol::ChatMessage& tool = out.chat.messages.back();
  EXPECT_EQ(tool.role, protocol::Role::kTool);
  ASSERT_EQ(tool.content.kind, protocol::ContentKind::kParts);
  ASSERT_EQ(tool.content.parts.size(), 2u);
  EXPECT_EQ(tool.content.parts[0].text, "shot:");
  EXPECT_EQ(tool.content.parts[1].type, protocol::PartType::kImage);
  EXPECT_EQ(tool.content.parts[1].image_source, png);
  EXPECT_EQ(tool.content.parts[1].field_path, "messages[2].content[0].content[1]");

  dialect::DialectRequest failed;
  ASSERT_FALSE(dialect::ParseMessagesBody(body(true, Json::array({picture, {{"type", "text"}, {"text", "no file"}}})), ctx, &failed));
  EXPECT_EQ(failed.chat.messages.back().content.parts[1].text, "Error: no file");
  dialect::DialectRequest only_picture;
  ASSERT_FALSE(dialect::ParseMessagesBody(body(true, Json::array({picture})), ctx, &only_picture));
  EXPECT_EQ(only_picture.chat.messages.back().content.parts[0].text, "Error: ");

  dialect::DialectRequest text;
  ASSERT_FALSE(dialect::ParseMessagesBody(body(false, Json::array({{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}})), ctx, &text));
  EXPECT_EQ(text.chat.messages.back().content.kind, protocol::ContentKind::kText);
  EXPECT_EQ(text.chat.messages.back().content.text, "a\n\nb");
  auto refused = dialect::ParseMessagesBody(body(false, Json::array({{{"type", "document"}}})), ctx, &text);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->param, "messages[2].content[0].content[0]");
}

TEST_F(MessagesTest, ToolReferenceLoadsADeferredTool) {
  Json messages = Json::array({{{"role", "user"}, {"content", "find a tool"}},
                               {{"role", "assistant"}, {"content", Json::array({{{"type", "tool_use"}, {"id", "toolu_1"},
                                                                                 {"name", "search"}, {"input", Json::object()}}})}},
                               {{"role", "user"},
                                {"content", Json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"},
                                                          {"content", Json::array({{{"type", "tool_reference"}, {"tool_name", "Hidden"}}})}}})}}});
  auto ex = Send({{"messages", messages}, {"thinking", {{"type", "disabled"}}},
                  {"tools", Json::array({ToolDef("search"), ToolDef("Hidden", true)})}});
  ASSERT_EQ(ex->status, 200) << ex->body;
  EXPECT_NE(PromptText().find("\"Hidden\""), std::string::npos);
}

TEST_F(MessagesTest, ClearThinkingKeepsTheLastTurnsReasoning) {
  auto assistant = [this](const std::string& reasoning) {
    return Json{{"role", "assistant"},
                {"content", Json::array({{{"type", "thinking"}, {"thinking", reasoning}, {"signature", seal_.Seal(reasoning)}},
                                         {{"type", "tool_use"}, {"id", "toolu_" + reasoning}, {"name", "Read"}, {"input", Json::object()}}})}};
  };
  auto result = [](const std::string& id) {
    return Json{{"role", "user"}, {"content", Json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_" + id}, {"content", "x"}}})}};
  };
  Json messages = Json::array({{{"role", "user"}, {"content", "go"}}, assistant("first-plan"), result("first-plan"),
                               assistant("second-plan"), result("second-plan")});
  Json tools = Json::array({ToolDef("Read")});
  Send({{"messages", messages}, {"tools", tools},
        {"context_management", {{"edits", Json::array({{{"type", "clear_thinking_20251015"}, {"keep", {{"type", "thinking_turns"}, {"value", 1}}}}})}}}});
  EXPECT_EQ(PromptText().find("first-plan<"), std::string::npos);
  EXPECT_NE(PromptText().find("second-plan"), std::string::npos);
  Send({{"messages", messages}, {"tools", tools},
        {"context_management", {{"edits", Json::array({{{"type", "clear_thinking_20251015"}, {"keep", "all"}}})}}}});
  EXPECT_NE(PromptText().find("first-plan"), std::string::npos);
}

TEST_F(MessagesTest, CountTokensIsThePromptLength) {
  Json body = {{"model", "test-model"}, {"messages", Json::array({{{"role", "user"}, {"content", "count me"}}})}};
  auto ex = Run(HandleCountTokens, body, "/v1/messages/count_tokens");
  ASSERT_EQ(ex->status, 200) << ex->body;
  const int64_t counted = Json::parse(ex->body)["input_tokens"];
  Send({{"messages", body["messages"]}});
  EXPECT_EQ(counted, static_cast<int64_t>(service_.submitted.back().prompt.size()));
}

TEST_F(MessagesTest, RefusalsNameTheFieldInAnthropicsShape) {
  struct Case {
    Json extra;
    std::string field;
    int status;
  };
  const std::vector<Case> cases = {
      {{{"mcp_servers", Json::array()}}, "mcp_servers", 400},
      {{{"stop_sequences", Json::array({""})}}, "stop_sequences", 400},
      {{{"tools", Json::array({{{"type", "bash_20250124"}, {"name", "bash"}}})}}, "tools[0].type", 400},
      {{{"context_management", {{"edits", Json::array({{{"type", "clear_thinking_20251015"}, {"keep", {{"value", 1}}}}})}}}},
       "context_management.edits[0].keep", 400},
      {{{"messages", Json::array({{{"role", "user"}, {"content", Json::array()}}})}}, "messages[0].content", 400},
      {{{"messages", Json::array({{{"role", "assistant"}, {"content", "x"}}})}}, "messages", 400},
      {{{"messages", Json::array({{{"role", "user"}, {"content", "a"}}, {{"role", "assistant"}, {"content", "b"}},
                                  {{"role", "assistant"}, {"content", "c"}}})}}, "messages[2]", 400},
      {{{"max_tokens", nullptr}}, "max_tokens", 400},
      {{{"tool_choice", {{"type", "any"}}}}, "tool_choice", 400},
      {{{"tool_choice", {{"type", "auto"}, {"disable_parallel_tool_use", "yes"}}}}, "tool_choice.disable_parallel_tool_use", 400},
      {{{"messages", Json::array({{{"role", "user"}, {"content", Json::array({{{"type", "image"}, {"source", Json::object()}}})}}})}},
       "messages[0].content[0]", 400},
      {{{"thinking", {{"type", "sometimes"}}}}, "thinking.type", 400},
      {{{"output_config", {{"effort", "extreme"}}}}, "output_config.effort", 400},
      {{{"model", "claude-sonnet-4-5"}}, "model", 404},
  };
  for (const Case& c : cases) {
    auto ex = Send(c.extra);
    EXPECT_EQ(ex->status, c.status) << c.extra.dump() << " " << ex->body;
    Json err = Json::parse(ex->body);
    EXPECT_EQ(err["type"], "error") << ex->body;
    EXPECT_NE(err["error"]["message"].get<std::string>().find(c.field), std::string::npos) << c.field << ": " << ex->body;
  }
  EXPECT_EQ(Json::parse(Send({{"model", "claude-x"}})->body)["error"]["type"], "not_found_error");
  ctx_.options.model_aliases = {"claude-*"};
  auto ex = Send({{"model", "claude-sonnet-4-5"}});
  ASSERT_EQ(ex->status, 200) << ex->body;
  EXPECT_EQ(Json::parse(ex->body)["model"], "claude-sonnet-4-5");
}


// Claude Code ends its first request with a role "system" message: on V4 it becomes a developer
// (user-side) turn, so the prompt still ends with the reply header.
TEST_F(MessagesTest, TrailingSystemMessageStillEndsWithTheReplyHeader) {
  Json messages = Json::array({{{"role", "user"}, {"content", "hi"}}, {{"role", "system"}, {"content", "reminder"}}});
  ASSERT_EQ(Send({{"messages", messages}})->status, 200);
  const std::string prompt = PromptText();
  const std::string tail = "<263>reminder<264><258>";  // <｜User｜>reminder<｜Assistant｜><think>
  ASSERT_GE(prompt.size(), tail.size());
  EXPECT_EQ(prompt.substr(prompt.size() - tail.size()), tail) << prompt;
}


// Anthropic's prefill: a final assistant message is continued, and only the continuation returns.
TEST_F(MessagesTest, FinalAssistantMessageIsAPrefillToContinue) {
  service_.reply = Bytes(" there");
  Json messages = Json::array({{{"role", "user"}, {"content", "greet"}}, {{"role", "assistant"}, {"content", "Hello"}}});
  auto ex = Send({{"messages", messages}});
  ASSERT_EQ(ex->status, 200) << ex->body;
  const std::string tail = "<264><258><259>Hello";  // <｜Assistant｜><think></think>Hello: empty reasoning, then the prefill
  const std::string prompt = PromptText();
  EXPECT_EQ(prompt.substr(prompt.size() - tail.size()), tail) << prompt;
  Json m = Json::parse(ex->body);
  ASSERT_EQ(m["content"].size(), 1u) << m.dump();  // the answer was open: no thinking block
  EXPECT_EQ(m["content"][0]["text"], " there");
}


// While the prompt prefills, a stream pings every keep-alive period; once tokens flow, no more.
TEST_F(MessagesTest, StreamPingsUntilTheFirstToken) {
  Json body = {{"model", "test-model"}, {"max_tokens", 64}, {"stream", true},
               {"messages", Json::array({{{"role", "user"}, {"content", "Hi"}}})}};
  auto ex = std::make_shared<testing::FakeExchange>(body.dump(), "POST", "/v1/messages");
  HandleMessages(ctx_, ex);
  auto pings = [&ex] {
    size_t n = 0;
    for (size_t at = ex->body.find("event: ping"); at != std::string::npos; at = ex->body.find("event: ping", at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(pings(), 1u);  // right after message_start
  for (int tick = 0; tick < 2; ++tick) {
    ASSERT_EQ(ex->ElapseDelayed(), 1);
    ex->RunTasks();
  }
  EXPECT_EQ(pings(), 3u);
  while (service_.Deliver(1) + ex->RunTasks() > 0) {
  }
  ASSERT_EQ(ex->ElapseDelayed(), 1);  // the tick scheduled before the tokens came
  ex->RunTasks();
  EXPECT_EQ(pings(), 3u);
  EXPECT_EQ(ex->ElapseDelayed(), 0);  // and none after it
  EXPECT_NE(ex->body.find("event: message_stop"), std::string::npos);
}

}  // namespace
}  // namespace flashserve::api
