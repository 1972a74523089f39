// Server-Sent Events line and event assembly (see sse_parser.h).
#include "net/sse_parser.h"

namespace flashserve::net {

void SseParser::Feed(std::string_view bytes, std::vector<std::string>* events) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (after_cr_) {
      after_cr_ = false;
      if (bytes[pos] == '\n') {
        ++pos;
        continue;
      }
    }
    size_t end = bytes.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(pos));
      return;
    }
    line_.append(bytes.substr(pos, end - pos));
    after_cr_ = bytes[end] == '\r';
    pos = end + 1;
    EndLine(events);
  }
}

void SseParser::EndLine(std::vector<std::string>* events) {
  std::string_view line = line_;
  if (line.empty()) {
    if (has_data_) {
      data_.pop_back();  // the "\n" after the last data line
      events->push_back(std::move(data_));
      data_.clear();
      has_data_ = false;
    }
  } else if (line.front() != ':') {
    size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field == "data") {
      data_.append(value);
      data_.push_back('\n');
      has_data_ = true;
    }
  }
  line_.clear();
}

}  // namespace flashserve::net
