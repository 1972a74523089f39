// A request's ledger record (api/request_meter.h).
#include "api/request_meter.h"

#include "base/wall_time.h"

namespace flashserve::api {

namespace {
constexpr int64_t kProgressEveryUs = 500'000;
}


RequestMeter::~RequestMeter() {
  if (!accepted_ || ended_) return;
  record_.status = meter::UsageStatus::kFailed;
  record_.end_us = base::UnixMicros();
  if (ledger_) ledger_->Put(record_);
}

void RequestMeter::Accepted() {
  accepted_ = true;
  last_put_us_ = base::UnixMicros();
  if (ledger_) ledger_->Put(record_);
}

void RequestMeter::Refused() {
  ended_ = true;
  record_.status = meter::UsageStatus::kFailed;
  record_.input_uncached = 0;
  record_.end_us = base::UnixMicros();
  if (ledger_) ledger_->Put(record_);
}

void RequestMeter::Delivered(int64_t output_tokens, int64_t reasoning_tokens) {
  if (ended_ || !stream_) return;
  const int64_t now = base::UnixMicros();
  if (record_.first_token_us == 0 && output_tokens > 0) record_.first_token_us = now;
  record_.output_tokens = output_tokens;
  record_.reasoning_tokens = reasoning_tokens;
  if (now - last_put_us_ < kProgressEveryUs && last_put_us_ != 0) return;
  last_put_us_ = now;
  if (ledger_) ledger_->Put(record_);
}

void RequestMeter::Ended(meter::UsageStatus status, const protocol::Usage& usage, int64_t output_tokens,
                         int64_t reasoning_tokens) {
  if (ended_) return;
  ended_ = true;
  if (status == meter::UsageStatus::kCancelled && !stream_) output_tokens = reasoning_tokens = 0;  // nothing reached it
  record_.status = status;
  record_.end_us = base::UnixMicros();
  record_.cached_memory = usage.cached_memory;
  record_.cached_disk = usage.cached_disk;
  record_.cached_shared = usage.cached_shared;
  record_.cached_prefill = usage.cached_prefill;
  record_.input_uncached = usage.prompt_tokens - usage.cached_tokens;
  record_.output_tokens = output_tokens;
  record_.reasoning_tokens = reasoning_tokens;
  record_.speculative_drafted = usage.speculative_drafted;
  record_.speculative_accepted = usage.speculative_accepted;
  if (slot_) {  // before the ledger can write the record (and tell the limiter it is written)
    meter::UsageRecord priced = record_;
    meter::PriceRecord(&priced);
    // Spend counts once written to the ledger; without a record here (a prefill half) it is not ours.
    slot_->Finish(priced.output_tokens, ledger_ ? priced.cost : 0, priced.end_us / 1'000'000);
  }
  if (ledger_) ledger_->Put(record_);
}


}  // namespace flashserve::api
