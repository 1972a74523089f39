// Speculative decoding in the engine loop (serve/engine_loop.h): greedy drafts (the MTP block or
// DSpark's stages) for decode
// items, verified in the step's forward, then accepted row by row. Every row is sampled exactly
// as plain decoding samples that position (same processed distribution, same (seed, position)
// draw, the grammar and history advanced by the tokens before it), and a draft is kept only
// when it equals that sample: the emitted tokens are plain decoding's, and a greedy draft is
// accepted with probability p(draft), as the lossless rule asks of a one-hot draft.
// Engine thread.
#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "serve/engine_loop.h"
#include "serve/verify_budget.h"

namespace flashserve::serve {

// Drafts worth verifying for a decode item: none where the step must see the state exactly at
// the item's end (a persist point, a restore, forks to make) or where the state cannot draft;
// never more than the tokens the choice may still emit or the context holds, nor a verify call
// longer than the window (the longest call a rollback takes).
int EngineLoop::DraftBudget(const LiveSequence& s, const sched::StepItem& item) const {
  if (!item.sample || item.persist || item.restore || item.end - item.begin != 1) return 0;
  if (s.index == 0 && s.request->forks_pending > 0) return 0;
  if (!s.state) return 0;
  if (!config_.speculative.external && !engine_.CanDraft(*s.state)) return 0;
  // The state never passes the next block boundary in one step, so a choice whose accepted
  // run ends there is persisted there as plain decoding would (AcceptDrafts).
  const int64_t block = kv::kBlockTokens, boundary = (item.end / block + 1) * block;
  const int64_t left = std::min({s.request->req.max_tokens - s.generated,
                                 config_.max_context - static_cast<int64_t>(s.tokens.size()), boundary - item.end + 1});
  const int64_t most = std::min<int64_t>(config_.speculative.num_draft_tokens,
                                         config_.speculative.external ? model_.config().sliding_window - 1
                                                                      : engine_.MostDrafts());
  return static_cast<int>(std::clamp<int64_t>(left - 1, 0, most));
}

base::Result<std::vector<std::vector<int32_t>>> EngineLoop::ExternalDrafts(std::span<const sched::StepItem> items,
                                                                           std::span<const engine::DraftRequest> drafts,
                                                                           std::span<const size_t> owner) const {
  std::vector<std::vector<int32_t>> made;
  for (size_t d = 0; d < drafts.size(); ++d) {
    const sched::Sequence& s = *items[owner[d]].seq;
    made.push_back(config_.speculative.external(s.tokens, drafts[d].num_drafts));
    if (made.back().size() > static_cast<size_t>(drafts[d].num_drafts)) made.back().resize(static_cast<size_t>(drafts[d].num_drafts));
    for (int32_t t : made.back())
      if (t < 0 || t >= model_.config().vocab_size)
        return base::Error(base::ErrorCode::kInvalidArgument, "an external draft is outside the vocabulary");
  }
  return made;
}

void EngineLoop::Draft(std::span<const sched::StepItem> items, std::span<engine::ForwardRequest> batch,
                       std::span<Verify> verify) {
  std::vector<engine::DraftRequest> drafts;
  std::vector<size_t> owner;
  int64_t room = config_.sched.max_step_tokens;  // draft rows count against the step's tokens
  for (const sched::StepItem& item : items) room -= item.end - item.begin;
  for (size_t i = 0; i < items.size(); ++i) {
    LiveSequence& s = Live(items[i].seq);
    int k = static_cast<int>(std::min<int64_t>(DraftBudget(s, items[i]), room));
    if (k > 0 && step_profile_) k = s.draft_schedule.Depth(k, draft_step_);
    if (k == 0) continue;
    room -= k;
    drafts.push_back({s.state.get(), s.tokens[static_cast<size_t>(items[i].begin)], k});
    owner.push_back(i);
  }
  ++draft_step_;
  if (drafts.empty()) return;
  std::vector<std::vector<float>> confidence;
  const double started = base::MonotonicSeconds();
  auto made = config_.speculative.external ? ExternalDrafts(items, drafts, owner) : engine_.Draft(drafts, &confidence);
  const double draft_seconds = base::MonotonicSeconds() - started;
  if (!made.ok()) {  // the step goes on without drafts
    FS_LOG(kWarning, "drafting failed, decoding without drafts this step: {}", made.error().ToString());
    return;
  }
  for (size_t d = 0; d < owner.size(); ++d) TrimToGrammar(Live(items[owner[d]].seq), &(*made)[d]);
  for (double& rate : accept_rate_) rate = std::min(1.0, rate + 0.002);  // a position below break-even is tried again
  if (step_profile_) {
    int64_t rows = 0;
    for (const sched::StepItem& item : items) rows += item.end - item.begin;
    const double draft_steps = draft_seconds * step_profile_->StepsPerSecond(rows);
    std::vector<int> offered;
    for (const std::vector<int32_t>& m : *made) offered.push_back(static_cast<int>(m.size()));
    ChooseBudget(items, confidence, draft_seconds, &*made);
    for (size_t d = 0; d < owner.size(); ++d)
      Live(items[owner[d]].seq).draft_schedule.Record(offered[d], static_cast<int>((*made)[d].size()), draft_steps);
  }
  for (size_t d = 0; d < owner.size(); ++d) {
    const size_t i = owner[d];
    if ((*made)[d].empty()) continue;
    Verify& v = verify[i];
    v.tokens.assign(1, drafts[d].token);
    v.tokens.insert(v.tokens.end(), (*made)[d].begin(), (*made)[d].end());
    if (d < confidence.size() && confidence[d].size() >= (*made)[d].size())
      v.confidence.assign(confidence[d].begin(), confidence[d].begin() + static_cast<std::ptrdiff_t>((*made)[d].size()));
    batch[i].tokens = v.tokens;
    batch[i].logits = engine::LogitsMode::kAll;
    batch[i].undo = &v.undo;
  }
}

// Under a constraint, the drafts from the first one the grammar refuses are cut before the
// verify (such a draft could never be kept): each is tried on the matcher, which is then
// rolled back. Before </think> (when the constraint waits for it) drafts are free.
void EngineLoop::TrimToGrammar(LiveSequence& s, std::vector<int32_t>* drafts) const {
  if (!s.matcher) return;
  bool awaiting = s.awaiting_think_end;
  int advanced = 0;
  size_t keep = 0;
  for (; keep < drafts->size(); ++keep) {
    const int32_t token = (*drafts)[keep];
    if (awaiting) {
      awaiting = token != s.request->req.think_end_token;
      continue;
    }
    if (s.matcher->terminated() || !s.matcher->AcceptToken(token)) break;
    ++advanced;
  }
  s.matcher->Rollback(advanced);
  drafts->resize(keep);
}

// The adaptive verify budget (serve/verify_budget.h): each draft's confidence is the drafter's
// (the MTP head's probability of it, DSpark's confidence head) calibrated to the acceptance
// measured at its position, or else that acceptance itself; the drafting call's time counts
// against the drafts (a DSpark block costs one to two plain steps on medium). A gain inside the profile's own error (kLeastVerifyGain) is not
// taken: at large batches verify rows cost about what they bring, and a profile a few percent
// off would make the steps slower than plain ones.
void EngineLoop::ChooseBudget(std::span<const sched::StepItem> items, const std::vector<std::vector<float>>& confidence,
                              double draft_seconds, std::vector<std::vector<int32_t>>* drafts) const {
  int64_t rows = 0, tokens = 0;
  for (const sched::StepItem& item : items) rows += item.end - item.begin, tokens += item.sample;
  std::vector<std::vector<double>> worth(drafts->size());
  for (size_t d = 0; d < drafts->size(); ++d)
    for (size_t j = 0; j < (*drafts)[d].size(); ++j)
      worth[d].push_back(d < confidence.size() && j < confidence[d].size() ? calibration_.Calibrated(j, confidence[d][j])
                         : j < accept_rate_.size()                         ? accept_rate_[j]
                                                                           : 1.0);
  const std::vector<int> keep = ChooseVerifyBudget(*step_profile_, rows, tokens, worth, kLeastVerifyGain, draft_seconds);
  for (size_t d = 0; d < drafts->size(); ++d) (*drafts)[d].resize(static_cast<size_t>(keep[d]));
}

// The measured acceptance by draft position, among verifies that reached it. A position starts
// at 1 (optimistic: drafts are verified until their record says they do not pay; a rate that
// started low would never be measured).
void EngineLoop::LearnAcceptance(int drafted, int accepted) {
  if (accept_rate_.size() < static_cast<size_t>(drafted)) accept_rate_.resize(static_cast<size_t>(drafted), 1.0);
  for (int j = 0; j < drafted && j <= accepted; ++j)
    accept_rate_[static_cast<size_t>(j)] = 0.9 * accept_rate_[static_cast<size_t>(j)] + (j < accepted ? 0.1 : 0.0);
}

void EngineLoop::AcceptDrafts(LiveSequence& s, const sched::StepItem& item, const engine::ForwardResult& result,
                              size_t index, Verify& verify) {
  const int64_t vocab = model_.config().vocab_size;
  const int k = static_cast<int>(verify.tokens.size()) - 1;
  LoopRequest& r = *s.request;
  int committed = 0, accepted = 0;
  r.usage.speculative_drafted += k;  // before any commit: the choice's final event carries the usage
  for (int j = 0; j <= k; ++j) {
    if (j > 0 && s.constrained_now()) {  // row 0's mask came from the mask worker
      s.grammar_mask.resize(s.matcher->grammar().vocab().mask_words());
      s.matcher->FillMask(s.grammar_mask);
    }
    sampler::SampleResult sample = sampler::Sample(std::span<const float>(result.row(index, j), static_cast<size_t>(vocab)),
                                                   s.params, s.history, item.end + j, SamplingMask(s, vocab),
                                                   &sample_scratch_);
    // The token of row j is the one for draft j + 1's position: equal, the draft is accepted and
    // row j + 1 was computed after the right token.
    const bool match = j < k && sample.token == verify.tokens[static_cast<size_t>(j + 1)];
    if (match) ++accepted, ++r.usage.speculative_accepted;
    sched::StepItem at = item;
    at.begin = item.end + j - 1;
    at.end = item.end + j;
    // Every draft kept: the state is at item.end + k, the next block boundary at most; plain
    // decoding persists there before sampling, so here too (the token may end the choice).
    if (j == k && j > 0 && at.end % kv::kBlockTokens == 0) PersistState(s);
    CommitToken(s, at, std::move(sample));
    ++committed;
    if (s.finished || !match) break;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.speculative_drafted += k;
    stats_.speculative_accepted += accepted;
    if (stats_.speculative_drafted_at.size() < static_cast<size_t>(k)) {
      stats_.speculative_drafted_at.resize(static_cast<size_t>(k), 0);
      stats_.speculative_accepted_at.resize(static_cast<size_t>(k), 0);
    }
    for (int j = 0; j < k; ++j) ++stats_.speculative_drafted_at[static_cast<size_t>(j)];
    for (int j = 0; j < accepted; ++j) ++stats_.speculative_accepted_at[static_cast<size_t>(j)];
  }
  LearnAcceptance(k, accepted);
  if (!verify.confidence.empty()) calibration_.Learn(verify.confidence, accepted);
  if (s.finished) return;  // its state is gone
  const base::Status rolled = engine_.Rollback(s.state.get(), verify.undo, committed);
  FS_CHECK(rolled.ok(), "rollback after verification: %s", rolled.ToString().c_str());
}

}  // namespace flashserve::serve
