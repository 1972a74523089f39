// Implementation of the always-on invariant check (base/check.h).
#include "base/check.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace flashserve::base {

void CheckFailed(const char* file, int line, const char* cond, const char* fmt, ...) {
  std::fprintf(stderr, "FATAL %s:%d: check failed: %s", file, line, cond);
  if (fmt != nullptr && fmt[0] != '\0') {
    std::fputs(": ", stderr);
    va_list args;
    va_start(args, fmt);
    std::vfprintf(stderr, fmt, args);
    va_end(args);
  }
  std::fputc('\n', stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace flashserve::base
