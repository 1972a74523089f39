// The error vocabulary (net/api_error.h): every named error and every base::ErrorCode mapping
// with its status, type, code and headers; the OpenAI body shape.
#include "net/api_error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace flashserve::net {
namespace {

using base::ErrorCode;
using Json = nlohmann::ordered_json;

std::string Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

TEST(ApiErrorTest, EveryErrorCarriesItsStatusTypeAndCode) {
  struct Case {
    ApiError error;
    int status;
    const char* type;
    const char* code;
  };
  auto from = [](ErrorCode code) { return FromError(base::Error(code, "m")); };
  const Case cases[] = {
      {InvalidRequest("m", "temperature"), 400, "invalid_request_error", ""},
      {ContextLengthExceeded("m"), 400, "invalid_request_error", "context_length_exceeded"},
      {NotFound("m", "model", "model_not_found"), 404, "invalid_request_error", "model_not_found"},
      {MethodNotAllowed("m", "GET"), 405, "invalid_request_error", "method_not_allowed"},
      {TooLarge("m"), 413, "invalid_request_error", "request_too_large"},
      {TooLarge("m", 431), 431, "invalid_request_error", ""},
      {RateLimited("m", 7), 429, "rate_limit_error", "rate_limit_exceeded"},
      {Internal("m"), 500, "server_error", "internal_error"},
      {NotImplemented("m"), 501, "invalid_request_error", "not_implemented"},
      {Upstream("m"), 502, "upstream_error", ""},
      {Unavailable("m", 3, "cancelled"), 503, "server_error", "cancelled"},
      {Timeout("m"), 504, "server_error", "timeout"},
      {from(ErrorCode::kBadChatRequest), 400, "invalid_request_error", ""},
      {from(ErrorCode::kInvalidArgument), 400, "invalid_request_error", ""},
      {from(ErrorCode::kOutOfRange), 400, "invalid_request_error", ""},
      {from(ErrorCode::kInvalidUtf8), 400, "invalid_request_error", "invalid_utf8"},
      {from(ErrorCode::kContextOverflow), 400, "invalid_request_error", "context_length_exceeded"},
      {from(ErrorCode::kNotFound), 404, "invalid_request_error", "not_found"},
      {from(ErrorCode::kResourceExhausted), 429, "rate_limit_error", "rate_limit_exceeded"},
      {from(ErrorCode::kUnavailable), 503, "server_error", "service_unavailable"},
      {from(ErrorCode::kTimeout), 504, "server_error", "timeout"},
      {from(ErrorCode::kInternal), 500, "server_error", "internal_error"},
      {from(ErrorCode::kBadTokenizer), 500, "server_error", "internal_error"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.error.status, c.status) << c.error.message;
    EXPECT_EQ(c.error.type, c.type) << c.status;
    EXPECT_EQ(c.error.code, c.code) << c.status;
    EXPECT_EQ(c.error.message, "m");
    EXPECT_EQ(ErrorResponse(c.error).status, c.status);
  }
  EXPECT_EQ(Unauthorized().status, 401);
  EXPECT_EQ(Unauthorized().type, "authentication_error");
  EXPECT_EQ(Unauthorized().code, "invalid_api_key");
  EXPECT_NE(Unauthorized().message.find("Bearer"), std::string::npos);  // says how to send a key
  EXPECT_EQ(FromError(base::Error(ErrorCode::kNotFound, "x"), "model").param, "model");
}

TEST(ApiErrorTest, ResponsesCarryRetryAfterAndAllow) {
  EXPECT_EQ(Header(ErrorResponse(RateLimited("m", 7)), "Retry-After"), "7");
  EXPECT_EQ(Header(ErrorResponse(RateLimited("m", 0)), "Retry-After"), "1");  // never below one second
  EXPECT_EQ(Header(ErrorResponse(FromError(base::Error(ErrorCode::kResourceExhausted, "full"))), "Retry-After"), "1");
  EXPECT_EQ(Header(ErrorResponse(Unavailable("m", 3)), "Retry-After"), "3");
  EXPECT_EQ(Header(ErrorResponse(Unavailable("m")), "Retry-After"), "");
  EXPECT_EQ(Header(ErrorResponse(MethodNotAllowed("m", "GET, POST")), "Allow"), "GET, POST");
  EXPECT_TRUE(ErrorResponse(InvalidRequest("x")).headers.empty());
}

TEST(ApiErrorTest, BodyHasTheOpenAiShapeWithNulls) {
  Json body = Json::parse(ErrorBody(InvalidRequest("bad temperature", "temperature")));
  EXPECT_EQ(body["error"]["message"], "bad temperature");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "temperature");
  EXPECT_TRUE(body["error"]["code"].is_null());
  EXPECT_TRUE(Json::parse(ErrorBody(Upstream("x")))["error"]["param"].is_null());
}

TEST(ApiErrorTest, AnthropicPathsGetAnthropicsShapeAndOverloadIs529) {
  for (const char* path : {"/v1/messages", "/v1/messages/count_tokens", "/anthropic", "/anthropic/v1/messages?beta=true"})
    EXPECT_EQ(DialectForPath(path), ErrorDialect::kAnthropic) << path;
  for (const char* path : {"/v1/chat/completions", "/v1/messagesX", "/anthropicish", "/", ""})
    EXPECT_EQ(DialectForPath(path), ErrorDialect::kOpenAI) << path;
  const HttpResponse anthropic = ErrorResponse(Unavailable("busy", 3), ErrorDialect::kAnthropic);
  EXPECT_EQ(anthropic.status, kAnthropicOverloaded);
  EXPECT_EQ(Json::parse(anthropic.body)["error"]["type"], "overloaded_error");
  EXPECT_EQ(Header(anthropic, "Retry-After"), "3");
  EXPECT_EQ(ErrorResponse(Unavailable("busy", 3)).status, 503);  // OpenAI's clients keep 503
  EXPECT_EQ(ErrorResponse(RateLimited("slow down", 1), ErrorDialect::kAnthropic).status, 429);
}

}  // namespace
}  // namespace flashserve::net
