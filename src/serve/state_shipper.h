// StateShipper: the prefill side of disaggregated serving. Ships a prompt's state to a decode
// worker's transfer receiver as this worker's loop persists it: each persist point sends the
// blocks not sent yet and that point's boundary (Service::ExportPrefix); the end sends the rest
// and END with this worker's cache hits. Its receiving counterpart is TransferInbox. Calls come
// from one thread at a time (the request's strand).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "protocol/generate.h"
#include "serve/service.h"
#include "transfer/sender.h"

namespace flashserve::serve {

class StateShipper {
 public:
  // Connects to `to` (host:port of the decode worker's receiver) for transfer `id`; the HELLO
  // carries this worker's model fingerprint, the cache namespace and the prompt's length.
  // A failed transfer later is logged; the decode worker then recomputes.
  static base::Result<std::shared_ptr<StateShipper>> Start(Service* service, const std::string& to,
                                                           const transfer::TransferId& id,
                                                           const std::string& cache_namespace,
                                                           std::vector<int32_t> prompt,
                                                           std::vector<protocol::KvHash> images = {});

  // The loop persisted the prompt's state up to `tokens`.
  void Persisted(int64_t tokens);
  // The prefill finished: sends what is left (the pictures' tower outputs first, so the decode
  // worker runs no tower for them) and END, then keeps the sender alive (on a thread
  // of its own, bounded) until END is out.
  void Done(const protocol::Usage& usage);

 private:
  StateShipper(Service* service, std::shared_ptr<transfer::TransferSender> sender, std::string ns,
               std::vector<int32_t> prompt, std::vector<protocol::KvHash> images);
  void Ship(std::vector<CacheObject> objects);

  Service* service_;
  std::shared_ptr<transfer::TransferSender> sender_;
  std::string ns_;
  std::vector<int32_t> prompt_;
  std::vector<protocol::KvHash> images_;  // content keys of the prompt's pictures
  int64_t sent_blocks_ = 0, boundary_tokens_ = 0;
};

}  // namespace flashserve::serve
