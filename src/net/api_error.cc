// Error mapping and OpenAI-style error bodies (net/api_error.h).
#include "net/api_error.h"

#include <nlohmann/json.hpp>

namespace flashserve::net {

using base::ErrorCode;

ApiError InvalidRequest(std::string message, std::string param, std::string code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

ApiError ContextLengthExceeded(std::string message) {
  return InvalidRequest(std::move(message), "messages", "context_length_exceeded");
}

ApiError FromError(const base::Error& error, std::string param) {
  ApiError e;
  e.message = error.message();
  e.param = std::move(param);
  switch (error.code()) {
    case ErrorCode::kBadChatRequest:
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kOutOfRange:
      e.status = 400;
      break;
    case ErrorCode::kInvalidUtf8:
      e.status = 400;
      e.code = "invalid_utf8";
      break;
    case ErrorCode::kContextOverflow:
      e.status = 400;
      e.code = "context_length_exceeded";
      break;
    case ErrorCode::kNotFound:
      e.status = 404;
      e.code = "not_found";
      break;
    case ErrorCode::kResourceExhausted:
      e.status = 429;
      e.type = "rate_limit_error";
      e.code = "rate_limit_exceeded";
      break;
    case ErrorCode::kUnavailable:
      e.status = 503;
      e.type = "server_error";
      e.code = "service_unavailable";
      break;
    case ErrorCode::kTimeout:
      e.status = 504;
      e.type = "server_error";
      e.code = "timeout";
      break;
    default:
      e.status = 500;
      e.type = "server_error";
      e.code = "internal_error";
      break;
  }
  return e;
}

std::string ErrorBody(const ApiError& error) {
  using Json = nlohmann::ordered_json;
  Json inner;
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = error.param.empty() ? Json() : Json(error.param);
  inner["code"] = error.code.empty() ? Json() : Json(error.code);
  Json body;
  body["error"] = std::move(inner);
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

HttpResponse ErrorResponse(const ApiError& error) {
  HttpResponse r;
  r.status = error.status;
  r.body = ErrorBody(error);
  if (error.status == 429) r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace flashserve::net
