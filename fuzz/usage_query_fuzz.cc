// GET /admin/usage's query string through the server's own decoding (net::HttpRequest::Query,
// percent-decoding) into meter::MakeUsageQuery: parsed or refused with a message. What parses
// holds: from < to, a valid tenant name, and a time given as a date reads back as that date.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/wall_time.h"
#include "meter/usage.h"
#include "net/exchange.h"

namespace {

void CheckTime(const std::string& text) {
  auto t = flashserve::meter::ParseUsageTime(text);
  if (!t.ok()) {
    if (t.error().message().empty()) __builtin_trap();
    return;
  }
  // A date or date-time reads back as itself: no field was normalised into another.
  const char* format = text.size() == 10 ? "%Y-%m-%d" : text.size() == 20 ? "%Y-%m-%dT%H:%M:%SZ" : nullptr;
  if (format != nullptr && text.find_first_not_of("0123456789") != std::string::npos &&
      flashserve::base::FormatUtc(*t / 1'000'000, format) != text)
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  flashserve::net::HttpRequest request;
  request.method = "GET";
  request.path = "/admin/usage";
  request.target = "/admin/usage?" + std::string(reinterpret_cast<const char*>(data), size);
  const std::string from = request.Query("from"), to = request.Query("to");
  CheckTime(from);
  CheckTime(to);
  const int64_t now_us = int64_t{1'796'600'000} * 1'000'000;
  auto q = flashserve::meter::MakeUsageQuery(from, to, request.Query("tenant"), request.Query("group_by"), now_us);
  if (!q.ok()) {
    if (q.error().message().empty()) __builtin_trap();
    return 0;
  }
  if (q->from_us >= q->to_us) __builtin_trap();
  if (q->tenant.size() > 64) __builtin_trap();
  return 0;
}
