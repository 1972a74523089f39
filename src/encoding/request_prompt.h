// The prompt a chat request renders to, as a worker builds it and the router predicts it: a
// final assistant message is continued (EncodeChatContinuation), anything else opens a new
// reply (EncodeChat). Pure, any thread.
#pragma once

#include "base/result.h"
#include "encoding/encoder.h"
#include "encoding/prompt.h"
#include "encoding/version.h"
#include "protocol/chat.h"

namespace flashserve::encoding {

struct RequestPrompt {
  EncodedPrompt prompt;
  bool thinking = true;  // the reply starts in the reasoning (the output parser must agree)
};

base::Result<RequestPrompt> EncodeRequest(const protocol::ChatRequest& request, EncodingVersion version,
                                          const EncodeOptions& options = {});

}  // namespace flashserve::encoding
