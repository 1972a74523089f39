// Chooser and the TTFT cost model (router/policy.h).
#include "router/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fmt/format.h"

namespace flashserve::router {
namespace {

uint64_t Mix64(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

base::Error Invalid(std::string message) {
  return base::MakeError(base::ErrorCode::kInvalidArgument, "router: " + std::move(message));
}

}  // namespace

base::Result<Policy> ParsePolicy(std::string_view name) {
  if (name == "round-robin") return Policy::kRoundRobin;
  if (name == "least-load") return Policy::kLeastLoad;
  if (name == "cache-aware") return Policy::kCacheAware;
  return Invalid(fmt::format("unknown policy '{}' (round-robin, least-load, cache-aware)", name));
}

const char* PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kRoundRobin: return "round-robin";
    case Policy::kLeastLoad: return "least-load";
    case Policy::kCacheAware: return "cache-aware";
  }
  return "?";
}

const char* ReasonName(Reason reason) {
  switch (reason) {
    case Reason::kCost: return "cost";
    case Reason::kAffinity: return "affinity";
    case Reason::kBalance: return "balance";
    case Reason::kRoundRobin: return "round-robin";
    case Reason::kLeastLoad: return "least-load";
    case Reason::kNoHealthyWorker: return "no-healthy-worker";
    case Reason::kAllSaturated: return "all-saturated";
  }
  return "?";
}

base::Status ChooserConfig::Validate() const {
  if (!(default_prefill_tokens_per_s > 0)) return Invalid("default_prefill_tokens_per_s must be > 0");
  if (!(disk_seconds_per_token >= 0) || !(shared_seconds_per_token >= 0) || !(boundary_fetch_tokens >= 0) ||
      !(decode_seconds_per_sequence >= 0) || !(recompute_weight >= 0) || !(busy_weight_tokens >= 0)) {
    return Invalid("fetch and decode costs must be >= 0");
  }
  if (!(tie_tolerance >= 0) || !(tie_tolerance_s >= 0)) return Invalid("tie tolerances must be >= 0");
  if (session_table_size < 0) return Invalid("session_table_size must be >= 0");
  if (!(balance_abs_threshold_s >= 0)) return Invalid("balance_abs_threshold_s must be >= 0");
  if (!(balance_rel_threshold >= 1)) return Invalid("balance_rel_threshold must be >= 1");
  if (max_queued_prefill_tokens <= 0) return Invalid("max_queued_prefill_tokens must be > 0");
  if (min_retry_after_s < 1 || max_retry_after_s < min_retry_after_s || unhealthy_retry_after_s < 1) {
    return Invalid("retry-after bounds must satisfy 1 <= min <= max and unhealthy >= 1");
  }
  return base::Status::Ok();
}

TtftPrediction PredictTtft(const ChooserConfig& config, const WorkerLoad& load, const WorkerMatch* match,
                           int64_t prompt_tokens) {
  TtftPrediction p;
  const double speed = load.prefill_tokens_per_s > 0 ? load.prefill_tokens_per_s : config.default_prefill_tokens_per_s;
  double fetch = 0;
  if (match != nullptr && match->blocks > 0) {
    // A match longer than the prompt can resume from (kv's rule) loses its slowest blocks.
    int64_t excess = std::max<int64_t>(match->blocks - kv::MaxResumeBlocks(prompt_tokens), 0);
    for (int t = kNumTiers - 1; t >= 0; --t) {
      const int64_t cut = std::min(match->blocks_by_tier[t], excess);
      p.cached_tokens_by_tier[t] = (match->blocks_by_tier[t] - cut) * kv::kBlockTokens;
      p.cached_tokens += p.cached_tokens_by_tier[t];
      excess -= cut;
    }
    fetch = static_cast<double>(p.cached_tokens_by_tier[1]) * config.disk_seconds_per_token +
            static_cast<double>(p.cached_tokens_by_tier[2]) * config.shared_seconds_per_token;
    if (match->boundary_tier == Tier::kDisk) fetch += config.boundary_fetch_tokens * config.disk_seconds_per_token;
    if (match->boundary_tier == Tier::kShared) fetch += config.boundary_fetch_tokens * config.shared_seconds_per_token;
  }
  const int64_t uncached = std::max<int64_t>(prompt_tokens - p.cached_tokens, 0);
  p.queue_seconds = static_cast<double>(load.queued_prefill_tokens) / speed;
  p.uncached_seconds = static_cast<double>(uncached) / speed;
  p.prefill_tokens_per_s = speed;
  p.load_after_seconds = static_cast<double>(load.queued_prefill_tokens + uncached) / speed;
  p.seconds = p.load_after_seconds + fetch +
              static_cast<double>(load.running_sequences) * config.decode_seconds_per_sequence;
  return p;
}

