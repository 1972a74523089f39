// Error mapping and OpenAI-style error bodies (net/api_error.h).
#include "net/api_error.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace flashserve::net {

using base::ErrorCode;

namespace {
ApiError Make(int status, std::string message, std::string type, std::string code) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}
}  // namespace

ApiError InvalidRequest(std::string message, std::string param, std::string code) {
  ApiError e = Make(400, std::move(message), "invalid_request_error", std::move(code));
  e.param = std::move(param);
  return e;
}

ApiError ContextLengthExceeded(std::string message) {
  return InvalidRequest(std::move(message), "messages", "context_length_exceeded");
}

ApiError Unauthorized(std::string message) {
  if (message.empty()) message = "Incorrect or missing API key: send \"Authorization: Bearer <key>\"";
  return Make(401, std::move(message), "authentication_error", "invalid_api_key");
}

ApiError NotFound(std::string message, std::string param, std::string code) {
  ApiError e = Make(404, std::move(message), "invalid_request_error", std::move(code));
  e.param = std::move(param);
  return e;
}

ApiError TooLarge(std::string message, int status) {
  return Make(status, std::move(message), "invalid_request_error", status == 413 ? "request_too_large" : "");
}

ApiError MethodNotAllowed(std::string message, std::string allow) {
  ApiError e = Make(405, std::move(message), "invalid_request_error", "method_not_allowed");
  e.allow = std::move(allow);
  return e;
}

ApiError RateLimited(std::string message, int retry_after_s) {
  ApiError e = Make(429, std::move(message), "rate_limit_error", "rate_limit_exceeded");
  e.retry_after_s = std::max(1, retry_after_s);
  return e;
}

ApiError Forbidden(std::string message) { return Make(403, std::move(message), "permission_error", "forbidden"); }

ApiError Internal(std::string message) { return Make(500, std::move(message), "server_error", "internal_error"); }

ApiError NotImplemented(std::string message) {
  return Make(501, std::move(message), "invalid_request_error", "not_implemented");
}

ApiError Upstream(std::string message) { return Make(502, std::move(message), "upstream_error", ""); }

ApiError Unavailable(std::string message, int retry_after_s, std::string code) {
  ApiError e = Make(503, std::move(message), "server_error", std::move(code));
  e.retry_after_s = retry_after_s;
  return e;
}

ApiError Timeout(std::string message) { return Make(504, std::move(message), "server_error", "timeout"); }

namespace {
ApiError ForCode(const base::Error& error) {
  switch (error.code()) {
    case ErrorCode::kBadChatRequest:
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kOutOfRange:
      return InvalidRequest(error.message());
    case ErrorCode::kInvalidUtf8:
      return InvalidRequest(error.message(), "", "invalid_utf8");
    case ErrorCode::kContextOverflow:
      return InvalidRequest(error.message(), "", "context_length_exceeded");
    case ErrorCode::kNotFound:
      return NotFound(error.message());
    case ErrorCode::kResourceExhausted:
      return RateLimited(error.message());
    case ErrorCode::kUnavailable:
      return Unavailable(error.message());
    case ErrorCode::kTimeout:
      return Timeout(error.message());
    default:
      return Internal(error.message());
  }
}
}  // namespace

ApiError FromError(const base::Error& error, std::string param) {
  ApiError e = ForCode(error);
  e.param = std::move(param);
  return e;
}

namespace {

const char* AnthropicType(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    case 504: return "timeout_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

std::string AnthropicBody(const ApiError& error) {
  using Json = nlohmann::ordered_json;
  Json inner;
  inner["type"] = AnthropicType(error.status);
  const bool named = !error.param.empty() && error.message.rfind(error.param, 0) != 0;
  inner["message"] = named ? error.param + ": " + error.message : error.message;
  Json body;
  body["type"] = "error";
  body["error"] = std::move(inner);
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

ErrorDialect DialectForPath(std::string_view path) {
  const std::string_view target = path.substr(0, path.find('?'));
  for (std::string_view prefix : {std::string_view("/v1/messages"), std::string_view("/anthropic")}) {
    if (target.starts_with(prefix) && (target.size() == prefix.size() || target[prefix.size()] == '/')) {
      return ErrorDialect::kAnthropic;
    }
  }
  return ErrorDialect::kOpenAI;
}

std::string ErrorBody(const ApiError& error, ErrorDialect dialect) {
  using Json = nlohmann::ordered_json;
  if (dialect == ErrorDialect::kAnthropic) return AnthropicBody(error);
  Json inner;
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = error.param.empty() ? Json() : Json(error.param);
  inner["code"] = error.code.empty() ? Json() : Json(error.code);
  Json body;
  body["error"] = std::move(inner);
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

HttpResponse ErrorResponse(const ApiError& error, ErrorDialect dialect) {
  HttpResponse r;
  // Anthropic answers overload with 529 (its clients back off and retry on it).
  r.status = dialect == ErrorDialect::kAnthropic && error.status == 503 ? kAnthropicOverloaded : error.status;
  r.body = ErrorBody(error, dialect);
  if (error.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s));
  if (!error.allow.empty()) r.headers.emplace_back("Allow", error.allow);
  return r;
}

}  // namespace flashserve::net
