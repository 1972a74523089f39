// Stop strings on streamed text (api/stop_matcher.h).
#include "api/stop_matcher.h"

#include <algorithm>

namespace flashserve::api {

StopMatcher::Output StopMatcher::Feed(std::string_view text) {
  Output out;
  if (stopped_) return out;
  pending_.append(text);
  if (stops_.empty()) {
    out.text.swap(pending_);
    return out;
  }
  size_t first = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t at = pending_.find(s);
    if (at != std::string::npos && (first == std::string::npos || at < first)) {
      first = at;
      matched_ = s;
    }
  }
  if (first != std::string::npos) {
    out.text = pending_.substr(0, first);
    out.stopped = stopped_ = true;
    pending_.clear();
    return out;
  }
  // Longest suffix of pending_ that is a proper prefix of some stop string. A suffix that
  // matches the start of a (valid UTF-8) stop string begins on a character boundary.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  out.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::Finish() {
  std::string rest;
  if (!stopped_) rest.swap(pending_);
  pending_.clear();
  return rest;
}

}  // namespace flashserve::api
