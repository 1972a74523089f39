// Version dispatch and helpers shared by the two encoders (encoding/encoder.h).
#include "encoding/encoder.h"

#include "encoding/conversation.h"
#include "encoding/python_json.h"

namespace flashserve::encoding {

std::optional<EncodingVersion> ParseEncodingVersion(std::string_view name) {
  if (name == "v4") return EncodingVersion::kV4;
  if (name == "v41" || name == "v4.1") return EncodingVersion::kV41;
  return std::nullopt;
}

std::string_view EncodingVersionName(EncodingVersion version) {
  return version == EncodingVersion::kV4 ? "v4" : "v41";
}

std::vector<DsmlParam> ParamsFromObject(const nlohmann::ordered_json& arguments) {
  std::vector<DsmlParam> params;
  for (const auto& [key, value] : arguments.items()) {
    if (value.is_string()) {
      params.push_back({key, true, value.get<std::string>()});
    } else {
      params.push_back({key, false, PythonJsonDumps(value)});
    }
  }
  return params;
}

base::Result<EncodedPrompt> EncodeChat(const protocol::ChatRequest& request,
                                       EncodingVersion version, const EncodeOptions& options) {
  return version == EncodingVersion::kV4 ? EncodeV4(request, options.v4_picture_parts) : EncodeV41(request);
}

base::Result<ContinuationPrompt> EncodeChatContinuation(const protocol::ChatRequest& request,
                                                        EncodingVersion version,
                                                        const EncodeOptions& options) {
  if (request.messages.empty() || request.messages.back().role != protocol::Role::kAssistant) {
    return base::MakeError(base::ErrorCode::kBadChatRequest,
                           "messages: a continuation needs an assistant message last");
  }
  protocol::ChatRequest head = request;
  const protocol::ChatMessage last = std::move(head.messages.back());
  head.messages.pop_back();
  const size_t index = head.messages.size();
  if (!last.tool_calls.empty()) return MessageError(index, "a message to continue cannot carry tool_calls");
  if (last.content.kind == protocol::ContentKind::kParts) {
    return MessageError(index, "a message to continue needs string content");
  }
  FS_ASSIGN_OR_RETURN(EncodedPrompt prompt, EncodeChat(head, version, options));
  PieceList pieces = std::move(prompt.pieces);
  // The turn before must be one the reply follows (user, tool; V4 developer; V4.1 later system):
  // then the prompt ends with the reply header, <｜Assistant｜> and a think token.
  const size_t n = pieces.size();
  if (n < 2 || pieces[n - 2].kind != PieceKind::kControl || pieces[n - 2].text != kAssistantToken) {
    return MessageError(index, "a message to continue must follow a user or tool message");
  }
  const bool thinking = ThinkingEnabled(request);
  bool answer_open = !thinking;
  if (thinking) {
    AppendText(pieces, last.reasoning_content.value_or(""));
    if (!last.content.text.empty()) {
      AppendControl(pieces, kThinkEndToken);
      answer_open = true;
    }
  }
  AppendText(pieces, last.content.text);
  return ContinuationPrompt{MakePrompt(std::move(pieces)), answer_open};
}

}  // namespace flashserve::encoding
