// Bytes on the wire: HTTP/1.1 response heads, chunked transfer framing and Server-Sent Events
// frames. Callers: the HTTP session (heads, chunks) and GenerationJob (SSE). Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "net/exchange.h"

namespace flashserve::net {

// "OK", "Bad Request", ... ("Unknown" for codes not in the table).
const char* StatusReason(int status);

// Status line and headers up to the blank line. content_length < 0 means
// "Transfer-Encoding: chunked".
std::string ResponseHead(int status, std::string_view content_type, int64_t content_length, bool keep_alive,
                         const HeaderList& extra_headers);

// One HTTP/1.1 chunk ("<hex size>\r\n<data>\r\n"); empty data gives nothing (the zero-size
// chunk would end the body). LastChunk() is the terminator "0\r\n\r\n".
std::string Chunk(std::string_view data);
std::string LastChunk();

// "data: <payload>\n\n" (payload must not contain a newline; JSON text never does) and the
// Chat Completions terminator "data: [DONE]\n\n".
std::string SseData(std::string_view payload);
std::string SseDone();
// "event: NAME\ndata: PAYLOAD\n\n" (the dialects whose events are named: Messages, Responses).
std::string SseEvent(std::string_view name, std::string_view payload);

}  // namespace flashserve::net
