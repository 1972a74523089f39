// JSON-lines trace reading and writing (protocol/trace.h).
#include "protocol/trace.h"

#include <algorithm>
#include <cmath>

#include "base/file_util.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace flashserve::protocol {
namespace {

using nlohmann::json;

base::Error BadLine(int line, std::string_view what) {
  return base::MakeError(base::ErrorCode::kInvalidArgument, fmt::format("trace line {}: {}", line, what));
}

// A number in [0, 2^53] under `key` into *out (exact as a double, and castable to int64 and to
// milliseconds); absent is an error only when `required`.
base::Status NumberField(const json& j, const char* key, bool required, int line, double* out) {
  auto it = j.find(key);
  if (it == j.end()) return required ? base::Status(BadLine(line, fmt::format("missing \"{}\"", key))) : base::Status();
  if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() <= 9007199254740992.0)) {
    return BadLine(line, fmt::format("\"{}\" must be a number from 0 to 2^53", key));
  }
  *out = it->get<double>();
  return base::Status::Ok();
}

base::Result<TraceRequest> ParseLine(std::string_view text, int line) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return BadLine(line, "not a JSON object");
  TraceRequest r;
  double ms = 0, input = 0, output = 0;
  FS_RETURN_IF_ERROR(NumberField(j, "timestamp", true, line, &ms));
  FS_RETURN_IF_ERROR(NumberField(j, "input_length", true, line, &input));
  FS_RETURN_IF_ERROR(NumberField(j, "output_length", false, line, &output));
  r.arrival_s = ms / 1000.0;
  r.input_tokens = static_cast<int64_t>(input);
  r.output_tokens = static_cast<int64_t>(output);
  auto ids = j.find("hash_ids");
  if (ids == j.end() || !ids->is_array()) return BadLine(line, "\"hash_ids\" must be an array");
  r.hash_ids.reserve(ids->size());
  for (const json& id : *ids) {
    if (!id.is_number_integer()) return BadLine(line, "\"hash_ids\" must hold integers");
    r.hash_ids.push_back(id.get<int64_t>());
  }
  auto session = j.find("session");
  if (session != j.end() && !session->is_null()) {
    if (!session->is_string()) return BadLine(line, "\"session\" must be a string");
    r.session = session->get<std::string>();
  }
  return r;
}

}  // namespace

base::Result<std::vector<TraceRequest>> ParseTrace(std::string_view jsonl) {
  std::vector<TraceRequest> out;
  int line = 0;
  size_t pos = 0;
  while (pos < jsonl.size()) {
    size_t end = jsonl.find('\n', pos);
    if (end == std::string_view::npos) end = jsonl.size();
    const std::string_view text = jsonl.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    FS_ASSIGN_OR_RETURN(TraceRequest r, ParseLine(text, line));
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.arrival_s < b.arrival_s; });
  return out;
}

base::Result<std::vector<TraceRequest>> ReadTrace(const std::string& path) {
  FS_ASSIGN_OR_RETURN(std::string text, base::ReadFileToString(path));
  auto trace = ParseTrace(text);
  if (!trace.ok()) return trace.error().WithContext(path);
  return trace;
}

std::string FormatTrace(std::span<const TraceRequest> trace) {
  std::string out;
  for (const TraceRequest& r : trace) {
    json j;
    j["timestamp"] = static_cast<int64_t>(std::llround(r.arrival_s * 1000.0));
    j["input_length"] = r.input_tokens;
    j["output_length"] = r.output_tokens;
    j["hash_ids"] = r.hash_ids;
    if (!r.session.empty()) j["session"] = r.session;
    out += j.dump();
    out += '\n';
  }
  return out;
}

base::Status WriteTrace(std::span<const TraceRequest> trace, const std::string& path) {
  return base::WriteFileAtomic(path, FormatTrace(trace));
}

}  // namespace flashserve::protocol