uint64_t AffinityHash(std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, then mixed
  for (unsigned char c : key) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return Mix64(h);
}

int PlacePicture(uint64_t key, std::span<const int> encoders, const LoadView& loads, int64_t max_extra_queued) {
  int affine = encoders[0], least = encoders[0];
  for (int w : encoders) {
    if (RendezvousScore(key, w) > RendezvousScore(key, affine)) affine = w;
    if (loads.load(w).queued_images < loads.load(least).queued_images) least = w;
  }
  return loads.load(affine).queued_images > loads.load(least).queued_images + max_extra_queued ? least : affine;
}

uint64_t RendezvousScore(uint64_t key_hash, int worker) {
  return Mix64(key_hash ^ Mix64(static_cast<uint64_t>(worker) + 0x9e3779b97f4a7c15ULL));
}

int RendezvousPick(std::string_view key, std::span<const int> candidates) {
  const uint64_t h = AffinityHash(key);
  int best = -1;
  uint64_t best_score = 0;
  for (int w : candidates) {
    const uint64_t s = RendezvousScore(h, w);
    if (best < 0 || s > best_score) {
      best = w;
      best_score = s;
    }
  }
  return best;
}

base::Result<Chooser> Chooser::Create(const ChooserConfig& config) {
  FS_RETURN_IF_ERROR(config.Validate());
  return Chooser(config);
}

Chooser::Chooser(const ChooserConfig& config) : config_(config) {
  const base::Status s = config_.Validate();
  FS_CHECK(s.ok(), "invalid ChooserConfig: %s", s.ToString().c_str());
}

Decision Chooser::Route(std::span<const kv::BlockHash> prompt_blocks, int64_t prompt_tokens,
                        std::string_view affinity_key, const PrefixIndex& index, const LoadView& loads) {
  if (config_.policy != Policy::kCacheAware) return Choose(prompt_tokens, affinity_key, {}, loads);
  // Only the blocks a worker may resume from count (kv's rule), so predicted hits are real ones.
  const auto resumable = static_cast<size_t>(kv::MaxResumeBlocks(prompt_tokens));
  prompt_blocks = prompt_blocks.first(std::min(prompt_blocks.size(), resumable));
  index.Match(prompt_blocks, &matches_);
  const bool remember = config_.session_table_size > 0 && !affinity_key.empty() && !prompt_blocks.empty();
  const uint64_t key_hash = remember ? AffinityHash(affinity_key) : 0;
  if (remember) ApplySessionCredit(key_hash, prompt_blocks);
  const Decision d = Choose(prompt_tokens, affinity_key, matches_, loads);
  if (remember && d.outcome == Outcome::kRouted) RememberSession(key_hash, d.worker, prompt_blocks);
  return d;
}

