// One engine step of the loop (serve/engine_loop.h): Plan -> Restore -> Forward -> Sample ->
// Commit, then stop / length / forks, then the published statistics.
#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "base/log.h"
#include "sampler/sampler.h"
#include "serve/engine_loop.h"

namespace flashserve::serve {

using protocol::FinishReason;

namespace {
bool IsStopToken(const protocol::GenerateRequest& r, int32_t token, int32_t eos) {
  if (token == eos && !r.ignore_eos) return true;
  return std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) != r.stop_token_ids.end();
}
}  // namespace

bool EngineLoop::StepOnce() {
  DrainCommands(false);
  const sched::StepPlan plan = sched_.Plan(prefix_.get());
  for (sched::Sequence* s : plan.preempted) Live(s).state.reset();
  const bool ran = !plan.items.empty() && RunPlan(plan);
  retired_.clear();
  PublishStats(ran);
  return ran;
}

// Builds an admitted sequence's state from the prefix cache; on failure the sequence
// recomputes from its first token, starting next step.
bool EngineLoop::RestoreItem(const sched::StepItem& item) {
  LiveSequence& s = Live(item.seq);
  LoopRequest& r = *s.request;
  Restored restored;
  if (prefix_) restored = prefix_->Restore(s.cache_seed, s.tokens, s.images, item.begin / kv::kBlockTokens, DrafterStates());
  s.state = std::move(restored.state);
  ReleasePins(r);  // restored (or failed): the state owns its copy now
  if (!s.state) {
    sched_.RestoreFailed(item, restored.objects_gone);
    return false;
  }
  if (!r.cached_counted && s.index == 0) CountCachedTokens(r, std::min<int64_t>(item.begin, r.usage.prompt_tokens));
  return true;
}

void EngineLoop::CountCachedTokens(LoopRequest& r, int64_t tokens) {
  r.cached_counted = true;
  r.usage.cached_tokens = tokens;
  for (int64_t b = 0; b * kv::kBlockTokens < tokens; ++b) {
    const int64_t n = std::min<int64_t>(kv::kBlockTokens, tokens - b * kv::kBlockTokens);
    const kvstore::Tier tier =
        b < static_cast<int64_t>(r.block_tiers.size()) ? r.block_tiers[b] : kvstore::Tier::kMemory;
    (tier == kvstore::Tier::kDisk ? r.usage.cached_disk
     : tier == kvstore::Tier::kShared ? r.usage.cached_shared
                                      : r.usage.cached_memory) += n;
  }
}

// The embedded rows of the prompt's pictures that fall in [item.begin, item.end), as offsets, and
// the bidirectional spans that meet it. The scheduler never cuts one; were one cut, the engine
// would refuse the step (and the step's requests end with its error) rather than compute the
// span causally.
void EngineLoop::AttachImageRows(const EncodedImages& images, const sched::StepItem& item, ItemImages* out,
                                 engine::ForwardRequest* request) const {
  for (const auto& [first, last] : images.bidirectional)
    if (first < item.end && last > item.begin)
      out->spans.push_back({static_cast<int32_t>(first - item.begin), static_cast<int32_t>(last - item.begin)});
  request->bidirectional = out->spans;
  const std::vector<int32_t>& rows = images.rows;
  const auto first = std::lower_bound(rows.begin(), rows.end(), item.begin);
  const auto last = std::lower_bound(first, rows.end(), item.end);
  if (first == last) return;
  for (auto it = first; it != last; ++it) out->offsets.push_back(static_cast<int32_t>(*it - item.begin));
  const size_t d = static_cast<size_t>(model_.config().hidden_size);
  request->embedded_rows = out->offsets;
  request->embeddings = std::span<const float>(images.embeddings.data() + static_cast<size_t>(first - rows.begin()) * d,
                                               out->offsets.size() * d);
}

