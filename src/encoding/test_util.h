// Test helpers for the encoding room's tests: placeholder expansion for readable expected
// prompts and one-call request encoding. Test code only; any thread.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <gtest/gtest.h>

#include "encoding/encoder.h"
#include "protocol/chat_json.h"

namespace flashserve::encoding::testing {

// Replaces {BOS} {EOS} {U} {A} {S} {LR} {think} {/think} {DSML} {IMG} by the control tokens.
inline std::string Expand(std::string_view text) {
  static const std::pair<std::string_view, std::string_view> kNames[] = {
      {"{BOS}", kBosToken},          {"{EOS}", kEosToken},         {"{U}", kUserToken},
      {"{A}", kAssistantToken},      {"{S}", kSystemToken},        {"{LR}", kLatestReminderToken},
      {"{think}", kThinkStartToken}, {"{/think}", kThinkEndToken}, {"{DSML}", kDsmlToken},
      {"{IMG}", kImageToken},
  };
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    bool replaced = false;
    for (const auto& [name, token] : kNames) {
      if (text.substr(i).starts_with(name)) {
        out += token;
        i += name.size();
        replaced = true;
        break;
      }
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

// Encodes a request body; returns the error text (prefixed "ERROR: ") when it fails.
inline std::string Render(std::string_view body, EncodingVersion version, const EncodeOptions& options = {}) {
  auto request = protocol::ParseChatRequest(body);
  if (!request.ok()) return "ERROR: " + request.error().ToString();
  auto prompt = EncodeChat(*request, version, options);
  if (!prompt.ok()) return "ERROR: " + prompt.error().ToString();
  return prompt->text;
}

inline EncodedPrompt MustEncode(std::string_view body, EncodingVersion version, const EncodeOptions& options = {}) {
  auto request = protocol::ParseChatRequest(body);
  EXPECT_TRUE(request.ok()) << request.error().ToString();
  if (!request.ok()) return {};
  auto prompt = EncodeChat(*request, version, options);
  EXPECT_TRUE(prompt.ok()) << prompt.error().ToString();
  return prompt.ok() ? std::move(prompt).value() : EncodedPrompt{};
}

}  // namespace flashserve::encoding::testing
