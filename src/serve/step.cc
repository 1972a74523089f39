// One engine step of the Server: plan, forward, sample, commit, finish (serve/server.h).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/clock.h"
#include "base/log.h"
#include "sampler/sampler.h"
#include "serve/server.h"
#include "serve/server_internal.h"

namespace flashserve::serve {

using protocol::FinishReason;

namespace {
bool IsStopToken(const protocol::GenerateRequest& r, int32_t token, int32_t eos) {
  if (token == eos && !r.ignore_eos) return true;
  return std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) != r.stop_token_ids.end();
}
}  // namespace

void Server::Loop() {
  while (!stop_) {
    const bool idle = sched_.num_running() == 0 && sched_.num_waiting() == 0;
    DrainInbound(idle);
    if (stop_) break;
    if (!StepOnce() && !idle) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, std::chrono::milliseconds(2), [&] { return stop_ || !inbound_.empty(); });
    }
  }
}

bool Server::StepOnce() {
  DrainInbound(false);
  sched::AdmitHooks hooks{[this](const sched::Sequence& s) { return ProbeCache(s); },
                          [this](sched::Sequence& s, int64_t n) { return RestoreCache(s, n); }};
  sched::StepPlan plan = sched_.Plan(hooks);
  for (uint64_t id : plan.preempted) {
    auto it = choices_.find(id);
    if (it != choices_.end()) it->second->state.reset();
  }
  if (!plan.items.empty()) RunPlan(plan);
  PublishStats(!plan.items.empty());
  return !plan.items.empty();
}

int64_t Server::ProbeCache(const sched::Sequence& seq) {
  Choice& c = *choices_.at(seq.id);
  c.match = PrefixMatch{};
  if (!prefix_) return 0;
  return prefix_->Probe(c.request->req.cache_namespace, seq.tokens, static_cast<int64_t>(seq.tokens.size()) - 1, &c.match);
}

int64_t Server::RestoreCache(sched::Sequence& seq, int64_t tokens) {
  Choice& c = *choices_.at(seq.id);
  if (c.match.num_blocks * kv::kBlockTokens != tokens) return 0;
  c.state = prefix_->Restore(c.match, false);
  c.match = PrefixMatch{};
  Request& r = *c.request;
  ReleasePins(r);  // restored (or failed): the state owns its copy now
  if (!c.state) return 0;
  if (!r.cached_counted && c.index == 0) CountCachedTokens(r, std::min<int64_t>(tokens, r.usage.prompt_tokens));
  return tokens;
}

void Server::CountCachedTokens(Request& r, int64_t tokens) {
  r.cached_counted = true;
  r.usage.cached_tokens = tokens;
  for (int64_t b = 0; b * kv::kBlockTokens < tokens; ++b) {
    const int64_t n = std::min<int64_t>(kv::kBlockTokens, tokens - b * kv::kBlockTokens);
    const kvstore::Tier tier = b < static_cast<int64_t>(r.block_tiers.size()) ? r.block_tiers[b] : kvstore::Tier::kMemory;
    (tier == kvstore::Tier::kDisk ? r.usage.cached_disk
     : tier == kvstore::Tier::kShared ? r.usage.cached_shared
                                      : r.usage.cached_memory) += n;
  }
}

