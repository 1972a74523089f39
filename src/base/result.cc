// Names and formatting for ErrorCode / Error (base/result.h).
#include "base/result.h"

namespace flashserve::base {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kAlreadyExists: return "already exists";
    case ErrorCode::kOutOfRange: return "out of range";
    case ErrorCode::kFailedPrecondition: return "failed precondition";
    case ErrorCode::kResourceExhausted: return "resource exhausted";
    case ErrorCode::kUnimplemented: return "not implemented";
    case ErrorCode::kInternal: return "internal error";
    case ErrorCode::kIoError: return "I/O error";
    case ErrorCode::kDataLoss: return "corrupt data";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kBadConfig: return "bad model config";
    case ErrorCode::kUnsupportedConfig: return "unsupported model config";
    case ErrorCode::kBadCheckpoint: return "bad checkpoint";
    case ErrorCode::kMissingTensor: return "missing tensor";
    case ErrorCode::kBadTensor: return "bad tensor";
    case ErrorCode::kBadTokenizer: return "bad tokenizer";
    case ErrorCode::kInvalidUtf8: return "invalid UTF-8";
    case ErrorCode::kBadChatRequest: return "bad chat request";
    case ErrorCode::kBadModelOutput: return "bad model output";
    case ErrorCode::kBadState: return "bad sequence state";
    case ErrorCode::kContextOverflow: return "context overflow";
  }
  return "unknown error";
}

std::string Error::ToString() const {
  std::string out(ErrorCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Error Error::WithContext(std::string_view context) const {
  std::string msg(context);
  msg += ": ";
  msg += message_;
  return Error(code_, std::move(msg));
}

}  // namespace flashserve::base
