// Disaggregated routing (router/router_internal.h): a prefill worker chosen cache-aware among
// --role prefill workers computes the prompt and streams its state to a decode worker chosen by
// load among --role decode workers, which generates; the client talks to the decode worker.
#include <utility>  // first: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <fmt/format.h>

#include <random>

#include "base/log.h"
#include "router/router_internal.h"

namespace flashserve::router {

namespace asio = boost::asio;

std::string RouterServer::Impl::NewTransferIdHex() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{:016x}{:016x}", rng(), rng());
}

bool RouterServer::Impl::Disaggregated() const {
  bool prefill = false, decode = false;
  for (int w = 0; w < pool.size(); ++w) {
    const WorkerStatus& s = pool.status(w);
    if (!s.healthy) continue;
    prefill |= s.role == protocol::WorkerRole::kPrefill;
    decode |= s.role == protocol::WorkerRole::kDecode && !s.transfer_address.empty();
  }
  return prefill && decode;
}

LoadView RouterServer::Impl::RoleView(protocol::WorkerRole role) const {
  LoadView view = loads;
  for (int w = 0; w < pool.size(); ++w)
    if (pool.status(w).role != role) view.MarkUnhealthy(w);
  return view;
}

Decision RouterServer::Impl::RouteDisaggregated(const std::shared_ptr<ProxyCall>& call, std::string* transfer_id) {
  const Decision prefill = Decide(*call, chooser, RoleView(protocol::WorkerRole::kPrefill));
  if (prefill.outcome != Outcome::kRouted) return prefill;
  const Decision decode = Decide(*call, decode_chooser, RoleView(protocol::WorkerRole::kDecode));
  if (decode.outcome != Outcome::kRouted) return decode;
  *transfer_id = NewTransferIdHex();
  metrics.Counter("flashserve_router_disaggregated_total", "Requests split into a prefill and a decode half").Add();
  std::string encode_transfers = StartEncoding(call, prefill.worker);
  asio::co_spawn(ioc, PrefillHalf(call, prefill.worker, pool.status(decode.worker).transfer_address, *transfer_id,
                                  std::move(encode_transfers)),
                 asio::detached);
  return decode;
}

asio::awaitable<bool> RouterServer::Impl::SendHalf(std::shared_ptr<ProxyCall> call, int worker, const char* stage,
                                                   net::HeaderList headers) {
  net::RequestExtras extras;
  extras.authorization = call->authorization;
  extras.headers = std::move(headers);
  extras.cancelled = [call] { return call->gone.load(); };  // the client left: stop this half too
  const std::string url = pool.status(worker).url;
  net::HttpOutcome out = co_await pool.proxy_client(worker).Post(call->path, call->body, nullptr, std::move(extras));
  const std::string status = out.transport ? "transport" : std::to_string(out.status);
  metrics.Counter(fmt::format("flashserve_router_{}_requests_total", stage),
                  fmt::format("{} halves sent, by worker and outcome", stage), {{"worker", url}, {"status", status}})
      .Add();
  if (out.transport) {
    // A half cancelled because its client left is no failure of the worker.
    if (!call->gone) pool.ReportFailure(worker, out.transport->message());
  } else if (out.status != 200) {
    FS_LOG(kWarning, "router: {} worker {} answered {}: {}", stage, url, out.status, out.body.substr(0, 200));
  }
  co_return !out.transport && out.status == 200;
}

// The prefill half's answer only matters for logs and metrics: the decode worker learns of a
// failed prefill from the transfer (no HELLO, or a broken stream) and recomputes.
asio::awaitable<void> RouterServer::Impl::PrefillHalf(std::shared_ptr<ProxyCall> call, int worker, std::string to,
                                                      std::string transfer_id, std::string encode_transfers) {
  net::HeaderList headers = {{protocol::kTransferHeader, transfer_id}, {protocol::kPrefillToHeader, to}};
  if (!encode_transfers.empty()) headers.emplace_back(protocol::kEncodeTransfersHeader, encode_transfers);
  if (co_await SendHalf(call, worker, "prefill", std::move(headers))) co_await pool.Refresh(worker);
}

}  // namespace flashserve::router