void Server::RunPlan(const sched::StepPlan& plan) {
  std::vector<engine::ForwardRequest> reqs;
  for (const sched::StepItem& item : plan.items) {
    Choice& c = *choices_.at(item.seq_id);
    MarkStarted(*c.request);
    if (!c.state) c.state = engine_.NewSequence(false);
    if (item.begin == 0 && c.index == 0) c.request->cached_counted = true;  // a cold prefill counts no hits
    FS_CHECK(c.state->position() == item.begin, "sequence %llu: state at %ld, plan starts at %ld",
             static_cast<unsigned long long>(item.seq_id), static_cast<long>(c.state->position()),
             static_cast<long>(item.begin));
    const sched::Sequence* seq = sched_.Find(item.seq_id);
    reqs.push_back({c.state.get(), std::span<const int32_t>(seq->tokens.data() + item.begin, item.end - item.begin),
                    item.sample ? engine::LogitsMode::kLast : engine::LogitsMode::kNone});
  }
  const auto start = std::chrono::steady_clock::now();
  auto result = engine_.Forward(reqs);
  const double step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int64_t prefill_tokens = 0;  // tokens of multi-token (prefill) items
  for (const sched::StepItem& item : plan.items)
    if (item.end - item.begin > 1) prefill_tokens += item.end - item.begin;
  if (plan.num_tokens > 0) step_prefill_seconds_ += step_seconds * static_cast<double>(prefill_tokens) / plan.num_tokens;
  if (result.ok() && plan.num_tokens >= 32) {  // prefill-heavy step: update the recompute estimate
    const double per_token = step_seconds / static_cast<double>(plan.num_tokens);
    prefill_seconds_per_token_ = prefill_seconds_per_token_ > 0 ? 0.8 * prefill_seconds_per_token_ + 0.2 * per_token : per_token;
  }
  if (!result.ok()) {
    FS_LOG(kError, "engine step failed: {}", result.error().ToString());
    std::vector<std::string> ids;
    for (const auto& item : plan.items) ids.push_back(choices_.at(item.seq_id)->request->req.id);
    for (const auto& id : ids) CancelNow(id, FinishReason::kError, "engine error: " + result.error().message());
    return;
  }
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const float* logits = result->num_rows(i) > 0 ? result->row(i, 0) : nullptr;
    if (choices_.count(plan.items[i].seq_id)) AfterForward(plan.items[i], logits);
  }
}

void Server::AfterForward(const sched::StepItem& item, const float* logits) {
  Choice& c = *choices_.at(item.seq_id);
  sched_.Commit(item, std::nullopt);
  if (item.persist && prefix_) {
    prefix_->Persist(c.request->req.cache_namespace, sched_.Find(item.seq_id)->tokens, *c.state, c.request->req.ttl_class);
    if (c.index == 0 && c.request->req.report_persisted) {
      protocol::GenerateEvent e;
      e.persisted_tokens = c.state->position();
      c.request->sink(e);
    }
  }
  if (!item.sample) return;
  if (c.index == 0 && c.request->forks_pending > 0) ForkChoices(c, item, logits);
  SampleChoice(c, item, logits);
}

void Server::ForkChoices(Choice& parent, const sched::StepItem& item, const float* logits) {
  Request& r = *parent.request;
  const int first = r.req.n - r.forks_pending;
  r.forks_pending = 0;
  for (int index = first; index < r.req.n; ++index) {
    auto child = std::make_unique<Choice>();
    child->seq_id = next_seq_id_++;
    child->index = index;
    child->request = parent.request;
    child->params = r.req.sampling;
    child->params.seed = r.req.sampling.seed + static_cast<uint64_t>(index);
    child->history = parent.history;
    const bool running = sched_.Fork(parent.seq_id, child->seq_id);
    if (running) child->state = parent.state->Clone();
    r.seq_ids.push_back(child->seq_id);
    ++r.open_choices;
    Choice& ref = *child;
    choices_[child->seq_id] = std::move(child);
    if (running) {
      sched::StepItem child_item = item;
      child_item.seq_id = ref.seq_id;
      SampleChoice(ref, child_item, logits);
    }
  }
}

void Server::SampleChoice(Choice& c, const sched::StepItem& item, const float* logits) {
  Request& r = *c.request;
  sampler::SampleResult s = sampler::Sample(std::span<const float>(logits, model_.config().vocab_size), c.params,
                                            c.history, item.end, {}, &sample_scratch_);
  sched_.Commit(item, s.token);
  c.history.AddOutput(s.token);
  ++c.generated;
  ++r.usage.completion_tokens;
  protocol::GenerateEvent event;
  event.choice = c.index;
  const bool stop = IsStopToken(r.req, s.token, static_cast<int32_t>(model_.config().eos_token_id));
  if (!stop) event.tokens.push_back({s.token, s.logprob, std::move(s.top_logprobs)});
  const int64_t length = static_cast<int64_t>(sched_.Find(c.seq_id)->tokens.size());
  if (stop) {
    event.finish = FinishReason::kStop;
  } else if (c.generated >= r.req.max_tokens || length >= config_.max_context) {
    event.finish = FinishReason::kLength;
  }
  if (event.finish != FinishReason::kNone) {
    auto keep = c.request;  // FinishChoice may drop the last reference
    FinishChoice(c, event.finish);
    event.request_done = keep->open_choices == 0;
    if (event.request_done) event.usage = keep->usage;
    keep->sink(event);
    if (event.request_done) requests_.erase(keep->req.id);
    return;
  }
  r.sink(event);
}

