// Names of finish reasons and constraint kinds (protocol/generate.h).
#include "protocol/generate.h"

namespace flashserve::protocol {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

const char* ConstraintKindName(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kNone: return "none";
    case ConstraintKind::kJsonSchema: return "json_schema";
    case ConstraintKind::kJsonObject: return "json_object";
    case ConstraintKind::kRegex: return "regex";
    case ConstraintKind::kChoice: return "choice";
    case ConstraintKind::kGrammar: return "grammar";
    case ConstraintKind::kToolCalls: return "tool_calls";
  }
  return "none";
}

}  // namespace flashserve::protocol
