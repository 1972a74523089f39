// Both halves of a disaggregated request on a worker (api/routes.h): the prefill side ships the
// prompt state over `transfer`; the decode side waits for it in the TransferInbox.
#include <memory>
#include <thread>

#include "api/routes.h"
#include "base/log.h"
#include "net/api_error.h"
#include "kv/block_hash.h"
#include "transfer/sender.h"

namespace flashserve::api {

namespace {

constexpr double kSenderDrainSeconds = 60;  // how long a finished prefill waits for its END to go out

// Ships a prompt's state to the decode worker as the prefill worker persists it: each persist
// point sends the blocks not sent yet and that point's boundary; the end sends the rest and END
// with this worker's cache hits. Runs on the job's strand.
class StateShipper {
 public:
  StateShipper(serve::Service* service, std::shared_ptr<transfer::TransferSender> sender, std::string ns,
               std::vector<int32_t> prompt)
      : service_(service), sender_(std::move(sender)), ns_(std::move(ns)), prompt_(std::move(prompt)) {}

  void Persisted(int64_t tokens) { Ship(service_->ExportPrefix(ns_, prompt_, sent_blocks_, tokens)); }

  void Done(const protocol::Usage& usage) {
    Ship(service_->ExportPrefix(ns_, prompt_, sent_blocks_, -1));
    if (!sender_->Finish(usage.cached_tokens).ok()) return;
    std::thread([sender = sender_] { sender->Wait(kSenderDrainSeconds).ok(); }).detach();  // alive until END is out
  }

 private:
  void Ship(std::vector<serve::CacheObject> objects) {
    for (serve::CacheObject& o : objects) {
      const bool boundary = o.kind == protocol::KvObjectKind::kBoundary;
      if (boundary && o.tokens <= boundary_tokens_) continue;  // already sent
      if (!sender_->Send(o.kind, o.hash, o.tokens, std::move(o.payload)).ok()) return;
      if (boundary) boundary_tokens_ = o.tokens;
      else sent_blocks_ = o.tokens / kv::kBlockTokens;
    }
  }

  serve::Service* service_;
  std::shared_ptr<transfer::TransferSender> sender_;
  std::string ns_;
  std::vector<int32_t> prompt_;
  int64_t sent_blocks_ = 0, boundary_tokens_ = 0;
};

// Prefill half: one generated token computes the whole prompt, shipped as it is persisted.
void StartPrefillHalf(const RouteContext& ctx, const ExchangePtr& exchange, JobOptions job, JobDeps deps,
                      protocol::GenerateRequest request, const transfer::TransferId& id, const std::string& to) {
  transfer::SenderOptions options;
  options.address = to;
  options.transfer_id = id;
  options.hello.model_fingerprint = ctx.service->Info().fingerprint;
  options.hello.cache_namespace = request.cache_namespace;
  options.hello.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  auto sender = transfer::TransferSender::Start(options, [to](const base::Error& e) {
    FS_LOG(kWarning, "prefill: state transfer to {} failed: {}", to, e.message());
  });
  if (!sender.ok()) return exchange->Respond(net::ErrorResponse(net::FromError(sender.error())));
  request.max_tokens = 1;
  request.n = 1;
  request.report_persisted = true;
  auto shipper = std::make_shared<StateShipper>(ctx.service, std::move(sender).value(), request.cache_namespace,
                                                request.prompt);
  job.on_persisted = [shipper](int64_t tokens) { shipper->Persisted(tokens); };
  job.on_done = [shipper](const protocol::Usage& usage) { shipper->Done(usage); };
  GenerationJob::Create(std::move(job), deps, exchange)->Start(std::move(request));
}

}  // namespace

void StartDisaggregated(const RouteContext& ctx, const ExchangePtr& exchange, JobOptions job, JobDeps deps,
                        protocol::GenerateRequest request, const std::string& transfer_id) {
  transfer::TransferId id{};
  if (!transfer::ParseTransferId(transfer_id, &id)) {
    return exchange->Respond(net::ErrorResponse(net::InvalidRequest(std::string(kTransferHeader) + " must be 32 hex digits")));
  }
  const std::string to = exchange->request().Header(kPrefillToHeader);
  if (!to.empty()) return StartPrefillHalf(ctx, exchange, std::move(job), deps, std::move(request), id, to);
  if (ctx.inbox == nullptr) {
    return exchange->Respond(net::ErrorResponse(
        net::InvalidRequest("this worker does not receive prompt state (start it with --role decode or both)")));
  }
  auto job_ptr = GenerationJob::Create(std::move(job), deps, exchange);
  auto pending = std::make_shared<protocol::GenerateRequest>(std::move(request));
  ctx.inbox->Expect(id, [exchange, job_ptr, pending](const serve::TransferInbox::Outcome& outcome) {
    exchange->Post([job_ptr, pending, outcome] {
      if (outcome.ok) pending->prefill_cached_tokens = outcome.source_cached_tokens;
      job_ptr->Start(std::move(*pending));
    });
  });
}

}  // namespace flashserve::api
