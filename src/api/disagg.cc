// Both halves of a disaggregated request on a worker (api/routes.h): the prefill side ships the
// prompt state over `transfer`; the decode side waits for it in the TransferInbox.
#include <memory>
#include <thread>

#include "api/routes.h"
#include "base/log.h"
#include "net/api_error.h"
#include "transfer/sender.h"

namespace flashserve::api {

namespace {

constexpr double kSenderDrainSeconds = 60;  // how long a finished prefill waits for its END to go out

// Prefill half: one generated token computes the whole prompt; then every object that resumes it
// goes to the decode worker, and END carries this worker's cache hits.
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
  std::shared_ptr<transfer::TransferSender> shared = std::move(sender).value();
  request.max_tokens = 1;
  request.n = 1;
  job.on_done = [service = ctx.service, shared, ns = request.cache_namespace,
                 prompt = request.prompt](const protocol::Usage& usage) {
    for (serve::CacheObject& o : service->ExportPrefix(ns, prompt))
      if (!shared->Send(o.kind, o.hash, o.tokens, std::move(o.payload)).ok()) return;
    if (!shared->Finish(usage.cached_tokens).ok()) return;
    std::thread([shared] { shared->Wait(kSenderDrainSeconds).ok(); }).detach();  // keeps it alive until END is out
  };
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
