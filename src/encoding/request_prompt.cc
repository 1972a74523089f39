// Continuation or new reply (encoding/request_prompt.h).
#include "encoding/request_prompt.h"

namespace flashserve::encoding {

base::Result<RequestPrompt> EncodeRequest(const protocol::ChatRequest& request, EncodingVersion version,
                                          const EncodeOptions& options) {
  const bool continuation = !request.messages.empty() && request.messages.back().role == protocol::Role::kAssistant;
  RequestPrompt out;
  if (continuation) {
    FS_ASSIGN_OR_RETURN(ContinuationPrompt c, EncodeChatContinuation(request, version, options));
    out.prompt = std::move(c.prompt);
    out.thinking = !c.answer_open;
    return out;
  }
  FS_ASSIGN_OR_RETURN(out.prompt, EncodeChat(request, version, options));
  out.thinking = ThinkingEnabled(request);
  return out;
}

}  // namespace flashserve::encoding
