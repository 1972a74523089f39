// Errors as values: ErrorCode (one enum, a numeric range per room), Error, Status and
// Result<T>, plus the FS_RETURN_IF_ERROR / FS_ASSIGN_OR_RETURN propagation macros.
// Header-only; usable from any thread. No exception crosses a room boundary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "base/check.h"

namespace flashserve::base {

enum class ErrorCode : int32_t {
  kOk = 0,
  // 1-99: generic
  kInvalidArgument = 1,
  kNotFound = 2,
  kAlreadyExists = 3,
  kOutOfRange = 4,
  kFailedPrecondition = 5,
  kResourceExhausted = 6,
  kUnimplemented = 7,
  kInternal = 8,
  kIoError = 9,
  kDataLoss = 10,  // corrupt or truncated data
  kCancelled = 11,
  kTimeout = 12,
  kUnavailable = 13,
  // 100-199: model (config.json, checkpoints)
  kBadConfig = 100,
  kUnsupportedConfig = 101,
  kBadCheckpoint = 102,
  kMissingTensor = 103,
  kBadTensor = 104,
  // 200-299: tokenizer, 300-399: encoding
  kBadTokenizer = 200,
  kInvalidUtf8 = 201,
  kBadChatRequest = 300,
  kBadModelOutput = 301,  // model text that does not follow the chat format (e.g. a broken tool call)
  // 400-499: engine / state
  kBadState = 400,
  kContextOverflow = 401,
};

std::string_view ErrorCodeName(ErrorCode code);

class Error {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "kind: message", for logs and CLI output.
  std::string ToString() const;
  // Prefixes context, e.g. WithContext("loading shard 3") -> "loading shard 3: <message>".
  Error WithContext(std::string_view context) const;

 private:
  ErrorCode code_;
  std::string message_;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design
  static Status Ok() { return Status(); }
  bool ok() const { return !error_.has_value(); }
  const Error& error() const {
    FS_CHECK(error_.has_value(), "Status::error() on OK status");
    return *error_;
  }
  std::string ToString() const { return ok() ? "OK" : error_->ToString(); }

 private:
  std::optional<Error> error_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}   // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  Result(Status status) : v_(status.error()) {}  // NOLINT: only from a failed Status
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Error& error() const {
    FS_CHECK(!ok(), "Result::error() on OK result");
    return std::get<Error>(v_);
  }
  Status status() const { return ok() ? Status() : Status(error()); }
  T& value() & {
    FS_CHECK(ok(), "Result::value() on error: %s", std::get<Error>(v_).ToString().c_str());
    return std::get<T>(v_);
  }
  const T& value() const& {
    FS_CHECK(ok(), "Result::value() on error: %s", std::get<Error>(v_).ToString().c_str());
    return std::get<T>(v_);
  }
  T&& value() && {
    FS_CHECK(ok(), "Result::value() on error: %s", std::get<Error>(v_).ToString().c_str());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Error> v_;
};

inline Error MakeError(ErrorCode code, std::string message) { return Error(code, std::move(message)); }

namespace internal {
inline Status ToStatus(const Status& s) { return s; }
template <typename T>
Status ToStatus(const Result<T>& r) { return r.status(); }
}  // namespace internal

}  // namespace flashserve::base

#define FS_CONCAT_INNER(a, b) a##b
#define FS_CONCAT(a, b) FS_CONCAT_INNER(a, b)

// Returns the error of a failed Status/Result from the enclosing function.
#define FS_RETURN_IF_ERROR(expr)                                              \
  do {                                                                        \
    auto fs_status_ = ::flashserve::base::internal::ToStatus((expr));         \
    if (!fs_status_.ok()) return fs_status_.error();                          \
  } while (0)

// FS_ASSIGN_OR_RETURN(auto x, MakeX()); declares/assigns x or returns the error.
#define FS_ASSIGN_OR_RETURN(lhs, expr) \
  FS_ASSIGN_OR_RETURN_IMPL(FS_CONCAT(fs_result_, __LINE__), lhs, expr)
#define FS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.error();             \
  lhs = std::move(tmp).value()
