// The adaptive verify budget of speculative decoding, used by EngineLoop (speculation.cc):
// DSpark's prefix scheduler (Algorithm 1) as a pure function (any thread), the calibration of a
// drafter's confidences, and each sequence's drafting schedule (both: their owner's thread).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "serve/step_profile.h"

namespace flashserve::serve {

// worth[r][j]: the probability draft j of sequence r survives given drafts 0..j-1 did (its
// confidence). rows: the step's rows without drafts; tokens: the tokens those rows emit.
// Returns how many leading drafts of each sequence to verify. Every draft j of r is a candidate
// worth a_rj = worth[r][0] * ... * worth[r][j] expected tokens; taken best first (ties: lower r,
// then lower j), each adds a row, and the first that does not raise tokens x steps/s(rows) ends
// the walk (the early stop keeps the choice blind to the tokens being verified). Where the walk
// ends less than least_gain above the steps' tokens/s without drafts, nothing is verified.
// draft_seconds: what making the drafts took; the walk's steps include it, the plain steps do
// not, so a drafter that costs more than its drafts save is kept from nothing (and DraftSchedule
// then backs it off).
std::vector<int> ChooseVerifyBudget(const StepProfile& profile, int64_t rows, int64_t tokens,
                                    const std::vector<std::vector<double>>& worth, double least_gain,
                                    double draft_seconds = 0);

// A drafter's confidences scaled to what verification finds (a post-hoc calibration, by draft
// position): the scale of position j is the accepted drafts over the summed confidences of the
// drafts verified there, both decaying (a half-life of about 14 verifies), with one pseudo-draft
// at scale 1. A drafter sure of drafts that are never accepted is soon worth nothing to the budget.
class ConfidenceCalibration {
 public:
  double Calibrated(size_t j, double raw) const;
  // One verify: the confidences of its drafts (in order) and how many were accepted.
  void Learn(std::span<const float> raw, int accepted);

 private:
  std::vector<double> accepted_, predicted_;
};

// Drafting costs a forward per depth before the budget picks, so a sequence drafts only as deep
// as the budget kept last time plus one; where the budget kept none, it drafts again only on
// steps that are multiples of a back-off (2, 4, ... 16 steps, longer where a drafting call costs
// more than a plain step: probes then cost at most about a sixteenth), one draft deep. The back-off runs
// on the loop's step count, so waiting sequences probe together (a lone probe's gain at a large
// batch is too small for the budget to take). One per sequence; its owner's thread.
class DraftSchedule {
 public:
  static constexpr int kLongestBackoff = 16;

  // Drafts to make at loop step `step` of at most k.
  int Depth(int k, uint64_t step) const;
  // What the budget did with `offered` drafts (after cuts made before it): kept the first `kept`.
  // draft_steps: the drafting call's time in plain steps of its batch (0: unknown or free).
  void Record(int offered, int kept, double draft_steps = 0);

  int backoff() const { return backoff_; }

 private:
  int depth_ = 0;    // 0: no record (up to k)
  int backoff_ = 0;  // 0: draft every step
};

}  // namespace flashserve::serve
