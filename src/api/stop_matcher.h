// Stop strings on streamed text: emits text as soon as it can no longer be the start of a stop
// string, trims at the first stop string found. Callers: GenerationJob (one per choice). Not
// thread-safe: one instance per stream.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashserve::api {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  struct Output {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string was found: `text` ends right before it
  };

  // Appends `text`. Holds back the longest suffix that is a proper prefix of a stop string.
  // After a stop, further input is ignored.
  Output Feed(std::string_view text);
  // End of stream: releases the held-back text (empty after a stop).
  std::string Finish();

  bool stopped() const { return stopped_; }
  // The stop string that ended the text (the earliest match; "" before a stop).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace flashserve::api