void Chooser::ApplySessionCredit(uint64_t key_hash, std::span<const kv::BlockHash> prompt_blocks) {
  auto it = sessions_.find(key_hash);
  if (it == sessions_.end()) {
    it = old_sessions_.find(key_hash);
    if (it == old_sessions_.end()) return;
  }
  SessionRoute& route = it->second;
  if (route.worker >= static_cast<int>(matches_.size()) || !matches_[route.worker].live) return;
  if (route.blocks > static_cast<int64_t>(prompt_blocks.size()) || prompt_blocks[route.blocks - 1] != route.last) return;
  WorkerMatch& m = matches_[route.worker];
  if (m.blocks >= route.blocks) {
    route.confirmed = true;  // the events arrived; from now on the index knows better
    return;
  }
  if (route.confirmed) return;  // it was there and has been evicted since
  m = WorkerMatch{};            // the prompt in flight there will be in its memory
  m.live = true;
  m.blocks = route.blocks;
  m.blocks_by_tier[0] = route.blocks;
}

void Chooser::RememberSession(uint64_t key_hash, int worker, std::span<const kv::BlockHash> prompt_blocks) {
  if (static_cast<int64_t>(sessions_.size()) >= config_.session_table_size) {
    old_sessions_.swap(sessions_);
    sessions_.clear();
  }
  sessions_[key_hash] = SessionRoute{worker, static_cast<int64_t>(prompt_blocks.size()), prompt_blocks.back(), false};
}

Decision Chooser::Choose(int64_t prompt_tokens, std::string_view affinity_key, std::span<const WorkerMatch> matches,
                         const LoadView& loads) {
  Decision saturated;
  if (!Gather(prompt_tokens, matches, loads, &saturated)) return saturated;
  switch (config_.policy) {
    case Policy::kRoundRobin: return ByRoundRobin();
    case Policy::kLeastLoad: return ByLeastLoad();
    case Policy::kCacheAware: return ByCost(affinity_key, prompt_tokens == 0);
  }
  return ByCost(affinity_key, prompt_tokens == 0);
}

bool Chooser::Gather(int64_t prompt_tokens, std::span<const WorkerMatch> matches, const LoadView& loads,
                     Decision* saturated) {
  candidates_.clear();
  int healthy = 0;
  double least_overflow_s = std::numeric_limits<double>::infinity();
  for (int w = 0; w < loads.num_slots(); ++w) {
    if (!loads.present(w) || !loads.load(w).healthy) continue;
    ++healthy;
    const WorkerLoad& load = loads.load(w);
    if (load.queued_prefill_tokens > config_.max_queued_prefill_tokens) {
      const double speed = load.prefill_tokens_per_s > 0 ? load.prefill_tokens_per_s : config_.default_prefill_tokens_per_s;
      least_overflow_s = std::min(
          least_overflow_s, static_cast<double>(load.queued_prefill_tokens - config_.max_queued_prefill_tokens) / speed);
      continue;
    }
    const WorkerMatch* match = w < static_cast<int>(matches.size()) && matches[w].live ? &matches[w] : nullptr;
    const TtftPrediction p = PredictTtft(config_, load, match, prompt_tokens);
    const double busy = std::clamp(load.busy_fraction, 0.0, 1.0);
    const double score = p.seconds + config_.recompute_weight * p.uncached_seconds +
                         config_.busy_weight_tokens * busy / p.prefill_tokens_per_s;
    candidates_.push_back(Candidate{w, p, score});
  }
  if (!candidates_.empty()) return true;
  saturated->outcome = Outcome::kSaturated;
  if (healthy == 0) {
    saturated->reason = Reason::kNoHealthyWorker;
    saturated->retry_after_s = config_.unhealthy_retry_after_s;
  } else {
    saturated->reason = Reason::kAllSaturated;
    const double wait = std::ceil(least_overflow_s);
    saturated->retry_after_s = static_cast<int>(
        std::clamp(wait, static_cast<double>(config_.min_retry_after_s), static_cast<double>(config_.max_retry_after_s)));
  }
  return false;
}

