// The dialect writers (api/dialect_writer.h): Chat Completions, Completions, Anthropic Messages
// and OpenAI Responses, each a factory over what every writer needs. Created by the routes; a
// writer runs on its exchange's strand.
#pragma once

#include <memory>
#include <string>

#include "api/dialect_writer.h"
#include "api/response_json.h"
#include "dialect/reasoning_seal.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::api {

struct WriterContext {
  std::shared_ptr<net::Exchange> exchange;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  IdSource* ids = nullptr;
  ResponseMeta meta;
  bool stream = false;
  bool include_usage = false;  // Chat Completions / Completions: stream_options.include_usage
  bool logprobs = false;
  bool thinking = false;       // the prompt opened a thinking block
  int64_t prompt_tokens = 0;   // reported before the usage arrives (Messages' message_start)
  net::HeaderList headers;     // extra response headers (x-flashserve-dropped-tools)
};

std::unique_ptr<DialectWriter> MakeChatWriter(WriterContext ctx);
std::unique_ptr<DialectWriter> MakeCompletionWriter(WriterContext ctx);

struct MessagesWriterOptions {
  bool omit_thinking = false;            // thinking.display "omitted": empty text, signature only
  const dialect::ReasoningSeal* seal = nullptr;   // signs thinking blocks
};
std::unique_ptr<DialectWriter> MakeMessagesWriter(WriterContext ctx, MessagesWriterOptions options);

struct ResponsesWriterOptions {
  nlohmann::ordered_json echo;           // the request settings the response object repeats
  bool summary = false;                  // reasoning.summary: the reasoning text as summary
  bool encrypted_reasoning = false;      // include reasoning.encrypted_content
  const dialect::ReasoningSeal* seal = nullptr;
};
std::unique_ptr<DialectWriter> MakeResponsesWriter(WriterContext ctx, ResponsesWriterOptions options);

}  // namespace flashserve::api
