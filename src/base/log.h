// Leveled logging to stderr: FS_LOG(kInfo, "loaded {} tensors", n) with fmt-style formatting.
// Thread-safe (one write per line). The level is set once at start-up by app.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace flashserve::base {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void LogLine(LogLevel level, std::string_view message);

}  // namespace flashserve::base

#define FS_LOG(level, ...)                                                        \
  do {                                                                            \
    if (::flashserve::base::LogLevel::level >= ::flashserve::base::GetLogLevel()) \
      ::flashserve::base::LogLine(::flashserve::base::LogLevel::level,            \
                                  fmt::format(__VA_ARGS__));                      \
  } while (0)
