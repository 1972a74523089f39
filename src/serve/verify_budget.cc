// The verify budget's walk, confidence calibration and drafting schedule (serve/verify_budget.h).
#include "serve/verify_budget.h"

#include <algorithm>

namespace flashserve::serve {

std::vector<int> ChooseVerifyBudget(const StepProfile& profile, int64_t rows, int64_t tokens,
                                    const std::vector<std::vector<double>>& worth, double least_gain,
                                    double draft_seconds) {
  struct Candidate {
    double worth;
    size_t seq;
    int j;
  };
  std::vector<Candidate> candidates;
  for (size_t r = 0; r < worth.size(); ++r) {
    double a = 1;
    for (size_t j = 0; j < worth[r].size(); ++j) {
      a *= worth[r][j];
      candidates.push_back({a, r, static_cast<int>(j)});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
    return x.worth > y.worth || (x.worth == y.worth && (x.seq < y.seq || (x.seq == y.seq && x.j < y.j)));
  });
  std::vector<int> keep(worth.size(), 0);
  const auto rate = [&](double t, int64_t r) { return t / (1.0 / profile.StepsPerSecond(r) + draft_seconds); };
  double expected = static_cast<double>(tokens), best = rate(expected, rows);
  const double plain = expected * profile.StepsPerSecond(rows);
  for (const Candidate& c : candidates) {
    const double value = rate(expected + c.worth, rows + 1);
    if (value <= best) break;
    best = value, expected += c.worth, ++rows;
    keep[c.seq] = c.j + 1;
  }
  if (best < plain * (1 + least_gain)) keep.assign(keep.size(), 0);
  return keep;
}

double ConfidenceCalibration::Calibrated(size_t j, double raw) const {
  if (j >= accepted_.size()) return raw;
  return std::min(1.0, raw * (accepted_[j] + 1) / (predicted_[j] + 1));
}

void ConfidenceCalibration::Learn(std::span<const float> raw, int accepted) {
  constexpr double kKeep = 0.95;
  if (accepted_.size() < raw.size()) {
    accepted_.resize(raw.size(), 0.0);
    predicted_.resize(raw.size(), 0.0);
  }
  // Positions past the first rejection were not tried: no evidence about them.
  for (size_t j = 0; j < raw.size() && j <= static_cast<size_t>(accepted); ++j) {
    accepted_[j] = kKeep * accepted_[j] + (j < static_cast<size_t>(accepted) ? 1.0 : 0.0);
    predicted_[j] = kKeep * predicted_[j] + raw[j];
  }
}

int DraftSchedule::Depth(int k, uint64_t step) const {
  if (backoff_ > 0 && step % static_cast<uint64_t>(backoff_) != 0) return 0;
  return depth_ > 0 ? std::min(k, depth_) : k;
}

void DraftSchedule::Record(int offered, int kept, double draft_steps) {
  if (offered <= 0) return;  // nothing reached the budget: no evidence
  if (kept == 0) {
    int longest = kLongestBackoff;  // doubled until a probe costs at most 1/16 of the steps between
    while (draft_steps * kLongestBackoff > longest && longest < 64 * kLongestBackoff) longest *= 2;
    depth_ = 1;
    backoff_ = std::min(backoff_ == 0 ? 2 : 2 * backoff_, longest);
    return;
  }
  backoff_ = 0;
  // All kept: the next step may go one deeper than this one could (a cap outside the budget,
  // such as the block boundary, may have cut it); some cut: one past what was kept.
  depth_ = kept == offered ? std::max(depth_, kept + 1) : kept + 1;
}

}  // namespace flashserve::serve
