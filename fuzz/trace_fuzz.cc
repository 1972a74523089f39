// Request traces (JSON lines replayed by `flashserve bench --dataset trace` and the router's
// simulator): a trace that parses is written back and parses again to the same requests.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "protocol/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace protocol = flashserve::protocol;
  auto trace = protocol::ParseTrace(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!trace.ok()) return 0;
  const std::string written = protocol::FormatTrace(trace.value());
  auto again = protocol::ParseTrace(written);
  if (!again.ok() || again.value().size() != trace.value().size()) __builtin_trap();
  for (size_t i = 0; i < trace.value().size(); ++i) {
    const auto& a = trace.value()[i];
    const auto& b = again.value()[i];
    if (a.input_tokens != b.input_tokens || a.output_tokens != b.output_tokens || a.hash_ids != b.hash_ids ||
        a.session != b.session) {
      __builtin_trap();
    }
  }
  return 0;
}
