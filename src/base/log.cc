// stderr log sink with timestamps (base/log.h).
#include "base/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "base/clock.h"

namespace flashserve::base {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

char LevelChar(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 'D';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kError: return 'E';
  }
  return '?';
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

void LogLine(LogLevel level, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  std::string line = fmt::format("{} {}.{:03d} {}\n", LevelChar(level), stamp, ms, message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

bool LogThrottle::Allow(double now, int64_t* held) {
  std::lock_guard<std::mutex> lock(mu_);
  if (now < next_) {
    ++held_;
    return false;
  }
  next_ = now + interval_;
  *held = held_;
  held_ = 0;
  return true;
}

bool LogThrottle::Allow(int64_t* held) { return Allow(MonotonicSeconds(), held); }

std::string WithHeldBack(std::string message, int64_t held) {
  if (held > 0) message += fmt::format(" ({} more like it not logged since the last)", held);
  return message;
}

}  // namespace flashserve::base
