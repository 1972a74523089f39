// Step time by rows (serve/step_profile.h).
#include "serve/step_profile.h"

#include <algorithm>
#include <chrono>

#include "base/check.h"

namespace flashserve::serve {

StepProfile::StepProfile(std::vector<std::pair<int64_t, double>> points) : points_(std::move(points)) {
  FS_CHECK(!points_.empty(), "a step profile needs a point");
}

StepProfile StepProfile::Measure(engine::Engine& engine, int64_t max_rows, int64_t max_sequences) {
  std::vector<std::pair<int64_t, double>> points;
  const int64_t vocab = engine.model().config().vocab_size;
  max_sequences = std::max<int64_t>(1, max_sequences);
  for (int64_t rows = 1;; rows = std::min(rows * 2, max_rows)) {
    // B rows as at most max_sequences sequences of about B / sequences rows each (verify shapes).
    const int64_t seqs = std::min(rows, max_sequences);
    std::vector<std::unique_ptr<engine::SequenceState>> states;
    std::vector<std::vector<int32_t>> tokens;
    for (int64_t i = 0; i < seqs; ++i) {
      states.push_back(engine.NewSequence(false));
      const int64_t n = rows / seqs + (i < rows % seqs ? 1 : 0);
      tokens.emplace_back();
      for (int64_t t = 0; t < n; ++t) tokens.back().push_back(static_cast<int32_t>(2 + ((i * 131 + t) * 7919) % (vocab - 2)));
    }
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {  // the first is context (and a warm-up)
      std::vector<engine::ForwardRequest> batch;
      for (int64_t i = 0; i < seqs; ++i)
        batch.push_back({states[static_cast<size_t>(i)].get(), tokens[static_cast<size_t>(i)], engine::LogitsMode::kAll});
      const auto t0 = std::chrono::steady_clock::now();
      auto result = engine.Forward(batch);
      FS_CHECK(result.ok(), "step profile: forward failed");
      engine.Recycle(std::move(*result));  // as the loop's steps do
      if (rep > 0) best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    points.emplace_back(rows, best);
    if (rows >= max_rows) break;
  }
  return StepProfile(std::move(points));
}

double StepProfile::Seconds(int64_t rows) const {
  if (points_.size() == 1 || rows <= points_.front().first) return points_.front().second;
  size_t i = 1;
  while (i + 1 < points_.size() && points_[i].first < rows) ++i;
  const auto [r0, t0] = points_[i - 1];
  const auto [r1, t1] = points_[i];
  const double t = t0 + (t1 - t0) * static_cast<double>(rows - r0) / static_cast<double>(r1 - r0);
  return std::max(t, points_.front().second);  // a falling last slope never reaches zero
}

}  // namespace flashserve::serve