bool EngineLoop::RunPlan(const sched::StepPlan& plan) {
  std::vector<sched::StepItem> items;  // those that run (a failed restore drops its item)
  std::vector<engine::ForwardRequest> batch;
  std::vector<ItemImages> images;  // per item, its embedded rows and bidirectional spans
  images.reserve(plan.items.size());
  for (const sched::StepItem& item : plan.items) {
    LiveSequence& s = Live(item.seq);
    MarkStarted(*s.request);
    if (item.restore && !RestoreItem(item)) continue;
    if (!s.state) s.state = engine_.NewSequence(DrafterStates());
    if (item.begin == 0 && s.index == 0) s.request->cached_counted = true;  // a cold prefill counts no hits
    FS_CHECK(s.state->position() == item.begin, "sequence %llu: state at %ld, plan starts at %ld",
             static_cast<unsigned long long>(s.id), static_cast<long>(s.state->position()),
             static_cast<long>(item.begin));
    items.push_back(item);
    batch.push_back({s.state.get(), std::span<const int32_t>(s.tokens.data() + item.begin, item.end - item.begin),
                     item.sample ? engine::LogitsMode::kLast : engine::LogitsMode::kNone});
    AttachImageRows(s.request->images, item, &images.emplace_back(), &batch.back());
  }
  if (items.empty()) return false;  // every item a failed restore: nothing ran
  const auto start = std::chrono::steady_clock::now();
  std::vector<Verify> verify(items.size());
  if (Speculates()) Draft(items, batch, verify);
  StartMasks(items);
  auto result = engine_.Forward(batch);
  mask_worker_.Wait();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int64_t draft_rows = 0;  // verify rows beyond each item's one token
  for (const Verify& v : verify) draft_rows += v.tokens.empty() ? 0 : static_cast<int64_t>(v.tokens.size()) - 1;
  loop_stats_.RecordStep(items, seconds, result.ok(), draft_rows);
  CountRows(items, draft_rows, seconds);
  if (!result.ok()) {
    FS_LOG(kError, "engine step failed: {}", result.error().ToString());
    std::vector<std::string> ids;
    for (const sched::StepItem& item : items) ids.push_back(Live(item.seq).request->req.id);
    for (const std::string& id : ids) EndRequest(id, FinishReason::kError, "engine error: " + result.error().message());
    return true;
  }
  int64_t overlapped = 0;  // text before the pictures, computed while they encode
  for (const sched::StepItem& item : items)
    if (Live(item.seq).request->pictures_pending) overlapped += item.end - item.begin;
  if (overlapped > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.prompt_tokens_while_encoding += overlapped;
  }
  CommitAndSample(items, *result, verify);
  engine_.Recycle(std::move(*result));
  return true;
}

// Commits what the forward computed, persists at persist points, then samples every sampled
// item (and the choices forked from it) in one batch and commits the tokens.
void EngineLoop::CommitAndSample(std::span<const sched::StepItem> items, const engine::ForwardResult& result,
                                 std::span<Verify> verify) {
  const int64_t vocab = model_.config().vocab_size;
  std::vector<sched::StepItem> sampled;  // one per row, its seq the choice the row belongs to
  std::vector<sampler::SampleRow> rows;
  std::vector<size_t> speculated;  // items verifying drafts: sampled row by row after the others
  for (size_t i = 0; i < items.size(); ++i) {
    const sched::StepItem& item = items[i];
    LiveSequence& s = Live(item.seq);
    sched_.Commit(item, std::nullopt);
    if (item.persist) PersistState(s);
    if (!item.sample) continue;
    if (!verify[i].tokens.empty()) {
      speculated.push_back(i);
      continue;
    }
    std::vector<LiveSequence*> group = {&s};
    if (s.index == 0 && s.request->forks_pending > 0) ForkChoices(s, &group);
    for (LiveSequence* g : group) {
      sched::StepItem row_item = item;
      row_item.seq = g;
      sampled.push_back(row_item);
      rows.push_back({std::span<const float>(result.row(i, 0), static_cast<size_t>(vocab)), &g->params, &g->history,
                      item.end, SamplingMask(*g, vocab)});
    }
  }
  std::vector<sampler::SampleResult> tokens = sampler::SampleBatch(rows, &sample_scratch_);
  for (size_t k = 0; k < sampled.size(); ++k) CommitToken(Live(sampled[k].seq), sampled[k], std::move(tokens[k]));
  for (size_t i : speculated) AcceptDrafts(Live(items[i].seq), items[i], result, i, verify[i]);
}

