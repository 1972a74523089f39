// DeepSeek-V4 / V4.1 chat prompt encoding: a protocol::ChatRequest becomes exactly the text
// DeepSeek's reference encoder produces (V4: encoding_dsv4.py; V4.1: the V4.1-Flash release's
// encoding/encoding.py), split into control and text pieces (encoding/prompt.h). Callers: api,
// app. Pure functions, safe from any thread.
#pragma once

#include "base/result.h"
#include "encoding/prompt.h"
#include "encoding/version.h"
#include "protocol/chat.h"

namespace flashserve::encoding {

// The generation prompt for `request`: BOS, every message, and the assistant header after a
// final user turn (`<｜Assistant｜><think>` in thinking mode, `<｜Assistant｜></think>` in chat
// mode). Thinking mode is on unless request.thinking is false. Tools are rendered unless
// tool_choice is "none"; a non-"text" response_format is rendered as the reference's
// "## Response Format" section. Both go on the first message, which becomes an empty system
// message when the conversation does not start with one.
// A request the reference encoder rejects is a kBadChatRequest saying why.
// Encoder choices beyond the version.
struct EncodeOptions {
  // V4 only: content given as parts renders as DeepSeek-V4-Flash-Vision-Exp's prompts do (its
  // parts joined by blank lines, a picture as one `<｜deepseek_image｜>` placeholder, in every
  // role) instead of being refused, and text that holds the placeholder is refused. Off,
  // the encoding is encoding_dsv4.py's. V4.1 always renders pictures.
  bool v4_picture_parts = false;
};

base::Result<EncodedPrompt> EncodeChat(const protocol::ChatRequest& request,
                                       EncodingVersion version, const EncodeOptions& options = {});

// DeepSeek's chat prefix completion: the last message is an assistant message to continue.
// The prompt is EncodeChat of the messages before it (ending in the reply header), then that
// message as its turn renders, without the end of sentence: in thinking mode its reasoning,
// and when it has content, `</think>` and the content. `answer_open` says whether the
// continuation starts in the answer (chat mode, or thinking closed) or still in the reasoning.
struct ContinuationPrompt {
  EncodedPrompt prompt;
  bool answer_open = true;
};
base::Result<ContinuationPrompt> EncodeChatContinuation(const protocol::ChatRequest& request,
                                                        EncodingVersion version,
                                                        const EncodeOptions& options = {});

// Whether EncodeChat renders `request` in thinking mode (the output parser must agree):
// request.thinking, enabled when absent.
bool ThinkingEnabled(const protocol::ChatRequest& request);

}  // namespace flashserve::encoding
