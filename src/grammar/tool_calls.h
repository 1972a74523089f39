// Tool calls as a grammar: the DSML block DeepSeek models write, with the calls a request
// forces (tool_choice required or named, one call when parallel calls are off), the arguments
// of strict tools held to their JSON schemas, and those of forced calls wherever their schemas
// can be enforced (a parameter whose schema cannot be takes any value). The spec is JSON (the constraint's
// text), built by api from the request's tools:
//   {"mode": "required" | "auto", "parallel": bool, "dsml": "｜DSML｜",
//    "tags": {"block": "tool_calls", "invoke": "invoke", "parameter": "parameter"},
//    "tools": [{"name": "...", "strict": bool, "parameters": {JSON schema}}]}
// "required": the answer is one block (no text before it); "auto": text without DSML markup,
// then at most one block. Pure functions; any thread.
#pragma once

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "grammar/ir.h"

namespace flashserve::grammar {

base::Result<Grammar> ToolCallGrammar(const nlohmann::ordered_json& spec);

}  // namespace flashserve::grammar
