// Presentation of a benchmark run: a readable table and a JSON document holding every number
// of the BenchReport plus the run parameters (and optionally each request). Called by app.
// Pure functions; any thread.
#pragma once

#include <string>
#include <vector>

#include "loadgen/dataset.h"
#include "loadgen/metrics.h"
#include "loadgen/runner.h"

namespace flashserve::loadgen {

// What the report says about how the run was made.
struct RunInfo {
  const BenchConfig* config = nullptr;
  const DatasetConfig* dataset = nullptr;
  std::string model;
  std::string tokenizer;  // path, or empty when lengths are word counts
  int64_t num_connections = 0;
  int64_t num_jobs = 0;     // trace: requests replayed (after --num-requests)
  int64_t num_clipped = 0;  // trace: prompts cut to max_input_len
  VisionUsage vision;       // image workloads: the server's tower time over the run
};

std::string FormatTable(const BenchReport& report, const RunInfo& info);

// Pretty-printed JSON: {"params": {...}, "results": {...}} and, when `requests` is given, a
// "requests" array with every record (times in milliseconds).
std::string ReportJson(const BenchReport& report, const RunInfo& info, const std::vector<RequestRecord>* requests);

}  // namespace flashserve::loadgen
