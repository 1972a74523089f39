// The routing simulator (router/route_sim.h): a discrete-event replay. Arrivals are routed with
// the real Chooser over the real PrefixIndex (fed by the workers' KV events after a delay) and
// LoadView (fed by polls); workers run prefill FIFO, one request at a time, and decode alongside.
#include "router/route_sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <queue>
#include <unordered_map>

#include "fmt/format.h"
#include "router/sim_cache.h"

namespace flashserve::router {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

base::Error Invalid(const std::string& message) {
  return base::MakeError(base::ErrorCode::kInvalidArgument, "route sim: " + message);
}

// The trace with every request's prompt blocks interned once, shared by all policy runs.
struct Prepared {
  std::span<const TraceRequest> trace;
  BlockTable table;
  std::vector<uint32_t> blocks;
  std::vector<size_t> offsets;  // request i: blocks[offsets[i], offsets[i + 1])

  std::span<const uint32_t> Blocks(size_t i) const {
    return std::span<const uint32_t>(blocks).subspan(offsets[i], offsets[i + 1] - offsets[i]);
  }
};

// Persist points of an n-block prompt: after every `every`-th block and after the last one.
void PersistPoints(int64_t n, int every, std::vector<int64_t>* out) {
  out->clear();
  for (int64_t i = every - 1; i < n - 1; i += every) out->push_back(i);
  if (n > 0) out->push_back(n - 1);
}

// The blocks of request r a worker may resume from (kv's rule: the last prompt token is computed).
std::span<const uint32_t> ResumableBlocks(const Prepared& p, size_t r) {
  const auto blocks = p.Blocks(r);
  const auto max_blocks = static_cast<size_t>(kv::MaxResumeBlocks(p.trace[r].input_tokens));
  return blocks.first(std::min(blocks.size(), max_blocks));
}

double Percentile(std::vector<double>* v, double q) {
  if (v->empty()) return 0;
  const size_t k = std::min(v->size() - 1, static_cast<size_t>(q * static_cast<double>(v->size())));
  std::nth_element(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(k), v->end());
  return (*v)[k];
}

// Every request sees one infinite cache holding everything stored before it (same persist points).
PolicyReport RunOracle(const Prepared& p, const SimOptions& o) {
  PolicyReport r;
  r.policy = "oracle";
  r.timed = false;
  std::vector<uint8_t> have(p.table.size(), 0);  // bit 0 block, bit 1 boundary
  std::vector<int64_t> points;
  for (size_t i = 0; i < p.trace.size(); ++i) {
    const auto blocks = p.Blocks(i);
    const auto resumable = ResumableBlocks(p, i);
    const int64_t cached =
        kv::LongestResumePoint(static_cast<int64_t>(resumable.size()), [&](kv::ObjectKind kind, int64_t b) {
          const uint8_t bit = kind == kv::ObjectKind::kBlock ? 1 : 2;
          return (have[resumable[static_cast<size_t>(b)]] & bit) ? std::optional<Tier>(Tier::kMemory) : std::nullopt;
        }).tokens();
    ++r.requests;
    r.prompt_tokens += p.trace[i].input_tokens;
    r.cached_tokens += cached;
    r.memory_tokens += cached;
    for (uint32_t b : blocks) have[b] |= 1;
    PersistPoints(static_cast<int64_t>(blocks.size()), o.boundary_every_blocks, &points);
    for (int64_t k : points) have[blocks[k]] |= 2;
  }
  r.hit_rate = r.prompt_tokens > 0 ? static_cast<double>(r.cached_tokens) / static_cast<double>(r.prompt_tokens) : 0;
  return r;
}

class Simulation {
 public:
  Simulation(const Prepared& p, const SimOptions& o, const std::string& policy, ChooserConfig chooser)
      : p_(p), o_(o), affinity_(policy == "session-affinity"), use_index_(chooser.policy == Policy::kCacheAware),
        chooser_(chooser), index_(o.index_entries_per_worker) {
    report_.policy = policy;
    for (int w = 0; w < o.workers; ++w) {
      workers_.emplace_back(o.memory_blocks, o.disk_blocks, o.boundary_units);
      FS_CHECK(index_.AddWorker() == w, "worker ids out of step");
      loads_.AddWorker(w);
    }
  }

