// UTC formatting (base/wall_time.h).
#include "base/wall_time.h"

#include <ctime>

namespace flashserve::base {

std::string FormatUtc(int64_t unix_seconds, const char* format) {
  const std::time_t t = unix_seconds;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, format, &tm);
  return std::string(buf, n);
}

}  // namespace flashserve::base
