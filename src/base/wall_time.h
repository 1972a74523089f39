// Wall-clock time as the usage ledger and the CLI show it: Unix microseconds now, and Unix
// seconds formatted in UTC. Pure functions; any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace flashserve::base {

inline int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Unix seconds in UTC through a strftime format, e.g. "%Y-%m-%dT%H:%M:%SZ".
std::string FormatUtc(int64_t unix_seconds, const char* format);

}  // namespace flashserve::base
