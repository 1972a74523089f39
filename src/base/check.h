// Invariant checks that stay on in release builds: FS_CHECK(cond, printf-format, args...)
// aborts with file:line and the message. FS_DCHECK compiles out unless FLASHSERVE_DEBUG.
#pragma once

namespace flashserve::base {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
}  // namespace flashserve::base

#define FS_CHECK(cond, ...)                                                          \
  do {                                                                               \
    if (__builtin_expect(!(cond), 0))                                                \
      ::flashserve::base::CheckFailed(__FILE__, __LINE__, #cond, "" __VA_ARGS__);   \
  } while (0)

#ifdef FLASHSERVE_DEBUG
#define FS_DCHECK(cond, ...) FS_CHECK(cond, __VA_ARGS__)
#else
#define FS_DCHECK(cond, ...) \
  do {                       \
  } while (0)
#endif
