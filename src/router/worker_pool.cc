// Worker links: load polls, KV-event following, resync, health (router/worker_pool.h).
#include "router/worker_pool.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/log.h"
#include "protocol/cluster.h"

namespace flashserve::router {

namespace asio = boost::asio;

namespace {

constexpr uint64_t kEventsPerPage = 4096;

}  // namespace

struct WorkerPool::Link {
  int id = -1;
  WorkerStatus status;
  std::unique_ptr<net::HttpClient> control;  // polls (short timeout)
  std::unique_ptr<net::HttpClient> proxy;    // forwarded requests (long timeout)
  bool need_resync = true;
  bool saturated_until_poll = false;
};

WorkerPool::WorkerPool(asio::io_context& ioc, const PoolConfig& config, PrefixIndex* index, LoadView* loads,
                       net::MetricsRegistry* metrics)
    : ioc_(ioc), config_(config), index_(index), loads_(loads), metrics_(metrics) {}

WorkerPool::~WorkerPool() = default;

base::Result<int> WorkerPool::Add(const std::string& url) {
  FS_ASSIGN_OR_RETURN(net::Endpoint endpoint, net::ParseBaseUrl(url));
  auto link = std::make_unique<Link>();
  link->id = index_->AddWorker();
  loads_->AddWorker(link->id);
  loads_->MarkUnhealthy(link->id);  // until its first good poll
  link->status.url = url;
  link->control = std::make_unique<net::HttpClient>(ioc_.get_executor(), endpoint, config_.control_api_key,
                                                    config_.control_timeout_s);
  link->proxy = std::make_unique<net::HttpClient>(ioc_.get_executor(), endpoint, "", config_.proxy_timeout_s);
  if (link->id != static_cast<int>(links_.size()))
    return base::MakeError(base::ErrorCode::kInternal, "worker ids out of step with the index");
  links_.push_back(std::move(link));
  return static_cast<int>(links_.size()) - 1;
}

void WorkerPool::Start() {
  for (auto& link : links_) asio::co_spawn(ioc_, PollLoop(*link), asio::detached);
}

void WorkerPool::Stop() { stopping_ = true; }

const WorkerStatus& WorkerPool::status(int worker) const { return links_.at(worker)->status; }

net::HttpClient& WorkerPool::proxy_client(int worker) { return *links_.at(worker)->proxy; }

asio::awaitable<void> WorkerPool::PollLoop(Link& link) {
  asio::steady_timer timer(ioc_);
  while (!stopping_) {
    co_await PollOnce(link);
    timer.expires_after(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(config_.poll_interval_s)));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<void> WorkerPool::PollOnce(Link& link) {
  net::HttpOutcome out = co_await link.control->Get("/v1/load");
  if (out.transport) co_return MarkDown(link, out.transport->message());
  if (out.status != 200) co_return MarkDown(link, fmt::format("/v1/load answered {}", out.status));
  auto load = protocol::ParseWorkerLoad(out.body);
  if (!load.ok()) co_return MarkDown(link, load.error().message());
  if (fingerprint_.empty()) fingerprint_ = load->fingerprint;
  if (load->fingerprint != fingerprint_) {
    co_return MarkDown(link, "serves another model (fingerprint " + load->fingerprint.substr(0, 12) + ", others " +
                                 fingerprint_.substr(0, 12) + ")");
  }
  if (auto format = encoding::ParseEncodingVersion(load->prompt_format)) {
    int expected = -1;
    const int value = static_cast<int>(*format);
    if (!prompt_format_.compare_exchange_strong(expected, value) && expected != value)
      co_return MarkDown(link, "encodes chat prompts as " + load->prompt_format + ", unlike the other workers");
  }
  WorkerStatus& s = link.status;
  if (!s.healthy) FS_LOG(kInfo, "router: worker {} ({}) is up", link.id, s.url);
  s.healthy = s.ever_seen = true;
  s.fingerprint = load->fingerprint;
  s.model = load->model;
  s.role = load->role;
  s.transfer_address = load->transfer_address;
  s.generated_tokens_total = load->generated_tokens_total;
  s.engine_busy_seconds_total = load->engine_busy_seconds_total;
  WorkerLoad view;
  view.healthy = true;
  view.queued_prefill_tokens = load->queued_prefill_tokens;
  view.queued_images = load->queued_images;
  view.running_sequences = load->running;
  view.free_state_bytes = std::max<int64_t>(0, load->state_pool_capacity - load->state_pool_bytes);
  view.recent_ttft_s = load->recent_ttft_seconds;
  view.prefill_tokens_per_s = load->prefill_tokens_per_second;
  view.busy_fraction = load->busy_fraction;
  view.updated_at_s = base::MonotonicSeconds();
  (void)loads_->Update(link.id, view);
  metrics_->Gauge("flashserve_router_worker_healthy", "1 when the worker answers its polls", {{"worker", s.url}}).Set(1);
  if (!load->kv_enabled) co_return;
  if (link.need_resync || s.epoch != load->kv_epoch || index_->NeedsResync(link.id)) {
    co_await Resync(link);
  } else if (load->kv_last_seq != s.last_seq) {
    co_await FollowEvents(link);
  }
}

asio::awaitable<bool> WorkerPool::Resync(Link& link) {
  net::HttpOutcome out = co_await link.control->Get("/v1/kv/snapshot");
  if (out.transport || out.status != 200) {
    link.need_resync = true;
    if (out.transport) MarkDown(link, out.transport->message());  // silent or gone: as a failed load poll
    co_return false;
  }
  auto snapshot = protocol::ParseKvSnapshot(out.body);
  if (!snapshot.ok()) {
    FS_LOG(kWarning, "router: worker {}: bad KV snapshot: {}", link.status.url, snapshot.error().message());
    link.need_resync = true;
    co_return false;
  }
  const std::vector<KvObject>& objects = snapshot->objects;
  (void)index_->Reset(link.id, objects, snapshot->seq);
  link.status.epoch = snapshot->epoch;
  link.status.last_seq = snapshot->seq;
  link.need_resync = false;
  ++link.status.resyncs;
  metrics_->Counter("flashserve_router_kv_resyncs_total", "Prefix-index resyncs from a worker snapshot",
                    {{"worker", link.status.url}}).Add();
  FS_LOG(kInfo, "router: worker {}: prefix index resynced ({} objects, epoch {}, seq {})", link.status.url,
         objects.size(), snapshot->epoch, snapshot->seq);
  co_return true;
}

asio::awaitable<bool> WorkerPool::FollowEvents(Link& link) {
  for (;;) {
    net::HttpOutcome out =
        co_await link.control->Get(fmt::format("/v1/kv/events?after={}&limit={}", link.status.last_seq, kEventsPerPage));
    if (out.transport) MarkDown(link, out.transport->message());  // silent or gone: as a failed load poll
    if (out.transport || out.status != 200) co_return false;
    auto page = protocol::ParseKvEventPage(out.body);
    if (!page.ok() || page->gap || page->epoch != link.status.epoch) co_return co_await Resync(link);
    for (const KvEvent& e : page->events) {
      (void)index_->Apply(link.id, e);
      link.status.last_seq = e.seq;
    }
    link.status.events += static_cast<int64_t>(page->events.size());
    metrics_->Counter("flashserve_router_kv_events_total", "KV events applied to the prefix index",
                      {{"worker", link.status.url}}).Add(static_cast<double>(page->events.size()));
    if (index_->NeedsResync(link.id)) co_return co_await Resync(link);
    if (page->events.size() < kEventsPerPage) co_return true;
  }
}

void WorkerPool::MarkDown(Link& link, const std::string& error) {
  WorkerStatus& s = link.status;
  ++s.poll_failures;
  s.last_error = error;
  metrics_->Counter("flashserve_router_poll_failures_total", "Worker polls that failed", {{"worker", s.url}}).Add();
  if (!s.healthy && !link.need_resync) return;
  if (s.healthy) FS_LOG(kWarning, "router: worker {} ({}) is down: {}", link.id, s.url, error);
  s.healthy = false;
  loads_->MarkUnhealthy(link.id);
  (void)index_->Reset(link.id, {}, 0);  // its private cache may be gone; resync when it is back
  link.need_resync = true;
  metrics_->Gauge("flashserve_router_worker_healthy", "1 when the worker answers its polls", {{"worker", s.url}}).Set(0);
}

void WorkerPool::ReportFailure(int worker, const std::string& error) { MarkDown(*links_.at(worker), error); }

asio::awaitable<void> WorkerPool::Refresh(int worker) {
  Link& link = *links_.at(worker);
  if (link.status.healthy && !link.need_resync && !link.status.epoch.empty()) co_await FollowEvents(link);
}

void WorkerPool::ReportSaturated(int worker) { loads_->OnRouted(worker, int64_t{1} << 40); }

}  // namespace flashserve::router
