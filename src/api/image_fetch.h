// Remote pictures of a request, fetched before its route runs: the body's http(s) image URLs go
// to the stage's fetch threads (vision/fetch.h under the server's FetchPolicy); once all have
// arrived the route runs on the exchange's strand with them inlined as data URLs, or the first
// failure is the dialect's 400 naming the picture's field. Handle runs on the exchange's strand;
// the fetch threads only fetch, rewrite the body and Post.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include <boost/asio/thread_pool.hpp>

#include "api/metrics.h"
#include "net/api_error.h"
#include "net/exchange.h"
#include "vision/fetch.h"

namespace flashserve::api {

class ImageFetchStage {
 public:
  using Route = std::function<void(const std::shared_ptr<net::Exchange>&)>;
  // `threads` fetches at once; more than `max_pending` pictures waiting is a 503 with Retry-After.
  ImageFetchStage(vision::FetchPolicy policy, int threads, int max_pending, ApiMetrics* metrics);
  ~ImageFetchStage();  // waits for fetches under way
  ImageFetchStage(const ImageFetchStage&) = delete;
  ImageFetchStage& operator=(const ImageFetchStage&) = delete;

  // Runs `route` now when fetching is off or the body names no http(s) picture; otherwise after
  // the fetches, on the strand, with the rewritten body.
  void Handle(const std::shared_ptr<net::Exchange>& exchange, net::ErrorDialect errors, const Route& route);

 private:
  struct Job;
  void Fetch(const std::shared_ptr<Job>& job, size_t index);
  void Finish(const std::shared_ptr<Job>& job);

  vision::FetchPolicy policy_;
  int max_pending_;
  ApiMetrics* metrics_;
  std::atomic<int> pending_{0};
  boost::asio::thread_pool pool_;
};

}  // namespace flashserve::api
