// Time sources behind one seam: Clock is injected wherever time matters (TTL, metrics), so
// tests use a fake. MonotonicSeconds() is for measuring durations only.
#pragma once

#include <chrono>
#include <cstdint>

namespace flashserve::base {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time as Unix seconds (TTL expiry, logs).
  virtual int64_t NowUnixSeconds() const = 0;
  // Monotonic nanoseconds (durations).
  virtual int64_t NowNanos() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowUnixSeconds() const override;
  int64_t NowNanos() const override;
};

inline double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace flashserve::base
