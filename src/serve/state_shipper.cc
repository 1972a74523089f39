// StateShipper (serve/state_shipper.h).
#include "serve/state_shipper.h"

#include <thread>

#include "base/log.h"
#include "kv/block_hash.h"

namespace flashserve::serve {

namespace {
constexpr double kSenderDrainSeconds = 60;  // how long a finished prefill waits for its END to go out
}  // namespace

base::Result<std::shared_ptr<StateShipper>> StateShipper::Start(Service* service, const std::string& to,
                                                                const transfer::TransferId& id,
                                                                const std::string& cache_namespace,
                                                                std::vector<int32_t> prompt,
                                                                std::vector<protocol::KvHash> images) {
  transfer::SenderOptions options;
  options.address = to;
  options.transfer_id = id;
  options.hello.model_fingerprint = service->Info().fingerprint;
  options.hello.cache_namespace = cache_namespace;
  options.hello.prompt_tokens = static_cast<int64_t>(prompt.size());
  auto sender = transfer::TransferSender::Start(options, [to](const base::Error& e) {
    FS_LOG(kWarning, "prefill: state transfer to {} failed: {}", to, e.message());
  });
  if (!sender.ok()) return sender.error();
  return std::shared_ptr<StateShipper>(
      new StateShipper(service, std::move(sender).value(), cache_namespace, std::move(prompt), std::move(images)));
}

StateShipper::StateShipper(Service* service, std::shared_ptr<transfer::TransferSender> sender, std::string ns,
                           std::vector<int32_t> prompt, std::vector<protocol::KvHash> images)
    : service_(service),
      sender_(std::move(sender)),
      ns_(std::move(ns)),
      prompt_(std::move(prompt)),
      images_(std::move(images)) {}

void StateShipper::Persisted(int64_t tokens) { Ship(service_->ExportPrefix(ns_, prompt_, sent_blocks_, tokens)); }

void StateShipper::Done(const protocol::Usage& usage) {
  for (const protocol::KvHash& key : images_) {
    base::SharedBytes payload = service_->ExportImage(key);
    if (payload && !sender_->Send(protocol::KvObjectKind::kImage, key, 0, std::move(payload)).ok()) return;
  }
  Ship(service_->ExportPrefix(ns_, prompt_, sent_blocks_, -1));
  if (!sender_->Finish(usage.cached_tokens).ok()) return;
  std::thread([sender = sender_] { sender->Wait(kSenderDrainSeconds).ok(); }).detach();  // alive until END is out
}

void StateShipper::Ship(std::vector<CacheObject> objects) {
  for (CacheObject& o : objects) {
    const bool boundary = o.kind == protocol::KvObjectKind::kBoundary;
    if (boundary && o.tokens <= boundary_tokens_) continue;  // already sent
    if (!sender_->Send(o.kind, o.hash, o.tokens, std::move(o.payload)).ok()) return;
    if (boundary) {
      boundary_tokens_ = o.tokens;
    } else {
      sent_blocks_ = o.tokens / kv::kBlockTokens;
    }
  }
}

}  // namespace flashserve::serve