void Server::FinishChoice(Choice& c, FinishReason reason, std::string error) {
  MarkStarted(*c.request);
  sched_.Remove(c.seq_id);
  --c.request->open_choices;
  if (c.request->open_choices == 0) ReleasePins(*c.request);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.generated_tokens_total += c.generated;
    if (c.request->open_choices == 0) {
      ++stats_.requests_finished_total;
      stats_.prompt_tokens_total += c.request->usage.prompt_tokens;
      stats_.cached_prompt_tokens_total += c.request->usage.cached_tokens;
    }
  }
  choices_.erase(c.seq_id);  // destroys c
}

void Server::CancelNow(const std::string& id, FinishReason reason, const std::string& error) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  std::shared_ptr<Request> r = it->second;
  if (r->seq_ids.empty()) {  // still fetching its prefix: nothing runs yet
    MarkStarted(*r);
    protocol::GenerateEvent e;
    e.finish = reason;
    e.error = error;
    e.request_done = true;
    e.usage = r->usage;
    r->sink(e);
    requests_.erase(id);
    return;
  }
  for (uint64_t seq_id : r->seq_ids) {
    auto c = choices_.find(seq_id);
    if (c == choices_.end()) continue;
    const int index = c->second->index;
    FinishChoice(*c->second, reason, error);
    protocol::GenerateEvent e;
    e.choice = index;
    e.finish = reason;
    e.error = error;
    e.request_done = r->open_choices == 0;
    if (e.request_done) e.usage = r->usage;
    r->sink(e);
  }
  requests_.erase(id);
}

void Server::PublishStats(bool ran_step) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.running = sched_.num_running();
  stats_.waiting = sched_.num_waiting();
  stats_.state_pool_bytes = sched_.pool_used();
  stats_.preemptions_total = sched_.num_preemptions();
  stats_.queued_prefill_tokens = sched_.PendingPromptTokens();
  stats_.prefill_tokens_per_second = prefill_seconds_per_token_ > 0 ? 1.0 / prefill_seconds_per_token_ : 0;
  // Share of recent wall time spent on prefill: both sums decay with a one-minute time constant.
  const double now = base::MonotonicSeconds();
  const double decay = std::exp(-(now - busy_last_seconds_) / 60.0);
  busy_prefill_sum_ = busy_prefill_sum_ * decay + step_prefill_seconds_;
  busy_wall_sum_ = busy_wall_sum_ * decay + (now - busy_last_seconds_);
  stats_.busy_fraction = busy_wall_sum_ > 0 ? std::min(1.0, busy_prefill_sum_ / busy_wall_sum_) : 0;
  busy_last_seconds_ = now;
  step_prefill_seconds_ = 0;
  if (store_) {
    const kvstore::StoreStats st = store_->Stats();
    stats_.prefix_cache_bytes = st.tiers[0].bytes;
    for (int t = 0; t < kvstore::kNumTiers; ++t) {
      const kvstore::TierStats& ts = st.tiers[t];
      stats_.kv_tiers[t] = {ts.objects, ts.bytes, ts.capacity, ts.hits, ts.misses, ts.bytes_read, ts.bytes_written,
                            ts.evictions, ts.expirations, ts.corrupt, ts.gc_backlog, ts.writable};
    }
  }
  if (ran_step) ++stats_.steps_total;
}

}  // namespace flashserve::serve
