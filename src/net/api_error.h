// OpenAI-style API errors: the HTTP status, the `{"error": {...}}` body, and the one mapping
// from base::ErrorCode to HTTP status in the project. Callers: every api route and the HTTP
// session. Pure values and functions, any thread.
#pragma once

#include <string>
#include <string_view>

#include "net/exchange.h"
#include "base/result.h"

namespace flashserve::net {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" = null
  std::string code;   // "" = null
  int retry_after_s = 0;  // > 0: a Retry-After header (429 and 503)
  std::string allow;      // 405: the Allow header
};

// The errors by status, each with its OpenAI type and code; callers pick one, never rewrite a
// status. 400 invalid_request_error (code as given):
ApiError InvalidRequest(std::string message, std::string param = "", std::string code = "");
// 400 context_length_exceeded, param "messages".
ApiError ContextLengthExceeded(std::string message);
// 401 authentication_error / invalid_api_key (the default message says how to send a key).
ApiError Unauthorized(std::string message = "");
// 403 permission_error / forbidden: a valid request this caller may not make.
ApiError Forbidden(std::string message);
// 404 invalid_request_error (code "not_found" unless given: "model_not_found", "unknown_url").
ApiError NotFound(std::string message, std::string param = "", std::string code = "not_found");
// 413 request_too_large / 431: a request the HTTP layer refuses before any route sees it.
ApiError TooLarge(std::string message, int status = 413);
// 405 invalid_request_error / method_not_allowed, with the Allow header.
ApiError MethodNotAllowed(std::string message, std::string allow);
// 429 rate_limit_error / rate_limit_exceeded, Retry-After (at least 1 s).
ApiError RateLimited(std::string message, int retry_after_s = 1);
// 500 server_error / internal_error.
ApiError Internal(std::string message);
// 501 invalid_request_error / not_implemented.
ApiError NotImplemented(std::string message);
// 502 upstream_error (a worker behind the router failed).
ApiError Upstream(std::string message);
// 503 server_error (code "service_unavailable" unless given, e.g. "cancelled"), Retry-After
// when retry_after_s > 0.
ApiError Unavailable(std::string message, int retry_after_s = 0, std::string code = "service_unavailable");
// 504 server_error / timeout.
ApiError Timeout(std::string message);

// base::Error -> ApiError. kBadChatRequest / kInvalidArgument / kOutOfRange / kInvalidUtf8 ->
// 400, kContextOverflow -> 400 "context_length_exceeded", kNotFound -> 404,
// kResourceExhausted -> 429, kUnavailable -> 503, kTimeout -> 504, everything else -> 500.
ApiError FromError(const base::Error& error, std::string param = "");

// The error body shapes: OpenAI's (Chat Completions, Completions, Responses) and Anthropic's
// (Messages).
enum class ErrorDialect { kOpenAI, kAnthropic };

// The error shape a path's clients parse, for errors raised before any route sees the request
// (413, 431, bad HTTP, unknown URL): Anthropic's under /v1/messages and /anthropic, else OpenAI's.
ErrorDialect DialectForPath(std::string_view path);

// The status Anthropic's API gives `overloaded_error`; a 503 in Anthropic's shape goes out as it.
inline constexpr int kAnthropicOverloaded = 529;

// OpenAI: {"error": {"message", "type", "param", "code"}}. Anthropic: {"type": "error",
// "error": {"type", "message"}} with Anthropic's type for the status (invalid_request_error,
// authentication_error, permission_error, not_found_error, request_too_large,
// rate_limit_error, api_error, overloaded_error, timeout_error); the param, when there is one,
// leads the message. JSON text.
std::string ErrorBody(const ApiError& error, ErrorDialect dialect = ErrorDialect::kOpenAI);

// A complete response for the error (with its Retry-After and Allow headers).
HttpResponse ErrorResponse(const ApiError& error, ErrorDialect dialect = ErrorDialect::kOpenAI);

}  // namespace flashserve::net
