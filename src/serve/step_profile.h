// Engine step time by the rows a step forwards: SPS(B) of the hardware-aware verify budget
// (speculative decoding), measured once when the loop starts on throwaway sequences (B rows as
// at most max_sequences sequences with their logits, as verify calls are): B = 1, 2, 4, ... up
// to a limit, linear between the points and along the last slope beyond them (never below the
// one-row time). Immutable after construction; any thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace flashserve::serve {

class StepProfile {
 public:
  // (rows, seconds) pairs, rows increasing (at least one).
  explicit StepProfile(std::vector<std::pair<int64_t, double>> points);
  // Times B-row steps on `engine` (best of two after a warm-up) up to max_rows.
  static StepProfile Measure(engine::Engine& engine, int64_t max_rows, int64_t max_sequences);

  double Seconds(int64_t rows) const;
  double StepsPerSecond(int64_t rows) const { return 1.0 / Seconds(rows); }
  const std::vector<std::pair<int64_t, double>>& points() const { return points_; }

 private:
  std::vector<std::pair<int64_t, double>> points_;
};

}  // namespace flashserve::serve