  PolicyReport Run();

 private:
  struct Job {
    int32_t request;
    int64_t est_uncached;
  };
  struct Worker {
    Worker(int64_t memory, int64_t disk, int32_t boundary) : cache(memory, disk, boundary) {}
    WorkerCache cache;
    std::deque<Job> queue;
    int64_t queued_tokens = 0;  // estimated uncached tokens of the waiting jobs
    bool busy = false;
    double start = 0, busy_until = 0;
    int32_t current = -1;
    int64_t current_uncached = 0, running = 0;
    uint64_t seq = 0;
    double busy_s = 0;
    int64_t prefill_tokens = 0;
    double polled_busy_s = 0, busy_fraction = 0;  // EMA of the busy share between polls
  };
  enum TimerKind { kPrefillDone = 0, kDecodeDone = 1 };
  struct Timer {
    double t;
    int kind;
    int worker;
    bool operator>(const Timer& other) const { return t > other.t; }
  };
  struct Batch {
    double t;
    int worker;
    uint64_t first_seq;
    std::vector<SimEvent> events;
  };

  void Arrive(size_t r);
  int RouteByAffinity(size_t r) const;
  void Enqueue(int w, size_t r);
  void Start(int w);
  void FinishPrefill(int w);
  void Emit(int w);
  void Deliver(const Batch& batch);
  void Poll();
  void Summarize();

