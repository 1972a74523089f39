// What the dialect route tests share (not part of fs_api): a RouteContext over the scripted
// FakeService with a reasoning seal, a runner for any route handler, reply builders (reasoning,
// </think>, DSML tool calls) and a parser of named SSE events.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "grammar/token_vocabulary.h"
#include "api/api_test_util.h"
#include "api/routes.h"
#include "encoding/prompt.h"

namespace flashserve::api::testing {

using Json = nlohmann::ordered_json;

inline std::string DsmlCall(const std::string& name, const std::string& param, const std::string& value) {
  const std::string d(encoding::kDsmlToken);
  return "\n\n<" + d + "tool_calls>\n<" + d + "invoke name=\"" + name + "\">\n<" + d + "parameter name=\"" + param +
         "\" string=\"true\">" + value + "</" + d + "parameter>\n</" + d + "invoke>\n</" + d + "tool_calls>";
}

// A call whose block breaks after its first parameter was written.
inline std::string BrokenDsmlCall(const std::string& name) {
  const std::string d(encoding::kDsmlToken);
  return "\n\n<" + d + "tool_calls>\n<" + d + "invoke name=\"" + name + "\">\n<" + d +
         "parameter name=\"city\" string=\"true\">Paris</" + d + "parameter>\noops";
}

// Reasoning, the </think> token, then the answer (ids as the byte tokenizer gives them).
inline std::vector<int32_t> ThinkThen(const std::string& reasoning, const std::string& answer) {
  std::vector<int32_t> ids = Bytes(reasoning);
  ids.push_back(kThinkEnd);
  for (int32_t id : Bytes(answer)) ids.push_back(id);
  return ids;
}

struct SseEvent {
  std::string name;  // "" when the frame had no event: line
  Json data;
};

inline std::vector<SseEvent> Events(const std::string& body) {
  std::vector<SseEvent> events;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string frame = body.substr(pos, end - pos);
    SseEvent e;
    size_t line = 0;
    while (line < frame.size()) {
      size_t eol = frame.find('\n', line);
      if (eol == std::string::npos) eol = frame.size();
      const std::string l = frame.substr(line, eol - line);
      if (l.rfind("event: ", 0) == 0) e.name = l.substr(7);
      if (l.rfind("data: ", 0) == 0) e.data = Json::parse(l.substr(6));
      line = eol + 1;
    }
    events.push_back(std::move(e));
    pos = end + 2;
  }
  return events;
}

class DialectTest : public ::testing::Test {
 protected:
  DialectTest()
      : tok_(ByteTokenizer()), seal_(Key()), grammars_(grammar::VocabularyFromTokenizer(*tok_, {kEos}, 290, {std::string(encoding::kDsmlToken)})) {
    ctx_.service = &service_;
    ctx_.grammars = &grammars_;
    ctx_.tokenizer = tok_.get();
    ctx_.metrics = &metrics_;
    ctx_.ids = &ids_;
    ctx_.seal = &seal_;
  }
  static std::array<uint8_t, dialect::ReasoningSeal::kKeyBytes> Key() {
    std::array<uint8_t, dialect::ReasoningSeal::kKeyBytes> k{};
    for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(i * 7 + 1);
    return k;
  }

  std::shared_ptr<FakeExchange> Run(void (*handler)(const RouteContext&, const ExchangePtr&), const Json& body,
                                    const char* path) {
    auto ex = std::make_shared<FakeExchange>(body.dump(), "POST", path);
    handler(ctx_, ex);
    while (service_.Deliver(1) + ex->RunTasks() > 0) {
    }
    return ex;
  }
  // The last submitted prompt as text (byte tokens; control tokens as "<id>").
  std::string PromptText() const {
    std::string text;
    for (int32_t id : service_.submitted.back().prompt) {
      if (id < 256) {
        text.push_back(static_cast<char>(id));
      } else {
        text.append("<").append(std::to_string(id)).append(">");
      }
    }
    return text;
  }

  FakeService service_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  dialect::ReasoningSeal seal_;
  ApiMetrics metrics_;
  IdSource ids_;
  grammar::GrammarCache grammars_;
  RouteContext ctx_;
};

}  // namespace flashserve::api::testing