// Cheapest predicted TTFT among the workers within the imbalance bound: a worker's queued
// prefill (seconds, before this request) must be <= max(abs, rel x the least queued candidate's).
// The least queued worker always is, so there is always a choice. The queue is compared before
// this request on purpose: the TTFT cost already contains this request's own prefill, and
// counting it here would put every worker past the bound for any prompt longer than abs.
// When the cheapest worker is outside the bound, the cheapest inside it wins (keeping locality
// where possible, unlike SGLang's plain shortest-queue fallback), reason kBalance.
// Among workers tied within the tolerance (and within the bound), the session key's rendezvous
// hash picks, so a session's requests stay together when nothing else separates the workers.
// A prompt the router could not tokenize (`opaque`: a body that does not parse, token counting)
// has no cost but load, and moving its session would lose the whole cached context, so every
// worker within the bound counts as tied and the key alone decides.
Decision Chooser::ByCost(std::string_view affinity_key, bool opaque) {
  const size_t n = candidates_.size();
  double min_queue = std::numeric_limits<double>::infinity();
  for (const Candidate& c : candidates_) min_queue = std::min(min_queue, c.prediction.queue_seconds);
  const double bound = std::max(config_.balance_abs_threshold_s, config_.balance_rel_threshold * min_queue);
  const size_t start = cursor_++ % n;  // exact ties rotate when there is no key
  int best = -1, best_within = -1;
  for (size_t k = 0; k < n; ++k) {
    const int i = static_cast<int>((start + k) % n);
    const Candidate& c = candidates_[i];
    if (best < 0 || c.score < candidates_[best].score) best = i;
    if (c.prediction.queue_seconds <= bound && (best_within < 0 || c.score < candidates_[best_within].score)) {
      best_within = i;
    }
  }
  const Reason reason = best_within == best ? Reason::kCost : Reason::kBalance;
  const Candidate& chosen = candidates_[best_within];
  if (affinity_key.empty()) return Routed(chosen, reason);
  // The API-key fallback ("key:...") names a client, not a session: it would pin a whole client.
  const bool sticky = opaque && !affinity_key.starts_with("key:");
  const double limit = sticky ? std::numeric_limits<double>::infinity()
                              : chosen.score * (1 + config_.tie_tolerance) + config_.tie_tolerance_s;
  const uint64_t key_hash = AffinityHash(affinity_key);
  int pick = best_within;
  uint64_t pick_score = RendezvousScore(key_hash, chosen.worker);
  for (size_t i = 0; i < n; ++i) {
    const Candidate& c = candidates_[i];
    if (c.score > limit || c.prediction.queue_seconds > bound) continue;
    const uint64_t s = RendezvousScore(key_hash, c.worker);
    if (s > pick_score) {
      pick = static_cast<int>(i);
      pick_score = s;
    }
  }
  if (pick == best_within) return Routed(chosen, reason);
  return Routed(candidates_[pick], reason == Reason::kCost ? Reason::kAffinity : reason);
}

Decision Chooser::ByRoundRobin() {
  // candidates_ is in worker order: take the first at or after the cursor, wrapping around.
  const Candidate* chosen = &candidates_.front();
  for (const Candidate& c : candidates_) {
    if (static_cast<size_t>(c.worker) >= cursor_) {
      chosen = &c;
      break;
    }
  }
  cursor_ = static_cast<size_t>(chosen->worker) + 1;
  return Routed(*chosen, Reason::kRoundRobin);
}

Decision Chooser::ByLeastLoad() {
  const size_t n = candidates_.size();
  const size_t start = cursor_++ % n;
  const Candidate* chosen = nullptr;
  for (size_t k = 0; k < n; ++k) {
    const Candidate& c = candidates_[(start + k) % n];
    if (chosen == nullptr || c.prediction.queue_seconds < chosen->prediction.queue_seconds) chosen = &c;
  }
  return Routed(*chosen, Reason::kLeastLoad);
}

Decision Chooser::Routed(const Candidate& c, Reason reason) const {
  Decision d;
  d.outcome = Outcome::kRouted;
  d.reason = reason;
  d.worker = c.worker;
  d.predicted_ttft_s = c.prediction.seconds;
  d.cached_tokens = c.prediction.cached_tokens;
  for (int t = 0; t < kNumTiers; ++t) d.cached_tokens_by_tier[t] = c.prediction.cached_tokens_by_tier[t];
  return d;
}

}  // namespace flashserve::router