  const Prepared& p_;
  const SimOptions& o_;
  const bool affinity_, use_index_;
  Chooser chooser_;
  PrefixIndex index_;
  LoadView loads_;
  std::vector<Worker> workers_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  std::deque<Batch> batches_;
  double now_ = 0;
  std::vector<SimEvent> emit_;
  std::vector<kv::BlockHash> hashes_;
  std::vector<int64_t> points_;
  std::vector<double> ttft_, decision_us_;
  std::unordered_map<std::string, int> session_worker_;
  PolicyReport report_;
};

PolicyReport Simulation::Run() {
  const auto wall_start = std::chrono::steady_clock::now();
  size_t next = 0;
  double next_poll = 0;
  const size_t n = p_.trace.size();
  while (true) {
    const double t_arrival = next < n ? p_.trace[next].arrival_s : kInf;
    const double t_timer = timers_.empty() ? kInf : timers_.top().t;
    const double t_batch = batches_.empty() ? kInf : batches_.front().t;
    const double t_poll = next < n ? next_poll : kInf;
    const double t = std::min({t_arrival, t_timer, t_batch, t_poll});
    if (t == kInf) break;
    now_ = t;
    if (t_batch <= t) {
      Deliver(batches_.front());
      batches_.pop_front();
    } else if (t_poll <= t) {
      Poll();
      next_poll += o_.poll_interval_s;
    } else if (t_timer <= t) {
      const Timer timer = timers_.top();
      timers_.pop();
      if (timer.kind == kPrefillDone) {
        FinishPrefill(timer.worker);
      } else {
        --workers_[timer.worker].running;
      }
    } else {
      Arrive(next++);
    }
  }
  Summarize();
  report_.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return report_;
}

int Simulation::RouteByAffinity(size_t r) const {
  const TraceRequest& req = p_.trace[r];
  std::string key = req.session;
  if (key.empty()) key = req.hash_ids.empty() ? fmt::format("r{}", r) : fmt::format("b{}", req.hash_ids[0]);
  const uint64_t h = AffinityHash(key);
  int best = 0;
  uint64_t best_score = 0;
  for (int w = 0; w < o_.workers; ++w) {
    const uint64_t s = RendezvousScore(h, w);
    if (w == 0 || s > best_score) {
      best = w;
      best_score = s;
    }
  }
  return best;
}

void Simulation::Arrive(size_t r) {
  const TraceRequest& req = p_.trace[r];
  int w;
  if (affinity_) {
    const auto t0 = std::chrono::steady_clock::now();
    w = RouteByAffinity(r);
    decision_us_.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  } else {
    hashes_.clear();
    for (uint32_t b : p_.Blocks(r)) hashes_.push_back(p_.table.hash(b));
    const auto t0 = std::chrono::steady_clock::now();
    const Decision d = chooser_.Route(hashes_, req.input_tokens, req.session, index_, loads_);
    decision_us_.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (d.outcome == Outcome::kSaturated) {
      ++report_.rejected;
      return;
    }
    report_.affinity_picks += d.reason == Reason::kAffinity ? 1 : 0;
    report_.balance_overrides += d.reason == Reason::kBalance ? 1 : 0;
    loads_.OnRouted(d.worker, req.input_tokens - d.cached_tokens);
    w = d.worker;
  }
  if (!req.session.empty()) {
    auto [it, inserted] = session_worker_.try_emplace(req.session, w);
    if (!inserted && it->second != w) {
      ++report_.session_moves;
      it->second = w;
    }
  }
  Enqueue(w, r);
}

void Simulation::Enqueue(int w, size_t r) {
  Worker& worker = workers_[w];
  const int64_t input = p_.trace[r].input_tokens;
  const int64_t est = input - worker.cache.Lookup(ResumableBlocks(p_, r)).tokens();
  worker.queue.push_back(Job{static_cast<int32_t>(r), est});
  worker.queued_tokens += est;
  if (!worker.busy) Start(w);
}

void Simulation::Start(int w) {
  Worker& worker = workers_[w];
  const Job job = worker.queue.front();
  worker.queue.pop_front();
  worker.queued_tokens -= job.est_uncached;
  const TraceRequest& req = p_.trace[job.request];
  const auto blocks = ResumableBlocks(p_, static_cast<size_t>(job.request));
  const kv::ResumePoint lookup = worker.cache.Lookup(blocks);
  worker.cache.Read(blocks, lookup, &emit_);
  Emit(w);
  const int64_t cached = lookup.tokens();
  const int64_t memory = lookup.blocks_by_tier[0] * kv::kBlockTokens;
  const double disk_spt = o_.chooser.disk_seconds_per_token;
  double fetch = static_cast<double>(cached - memory) * disk_spt;
  if (lookup.blocks > 0 && lookup.boundary_tier == Tier::kDisk) fetch += o_.chooser.boundary_fetch_tokens * disk_spt;
  const int64_t uncached = req.input_tokens - cached;
  const double duration = fetch + static_cast<double>(uncached) / o_.prefill_tokens_per_s;
  worker.busy = true;
  worker.start = now_;
  worker.busy_until = now_ + duration;
  worker.current = job.request;
  worker.current_uncached = uncached;
  worker.busy_s += duration;
  worker.prefill_tokens += uncached;
  ++report_.requests;
  report_.prompt_tokens += req.input_tokens;
  report_.cached_tokens += cached;
  report_.memory_tokens += memory;
  report_.disk_tokens += cached - memory;
  ttft_.push_back(worker.busy_until - req.arrival_s);
  timers_.push(Timer{worker.busy_until, kPrefillDone, w});
}

void Simulation::FinishPrefill(int w) {
  Worker& worker = workers_[w];
  const auto blocks = p_.Blocks(worker.current);
  PersistPoints(static_cast<int64_t>(blocks.size()), o_.boundary_every_blocks, &points_);
  worker.cache.Store(blocks, points_, &emit_);
  Emit(w);
  ++worker.running;
  const double decode = static_cast<double>(p_.trace[worker.current].output_tokens) / o_.decode_tokens_per_s;
  timers_.push(Timer{now_ + decode, kDecodeDone, w});
  worker.busy = false;
  worker.current = -1;
  if (!worker.queue.empty()) Start(w);
}

void Simulation::Emit(int w) {
  if (emit_.empty()) return;
  Worker& worker = workers_[w];
  if (use_index_) batches_.push_back(Batch{now_ + o_.event_delay_s, w, worker.seq + 1, emit_});
  worker.seq += emit_.size();
  emit_.clear();
}

void Simulation::Deliver(const Batch& batch) {
  uint64_t seq = batch.first_seq;
  for (const SimEvent& e : batch.events) {
    const KvEvent event{seq++, e.stored, KvObject{e.tier, e.kind, p_.table.hash(e.block)}};
    FS_CHECK(index_.Apply(batch.worker, event).ok(), "event for an unknown worker");
  }
}

void Simulation::Poll() {
  const double keep = std::exp(-o_.poll_interval_s / o_.busy_window_s);
  for (int w = 0; w < o_.workers; ++w) {
    Worker& worker = workers_[w];
    // busy_s counts a prefill when it starts; clamp the interval's share to [0, 1].
    const double share = std::clamp((worker.busy_s - worker.polled_busy_s) / o_.poll_interval_s, 0.0, 1.0);
    worker.polled_busy_s = worker.busy_s;
    worker.busy_fraction = keep * worker.busy_fraction + (1 - keep) * share;
    WorkerLoad load;
    load.busy_fraction = worker.busy_fraction;
    load.queued_prefill_tokens = worker.queued_tokens;
    if (worker.busy && worker.busy_until > worker.start) {
      const double left = std::max(0.0, worker.busy_until - now_) / (worker.busy_until - worker.start);
      load.queued_prefill_tokens += static_cast<int64_t>(left * static_cast<double>(worker.current_uncached));
    }
    load.running_sequences = worker.running;
    load.prefill_tokens_per_s = o_.prefill_tokens_per_s;
    load.updated_at_s = now_;
    FS_CHECK(loads_.Update(w, load).ok(), "poll of an unknown worker");
  }
}

void Simulation::Summarize() {
  PolicyReport& r = report_;
  r.hit_rate = r.prompt_tokens > 0 ? static_cast<double>(r.cached_tokens) / static_cast<double>(r.prompt_tokens) : 0;
  double sum = 0;
  for (double t : ttft_) sum += t;
  r.mean_ttft_s = ttft_.empty() ? 0 : sum / static_cast<double>(ttft_.size());
  r.p50_ttft_s = Percentile(&ttft_, 0.50);
  r.p99_ttft_s = Percentile(&ttft_, 0.99);
  r.decision_p50_us = Percentile(&decision_us_, 0.50);
  r.decision_p99_us = Percentile(&decision_us_, 0.99);
  for (double d : decision_us_) r.decision_max_us = std::max(r.decision_max_us, d);
  r.min_busy_s = kInf;
  r.min_prefill_tokens = std::numeric_limits<int64_t>::max();
  double busy_total = 0, end = 0;
  for (const Worker& w : workers_) {
    r.max_busy_s = std::max(r.max_busy_s, w.busy_s);
    r.min_busy_s = std::min(r.min_busy_s, w.busy_s);
    r.max_prefill_tokens = std::max(r.max_prefill_tokens, w.prefill_tokens);
    r.min_prefill_tokens = std::min(r.min_prefill_tokens, w.prefill_tokens);
    busy_total += w.busy_s;
    end = std::max(end, w.busy_until);
  }
  r.mean_busy_s = busy_total / static_cast<double>(workers_.size());
  const double span = end - (p_.trace.empty() ? 0 : p_.trace.front().arrival_s);
  r.utilization = span > 0 ? busy_total / (span * static_cast<double>(workers_.size())) : 0;
}

}  // namespace

