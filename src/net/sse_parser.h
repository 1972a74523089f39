// Incremental Server-Sent Events parser: body bytes in (split anywhere), complete `data`
// payloads out. Used by the benchmark client and the router for streamed responses. One
// instance per stream; not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashserve::net {

// Follows the WHATWG event-stream rules that matter to a client: lines end in CRLF, LF or CR
// (a CRLF split across two Feed calls is one line end); `data:` lines of one event are joined
// with "\n"; one space after the colon is dropped; comments (":...") and other fields (event,
// id, retry) are ignored; a blank line dispatches the event.
class SseParser {
 public:
  // Appends, in order, the data payload of every event that `bytes` completes.
  void Feed(std::string_view bytes, std::vector<std::string>* events);
  // True when an event has data but no terminating blank line yet (a stream cut mid-event).
  bool HasPartialEvent() const { return has_data_ || !line_.empty(); }

 private:
  void EndLine(std::vector<std::string>* events);

  std::string line_;        // the current, unfinished line
  std::string data_;        // data lines of the current event, each followed by "\n"
  bool has_data_ = false;
  bool after_cr_ = false;   // the last byte was CR: an LF right after it ends nothing new
};

}  // namespace flashserve::net