// Snapshots a choice's state into the prefix cache at its position (a persist point).
void EngineLoop::PersistState(LiveSequence& s) {
  if (!prefix_) return;
  prefix_->Persist(s.cache_seed, s.tokens, s.images, *s.state, s.request->req.ttl_class);
  if (s.index == 0 && s.request->req.report_persisted) {
    protocol::GenerateEvent e;
    e.persisted_tokens = s.state->position();
    s.request->sink(e);
  }
}

// Forks the choices 1..n-1 from choice 0 once its prompt is done; those the pool can hold run at
// once (appended to *group, sampled from the parent's logits), the others queue and recompute.
void EngineLoop::ForkChoices(LiveSequence& parent, std::vector<LiveSequence*>* group) {
  LoopRequest& r = *parent.request;
  const int first = r.req.n - r.forks_pending;
  r.forks_pending = 0;
  for (int index = first; index < r.req.n; ++index) {
    LiveSequence* child = NewChoice(r, index);
    child->history = parent.history;
    child->matcher = parent.matcher;
    child->awaiting_think_end = parent.awaiting_think_end;
    child->grammar_mask = parent.grammar_mask;
    if (sched_.Fork(parent, child)) {
      child->state = parent.state->Clone();
      group->push_back(child);
    }
  }
}

// The grammar masks of the sequences this step samples under a constraint, computed on the
// mask worker while the forward pass runs (matchers are not touched by the engine thread
// until Wait()).
void EngineLoop::StartMasks(std::span<const sched::StepItem> items) {
  std::vector<LiveSequence*> constrained;
  for (const sched::StepItem& item : items) {
    LiveSequence& s = Live(item.seq);
    if (item.sample && s.constrained_now()) constrained.push_back(&s);
  }
  if (constrained.empty()) return;
  mask_worker_.Start([constrained = std::move(constrained)] {
    for (LiveSequence* s : constrained) {
      s->grammar_mask.resize(s->matcher->grammar().vocab().mask_words());
      s->matcher->FillMask(s->grammar_mask);
    }
  });
}

// Advances the grammar over a committed token (</think> first when it waits for one).
bool EngineLoop::AcceptGrammar(LiveSequence& s, int32_t token) {
  if (!s.matcher) return true;
  if (s.awaiting_think_end) {
    if (token == s.request->req.think_end_token) s.awaiting_think_end = false;
    return true;
  }
  return s.matcher->AcceptToken(token);
}

// Under a constraint: the grammar's mask. Under a reasoning budget: until </think> the
// sequence may not end (EOS is masked), and once the budget is spent </think> is the only
// token. A vision model never samples its image placeholder. Empty (no mask) otherwise.
std::span<const uint32_t> EngineLoop::SamplingMask(LiveSequence& s, int64_t vocab) {
  const protocol::GenerateRequest& req = s.request->req;
  if (s.constrained_now()) {
    return std::span<const uint32_t>(s.grammar_mask).first(std::min(s.grammar_mask.size(), static_cast<size_t>((vocab + 31) / 32)));
  }
  if (!s.in_reasoning || req.think_end_token >= vocab) return no_image_mask_;
  const bool spent = s.generated >= req.reasoning_budget;
  if (s.mask.empty() || s.mask_forces_think_end != spent) {
    const auto eos = static_cast<int64_t>(model_.config().eos_token_id);
    const size_t words = static_cast<size_t>((vocab + 31) / 32);
    s.mask.assign(words, spent ? 0u : ~0u);
    if (spent) s.mask[static_cast<size_t>(req.think_end_token) / 32] = 1u << (req.think_end_token % 32);
    else if (eos >= 0 && eos < vocab) s.mask[static_cast<size_t>(eos) / 32] &= ~(1u << (eos % 32));
    const int64_t image = model_.config().image_token_id;
    if (!spent && !no_image_mask_.empty()) s.mask[static_cast<size_t>(image) / 32] &= ~(1u << (image % 32));
    s.mask_forces_think_end = spent;
  }
  return s.mask;
}

