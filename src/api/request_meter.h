// One generation request's usage-ledger record as its GenerationJob sees it: registered when
// the request is accepted, updated as tokens reach the client (at most twice a second), final
// when the request ends. Built by the generation route (tenant, key, price book at arrival);
// used on the exchange's strand only.
#pragma once

#include <cstdint>
#include <string>

#include "meter/ledger.h"
#include "meter/usage.h"
#include "protocol/generate.h"

namespace flashserve::api {

class RequestMeter {
 public:
  // `record` carries the request id, tenant, key, model, route, arrival, prompt length (as
  // input_uncached) and the rates in force; `ledger` outlives the request.
  RequestMeter(meter::Ledger* ledger, meter::UsageRecord record) : ledger_(ledger), record_(std::move(record)) {}

  void Accepted();  // in flight (kInterrupted until it ends)
  void Refused();   // the service refused it: kFailed, nothing billed
  // Tokens delivered to the client so far (output, of which reasoning).
  void Delivered(int64_t output_tokens, int64_t reasoning_tokens);
  // The end: the status, the service's usage (prompt split by tier, speculative counts) and the
  // output tokens the client was given.
  void Ended(meter::UsageStatus status, const protocol::Usage& usage, int64_t output_tokens, int64_t reasoning_tokens);

 private:
  static int64_t NowMicros();

  meter::Ledger* ledger_;
  meter::UsageRecord record_;
  int64_t last_put_us_ = 0;
  bool ended_ = false;
};

}  // namespace flashserve::api
