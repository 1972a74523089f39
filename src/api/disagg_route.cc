// Both halves of a disaggregated request at a worker's HTTP edge (api/routes.h): the prefill
// half generates one token while serve::StateShipper ships the prompt state; the decode half
// waits for it in the serve::TransferInbox, then generates.
#include <memory>

#include "api/routes.h"
#include "net/api_error.h"
#include "protocol/headers.h"
#include "serve/state_shipper.h"

namespace flashserve::api {

namespace {

// Prefill half: one generated token computes the whole prompt, shipped as it is persisted.
void StartPrefillHalf(const RouteContext& ctx, const ExchangePtr& exchange, JobOptions job, JobDeps deps,
                      std::unique_ptr<DialectWriter> writer, protocol::GenerateRequest request, const transfer::TransferId& id, const std::string& to) {
  std::vector<protocol::KvHash> images;
  for (const protocol::ImageInput& image : request.images) images.push_back(image.key);
  auto shipper = serve::StateShipper::Start(ctx.service, to, id, request.cache_namespace, request.prompt, std::move(images));
  if (!shipper.ok()) return writer->Fail(net::FromError(shipper.error()), false);
  request.max_tokens = 1;
  request.n = 1;
  request.report_persisted = true;
  job.on_persisted = [shipper = *shipper](int64_t tokens) { shipper->Persisted(tokens); };
  job.on_done = [shipper = *shipper](const protocol::Usage& usage) { shipper->Done(usage); };
  GenerationJob::Create(std::move(job), deps, exchange, std::move(writer))->Start(std::move(request));
}

}  // namespace

void StartDisaggregated(const RouteContext& ctx, const ExchangePtr& exchange, JobOptions job, JobDeps deps,
                        std::unique_ptr<DialectWriter> writer, protocol::GenerateRequest request,
                        const std::string& transfer_id) {
  transfer::TransferId id{};
  if (!transfer::ParseTransferId(transfer_id, &id)) {
    return writer->Fail(net::InvalidRequest(std::string(protocol::kTransferHeader) + " must be 32 hex digits"), false);
  }
  const std::string to = exchange->request().Header(protocol::kPrefillToHeader);
  if (!to.empty()) return StartPrefillHalf(ctx, exchange, std::move(job), deps, std::move(writer), std::move(request), id, to);
  if (ctx.inbox == nullptr) {
    return writer->Fail(
        net::InvalidRequest("this worker does not receive prompt state (start it with --role decode or both)"), false);
  }
  auto job_ptr = GenerationJob::Create(std::move(job), deps, exchange, std::move(writer));
  auto pending = std::make_shared<protocol::GenerateRequest>(std::move(request));
  ctx.inbox->Expect(id, [exchange, job_ptr, pending](const serve::TransferInbox::Outcome& outcome) {
    exchange->Post([job_ptr, pending, outcome] {
      if (outcome.ok) pending->prefill_cached_tokens = outcome.source_cached_tokens;
      job_ptr->Start(std::move(*pending));
    });
  });
}

}  // namespace flashserve::api