void EngineLoop::CommitToken(LiveSequence& s, const sched::StepItem& item, sampler::SampleResult sample) {
  LoopRequest& r = *s.request;
  sched_.Commit(item, sample.token);
  s.history.AddOutput(sample.token);
  ++s.generated;
  if (s.in_reasoning && sample.token == r.req.think_end_token) {
    s.in_reasoning = false;
    s.mask.clear();
  }
  ++r.usage.completion_tokens;
  if (!AcceptGrammar(s, sample.token)) {
    FS_LOG(kError, "request {}: the grammar refused token {}", r.req.id, sample.token);
    FinishChoice(s, FinishReason::kError, "structured output: the grammar refused a sampled token");
    return;
  }
  protocol::GenerateEvent event;
  event.choice = s.index;
  const bool stop = IsStopToken(r.req, sample.token, static_cast<int32_t>(model_.config().eos_token_id)) ||
                    (s.matcher && s.matcher->terminated());  // the grammar ended the answer
  if (!stop) event.tokens.push_back({sample.token, sample.logprob, std::move(sample.top_logprobs)});
  FinishReason finish = FinishReason::kNone;
  if (stop) {
    finish = FinishReason::kStop;
  } else if (s.generated >= r.req.max_tokens || static_cast<int64_t>(s.tokens.size()) >= config_.max_context) {
    finish = FinishReason::kLength;
  }
  if (finish == FinishReason::kNone) {
    r.sink(event);
    return;
  }
  FinishChoice(s, finish, "", std::move(event));
}

void EngineLoop::CountRows(std::span<const sched::StepItem> items, int64_t draft_rows, double seconds) {
  int64_t rows = draft_rows;
  for (const sched::StepItem& item : items) rows += item.end - item.begin;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.step_rows_total += rows;
  stats_.step_rows_max = std::max(stats_.step_rows_max, rows);
  stats_.engine_busy_seconds_total += seconds;
}

void EngineLoop::PublishStats(bool ran_step) {
  const double now = base::MonotonicSeconds();
  const double busy = loop_stats_.UpdateBusyFraction(now);
  const double per_token = loop_stats_.prefill_seconds_per_token();
  std::lock_guard<std::mutex> lock(mu_);
  stats_.finished_per_second = loop_stats_.UpdateFinishRate(now, stats_.requests_finished_total);
  stats_.running = sched_.num_running();
  stats_.waiting = sched_.num_waiting();
  stats_.state_pool_bytes = sched_.pool_used();
  stats_.preemptions_total = sched_.num_preemptions();
  stats_.queued_prefill_tokens = sched_.PendingPromptTokens();
  stats_.prefill_tokens_per_second = per_token > 0 ? 1.0 / per_token : 0;
  stats_.busy_fraction = busy;
  const EncoderStats enc = encoder_cache_->stats();
  stats_.encoder_cache_hits = enc.hits;
  stats_.encoder_store_hits = enc.store_hits;
  stats_.queued_images = image_encoder_->queued();
  stats_.encoder_imported = enc.imported;
  stats_.encoder_cache_misses = enc.misses;
  stats_.encode_batches = image_encoder_->batches();
  stats_.encoder_cache_bytes = enc.bytes;
  stats_.encode_seconds_total = enc.encode_seconds;
  if (store_) {
    const kvstore::StoreStats st = store_->Stats();
    stats_.prefix_cache_bytes = st.tiers[0].bytes;
    for (int t = 0; t < kvstore::kNumTiers; ++t) {
      const kvstore::TierStats& ts = st.tiers[t];
      stats_.kv_tiers[t] = {ts.objects, ts.bytes, ts.capacity, ts.hits, ts.misses, ts.bytes_read, ts.bytes_written,
                            ts.evictions, ts.expirations, ts.corrupt, ts.gc_backlog, ts.writable, ts.pinned};
    }
  }
  if (ran_step) ++stats_.steps_total;
}

}  // namespace flashserve::serve
