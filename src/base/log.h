// Leveled logging to stderr: FS_LOG(kInfo, "loaded {} tensors", n) with fmt-style formatting,
// and FS_LOG_THROTTLED / FS_LOG_VIA for problems that repeat (LogThrottle). Thread-safe (one
// write per line; a LogThrottle locks). The level is set once at start-up by app.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace flashserve::base {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void LogLine(LogLevel level, std::string_view message);

// Lets one line through per interval and counts the rest: for problems that can repeat by the
// thousand (a failing disk, a flaky network file system), so that the log shows the first one,
// then at most one line per interval saying how many were held back.
class LogThrottle {
 public:
  explicit LogThrottle(double interval_seconds) : interval_(interval_seconds) {}
  // True where a line may be written at monotonic time now (seconds); *held = the lines held
  // back since the last one let through.
  bool Allow(double now, int64_t* held);
  bool Allow(int64_t* held);  // now = MonotonicSeconds()

 private:
  std::mutex mu_;
  const double interval_;
  double next_ = -1e300;
  int64_t held_ = 0;
};

// The message with a note of how many lines like it were held back, where any were.
std::string WithHeldBack(std::string message, int64_t held);

}  // namespace flashserve::base

// FS_LOG through a LogThrottle the caller owns (one per tier, per connection kind, ...).
#define FS_LOG_VIA(throttle, level, ...)                                                       \
  do {                                                                                         \
    int64_t fs_log_held_ = 0;                                                                  \
    if (::flashserve::base::LogLevel::level >= ::flashserve::base::GetLogLevel() &&            \
        (throttle).Allow(&fs_log_held_))                                                       \
      ::flashserve::base::LogLine(::flashserve::base::LogLevel::level,                         \
                                  ::flashserve::base::WithHeldBack(fmt::format(__VA_ARGS__),   \
                                                                   fs_log_held_));             \
  } while (0)

// FS_LOG, at most once per `seconds` from this line of code (process-wide; `seconds` is read
// once, when the line first runs).
#define FS_LOG_THROTTLED(seconds, level, ...)                            \
  do {                                                                   \
    static ::flashserve::base::LogThrottle fs_log_throttle_(seconds);    \
    FS_LOG_VIA(fs_log_throttle_, level, __VA_ARGS__);                    \
  } while (0)

#define FS_LOG(level, ...)                                                        \
  do {                                                                            \
    if (::flashserve::base::LogLevel::level >= ::flashserve::base::GetLogLevel()) \
      ::flashserve::base::LogLine(::flashserve::base::LogLevel::level,            \
                                  fmt::format(__VA_ARGS__));                      \
  } while (0)
