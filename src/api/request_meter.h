// One generation request's usage-ledger record as its GenerationJob sees it: registered when
// the request is accepted, updated as tokens reach the client (at most twice a second), final
// when the request ends. Built by the generation route (tenant, key, price book at arrival);
// used on the exchange's strand only.
#pragma once

#include <cstdint>
#include <string>

#include <memory>

#include "meter/ledger.h"
#include "meter/limiter.h"
#include "meter/usage.h"
#include "net/api_error.h"
#include "net/exchange.h"
#include "protocol/generate.h"

namespace flashserve::api {

class RequestMeter {
 public:
  // `record` carries the request id, tenant, key, model, route, arrival, prompt length (as
  // input_uncached) and the rates in force; `ledger` outlives the request (null: limits only, no
  // record: the prefill half of a disaggregated request).
  // `stream`: tokens reach the client as they come (else only with the complete response).
  // `slot`: the request's place under its tenant's limits (null = none); released with the meter.
  RequestMeter(meter::Ledger* ledger, meter::UsageRecord record, bool stream,
               std::unique_ptr<meter::LimitSlot> slot = nullptr)
      : ledger_(ledger), record_(std::move(record)), stream_(stream), slot_(std::move(slot)) {}
  // A request accepted but never ended (its job dropped) is written kFailed: never billed.
  ~RequestMeter();

  void Accepted();  // in flight (kInterrupted until it ends)
  void Refused();   // the service refused it: kFailed, nothing billed
  // Tokens delivered to the client so far (output, of which reasoning); a response that is not
  // streamed delivers nothing before its end.
  void Delivered(int64_t output_tokens, int64_t reasoning_tokens);
  // The end: the status, the service's usage (prompt split by tier, speculative counts) and the
  // output tokens the client was given.
  void Ended(meter::UsageStatus status, const protocol::Usage& usage, int64_t output_tokens, int64_t reasoning_tokens);

 private:
  meter::Ledger* ledger_;
  meter::UsageRecord record_;
  const bool stream_;
  std::unique_ptr<meter::LimitSlot> slot_;
  bool accepted_ = false;
  int64_t last_put_us_ = 0;
  bool ended_ = false;
};

}  // namespace flashserve::api
