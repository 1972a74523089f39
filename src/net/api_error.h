// OpenAI-style API errors: the HTTP status, the `{"error": {...}}` body, and the one mapping
// from base::ErrorCode to HTTP status in the project. Callers: every api route and the HTTP
// session. Pure values and functions, any thread.
#pragma once

#include <string>

#include "net/exchange.h"
#include "base/result.h"

namespace flashserve::net {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" = null
  std::string code;   // "" = null
};

// Ready-made errors (message may be refined by the caller).
ApiError InvalidRequest(std::string message, std::string param = "", std::string code = "");
ApiError ContextLengthExceeded(std::string message);

// base::Error -> ApiError. kBadChatRequest / kInvalidArgument / kOutOfRange / kInvalidUtf8 ->
// 400, kContextOverflow -> 400 "context_length_exceeded", kNotFound -> 404,
// kResourceExhausted -> 429, kUnavailable -> 503, kTimeout -> 504, everything else -> 500.
ApiError FromError(const base::Error& error, std::string param = "");

// {"error": {"message", "type", "param", "code"}} as JSON text.
std::string ErrorBody(const ApiError& error);

// A complete response for the error (429 carries Retry-After, 405 the caller adds Allow).
HttpResponse ErrorResponse(const ApiError& error);

}  // namespace flashserve::net
