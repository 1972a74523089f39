// Mooncake-style request traces as JSON lines: the record (TraceRequest) and its codec. Used by
// router (route simulator, agent-trace generator) and loadgen (trace replay in `bench`).
// Plain data and pure functions; any thread; parsing never throws.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace flashserve::protocol {

// One line: {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...],
// "session": "optional"}. hash_ids name consecutive prompt blocks (equal id = equal content).
struct TraceRequest {
  double arrival_s = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  std::vector<int64_t> hash_ids;
  std::string session;
};

// Blank lines are skipped; an error names the line. The result is sorted by arrival (stable).
base::Result<std::vector<TraceRequest>> ParseTrace(std::string_view jsonl);
base::Result<std::vector<TraceRequest>> ReadTrace(const std::string& path);
std::string FormatTrace(std::span<const TraceRequest> trace);
base::Status WriteTrace(std::span<const TraceRequest> trace, const std::string& path);

}  // namespace flashserve::protocol