base::Status SimOptions::Validate() const {
  if (workers < 1 || workers > 100000) return Invalid("workers must be in [1, 100000]");
  if (memory_blocks < 0 || disk_blocks < 0 || boundary_units < 1 || boundary_every_blocks < 1) {
    return Invalid("cache sizes must be >= 0, boundary units and persist interval >= 1");
  }
  if (!(prefill_tokens_per_s > 0) || !(decode_tokens_per_s > 0) || !(poll_interval_s > 0) || !(event_delay_s >= 0) ||
      !(busy_window_s > 0)) {
    return Invalid("speeds and the poll interval must be > 0, the event delay >= 0");
  }
  if (tokens_per_id < kv::kBlockTokens || tokens_per_id % kv::kBlockTokens != 0) {
    return Invalid("tokens_per_id must be a multiple of 128");
  }
  if (policies.empty()) return Invalid("no policies");
  for (const std::string& p : policies) {
    if (p != "session-affinity" && p != "oracle" && !ParsePolicy(p).ok()) {
      return Invalid(fmt::format("unknown policy '{}'", p));
    }
  }
  return chooser.Validate();
}

const PolicyReport* SimReport::Find(const std::string& policy) const {
  for (const PolicyReport& r : policies) {
    if (r.policy == policy) return &r;
  }
  return nullptr;
}

