// WorkerPool: the router's links to its workers. Per worker, a poll loop on the routing thread
// reads /v1/load into the LoadView and follows /v1/kv/events into the PrefixIndex, resyncing from
// /v1/kv/snapshot after a gap, an epoch change (worker restart) or an outage; a worker that stops
// answering is marked unhealthy (and its private cache forgotten) until it answers again.
// Everything runs on the routing thread's io_context: not thread-safe.
#pragma once

#include <utility>  // first: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "encoding/version.h"
#include "net/http_client.h"
#include "net/prometheus.h"
#include "router/load_view.h"
#include "router/prefix_index.h"

namespace flashserve::router {

struct PoolConfig {
  double poll_interval_s = 0.05;    // load + KV events, per worker
  // A poll that takes longer marks the worker unhealthy: a paused or hung worker is routed
  // around within this + poll_interval_s (0.8 s).
  double control_timeout_s = 0.75;
  double proxy_timeout_s = 600;     // bound on each read of a forwarded response (long prefills)
  std::string control_api_key;      // sent on polls when workers require keys
};

struct WorkerStatus {
  std::string url;
  bool healthy = false;
  bool ever_seen = false;       // answered a poll at least once
  std::string fingerprint, model, epoch;
  protocol::WorkerRole role = protocol::WorkerRole::kBoth;
  std::string transfer_address;  // decode side: where prefill workers send prompt state
  uint64_t last_seq = 0;
  int64_t resyncs = 0, events = 0, poll_failures = 0;
  std::string last_error;
  // The worker's counters at its last poll (the fleet's live economics).
  int64_t generated_tokens_total = 0;
  double engine_busy_seconds_total = 0;
};

class WorkerPool {
 public:
  WorkerPool(boost::asio::io_context& ioc, const PoolConfig& config, PrefixIndex* index, LoadView* loads,
             net::MetricsRegistry* metrics);
  ~WorkerPool();

  // Adds a worker by base URL ("http://host:port"); its id is the PrefixIndex/LoadView id.
  base::Result<int> Add(const std::string& url);
  // Starts every poll loop (co_spawned on the io_context).
  void Start();
  void Stop();  // loops end at their next wake-up

  int size() const { return static_cast<int>(links_.size()); }
  const WorkerStatus& status(int worker) const;
  net::HttpClient& proxy_client(int worker);
  // The model fingerprint the workers agree on ("" until one answered).
  const std::string& fingerprint() const { return fingerprint_; }
  // The chat prompt format the workers report (nullopt until one did). Any thread.
  std::optional<encoding::EncodingVersion> prompt_format() const {
    const int f = prompt_format_.load(std::memory_order_relaxed);
    if (f < 0) return std::nullopt;
    return static_cast<encoding::EncodingVersion>(f);
  }
  // A forwarded request could not reach the worker: unhealthy until its next good poll.
  void ReportFailure(int worker, const std::string& error);
  // The worker answered a forwarded request with 429 / 503: treat it as full until the next poll.
  void ReportSaturated(int worker);
  // Reads the worker's new KV events now (the router does this when a response ends, before the
  // client sees the end, so the client's next turn is routed knowing what this one cached).
  boost::asio::awaitable<void> Refresh(int worker);

 private:
  struct Link;
  boost::asio::awaitable<void> PollLoop(Link& link);
  boost::asio::awaitable<void> PollOnce(Link& link);
  boost::asio::awaitable<bool> Resync(Link& link);
  boost::asio::awaitable<bool> FollowEvents(Link& link);
  void MarkDown(Link& link, const std::string& error);

  boost::asio::io_context& ioc_;
  PoolConfig config_;
  PrefixIndex* index_;
  LoadView* loads_;
  net::MetricsRegistry* metrics_;
  std::vector<std::unique_ptr<Link>> links_;
  std::string fingerprint_;
  std::atomic<int> prompt_format_{-1};
  bool stopping_ = false;
};

}  // namespace flashserve::router
