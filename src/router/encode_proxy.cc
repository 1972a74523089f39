// Pictures on encode workers (router/router_internal.h): each picture of a request goes to a
// healthy --role encode worker by rendezvous hashing of its source (the same picture lands on
// the worker whose encoder cache holds it; a request's pictures spread over the workers), one
// transfer per worker straight to the worker that computes the prompt. That worker waits for the
// transfers and encodes whatever did not arrive, so a dead or failing encode worker costs time,
// never the answer.
#include <utility>  // first: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <map>

#include "router/router_internal.h"

namespace flashserve::router {

namespace asio = boost::asio;

LoadView RouterServer::Impl::GenerationView() const {
  LoadView view = loads;
  for (int w = 0; w < pool.size(); ++w)
    if (pool.status(w).role == protocol::WorkerRole::kEncode) view.MarkUnhealthy(w);
  return view;
}

std::string RouterServer::Impl::StartEncoding(const std::shared_ptr<ProxyCall>& call, int target) {
  if (call->image_keys.empty()) return "";
  const std::string to = pool.status(target).transfer_address;
  std::vector<int> encoders;
  for (int w = 0; w < pool.size(); ++w) {
    const WorkerStatus& s = pool.status(w);
    if (s.healthy && s.role == protocol::WorkerRole::kEncode) encoders.push_back(w);
  }
  if (encoders.empty() || to.empty()) return "";  // the prompt worker encodes its pictures itself
  std::map<int, std::string> groups;  // worker -> "0,2"
  for (size_t i = 0; i < call->image_keys.size(); ++i) {
    const int worker = PlacePicture(call->image_keys[i], encoders, loads, kMaxExtraQueuedImages);
    loads.OnImagesRouted(worker, 1);
    std::string& list = groups[worker];
    if (!list.empty()) list += ',';
    list += std::to_string(i);
  }
  std::string ids;
  for (auto& [worker, indices] : groups) {
    const std::string id = NewTransferIdHex();
    if (!ids.empty()) ids += ',';
    ids += id;
    asio::co_spawn(ioc, EncodeHalf(call, worker, to, id, indices), asio::detached);
  }
  metrics.Counter("flashserve_router_encoded_images_total", "Pictures sent to encode workers")
      .Add(static_cast<double>(call->image_keys.size()));
  return ids;
}

// The encode half's answer only matters for logs, metrics and health: the prompt worker learns
// of a failed encode from its transfer (no HELLO, or a broken stream) and encodes itself.
asio::awaitable<void> RouterServer::Impl::EncodeHalf(std::shared_ptr<ProxyCall> call, int worker, std::string to,
                                                     std::string transfer_id, std::string indices) {
  net::HeaderList headers = {{protocol::kTransferHeader, transfer_id},
                             {protocol::kEncodeToHeader, to},
                             {protocol::kEncodeImagesHeader, indices}};
  co_await SendHalf(call, worker, "encode", std::move(headers));
}

}  // namespace flashserve::router
