// A request's ledger record (api/request_meter.h).
#include "api/request_meter.h"

#include <chrono>

namespace flashserve::api {

namespace {
constexpr int64_t kProgressEveryUs = 500'000;
}

int64_t RequestMeter::NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void RequestMeter::Accepted() {
  last_put_us_ = NowMicros();
  ledger_->Put(record_);
}

void RequestMeter::Refused() {
  ended_ = true;
  record_.status = meter::UsageStatus::kFailed;
  record_.input_uncached = 0;
  record_.end_us = NowMicros();
  ledger_->Put(record_);
}

void RequestMeter::Delivered(int64_t output_tokens, int64_t reasoning_tokens) {
  if (ended_) return;
  const int64_t now = NowMicros();
  if (record_.first_token_us == 0 && output_tokens > 0) record_.first_token_us = now;
  record_.output_tokens = output_tokens;
  record_.reasoning_tokens = reasoning_tokens;
  if (now - last_put_us_ < kProgressEveryUs && last_put_us_ != 0) return;
  last_put_us_ = now;
  ledger_->Put(record_);
}

void RequestMeter::Ended(meter::UsageStatus status, const protocol::Usage& usage, int64_t output_tokens,
                         int64_t reasoning_tokens) {
  if (ended_) return;
  ended_ = true;
  record_.status = status;
  record_.end_us = NowMicros();
  record_.cached_memory = usage.cached_memory;
  record_.cached_disk = usage.cached_disk;
  record_.cached_shared = usage.cached_shared;
  record_.cached_prefill = usage.cached_prefill;
  record_.input_uncached = usage.prompt_tokens - usage.cached_tokens;
  record_.output_tokens = output_tokens;
  record_.reasoning_tokens = reasoning_tokens;
  record_.speculative_drafted = usage.speculative_drafted;
  record_.speculative_accepted = usage.speculative_accepted;
  ledger_->Put(record_);
}

}  // namespace flashserve::api