std::string SimReport::Format() const {
  std::string out = fmt::format(
      "{} workers, {} requests over {:.0f} s, {:.1f} M prompt tokens, {} distinct blocks\n\n", workers, requests,
      trace_span_s, static_cast<double>(prompt_tokens) / 1e6, distinct_blocks);
  out +=
      "| policy | served | rejected | hit rate | memory / disk | mean TTFT | p99 TTFT | busy max / min | max/min | "
      "max/mean | utilization | decision p50 / p99 | session moves | affinity / balance picks |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const PolicyReport& r : policies) {
    const double pt = std::max<double>(1, static_cast<double>(r.prompt_tokens));
    out += fmt::format("| {} | {} | {} | {:.1f}% |", r.policy, r.requests, r.rejected, 100 * r.hit_rate);
    if (!r.timed) {
      out += " | | | | | | | | | |\n";
      continue;
    }
    out += fmt::format(
        " {:.1f}% / {:.1f}% | {:.2f} s | {:.2f} s | {:.0f} / {:.0f} s | {:.2f} | {:.2f} | {:.0f}% | {:.1f} / {:.1f} us | "
        "{} | {} / {} |\n",
        100 * static_cast<double>(r.memory_tokens) / pt, 100 * static_cast<double>(r.disk_tokens) / pt, r.mean_ttft_s,
        r.p99_ttft_s, r.max_busy_s, r.min_busy_s, r.load_ratio(), r.max_to_mean(), 100 * r.utilization,
        r.decision_p50_us,
        r.decision_p99_us, r.session_moves, r.affinity_picks, r.balance_overrides);
  }
  return out;
}

void SimReport::Print() const { std::fputs(Format().c_str(), stdout); }

base::Result<SimReport> RunRouteSim(std::span<const TraceRequest> trace, const SimOptions& options) {
  FS_RETURN_IF_ERROR(options.Validate());
  Prepared p{trace, BlockTable(options.tokens_per_id), {}, {0}};
  SimReport report;
  for (const TraceRequest& r : trace) {
    p.table.Intern(r, &p.blocks);
    p.offsets.push_back(p.blocks.size());
    report.prompt_tokens += r.input_tokens;
  }
  report.workers = options.workers;
  report.requests = static_cast<int64_t>(trace.size());
  report.trace_span_s = trace.empty() ? 0 : trace.back().arrival_s - trace.front().arrival_s;
  report.distinct_blocks = static_cast<int64_t>(p.table.size());
  for (const std::string& policy : options.policies) {
    if (policy == "oracle") {
      report.policies.push_back(RunOracle(p, options));
      continue;
    }
    ChooserConfig chooser = options.chooser;
    chooser.policy = policy == "session-affinity" ? Policy::kRoundRobin : ParsePolicy(policy).value();
    chooser.default_prefill_tokens_per_s = options.prefill_tokens_per_s;
    report.policies.push_back(Simulation(p, options, policy, chooser).Run());
  }
  return report;
}

}  // namespace flashserve::router
