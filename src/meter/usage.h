// The ledger's values: one UsageRecord per request (tokens by cache tier, times, status and its
// price under the book in force at arrival), what may be billed of it, and the queries that
// sum records by tenant, key, model, day or hour. Plain values; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "meter/tenant.h"

namespace flashserve::meter {

enum class UsageStatus {
  kInterrupted,  // in flight; left so by a crash (billed what was delivered by the last flush)
  kCompleted,
  kLength,       // a choice hit max_tokens
  kCancelled,    // the client went away
  kFailed,       // refused or failed on the server's side: never billed
};
std::string_view UsageStatusName(UsageStatus s);
std::optional<UsageStatus> ParseUsageStatus(std::string_view name);

struct UsageRecord {
  std::string request_id;  // the key: a request has one record
  std::string tenant;      // "" = a key without a tenant, or no key
  std::string key_id;
  std::string model;
  std::string route;        // "/v1/chat/completions", "/v1/messages", ...
  int64_t arrival_us = 0;   // Unix microseconds
  int64_t first_token_us = 0;
  int64_t end_us = 0;
  int64_t input_uncached = 0;
  int64_t cached_memory = 0;
  int64_t cached_disk = 0;
  int64_t cached_shared = 0;
  int64_t cached_prefill = 0;  // disaggregated: hits counted by the prefill worker
  int64_t output_tokens = 0;     // delivered to the client, reasoning included
  int64_t reasoning_tokens = 0;
  int64_t speculative_drafted = 0;
  int64_t speculative_accepted = 0;
  UsageStatus status = UsageStatus::kInterrupted;
  std::string currency = "USD";
  Rates rates;       // per million tokens, in force at arrival
  int64_t cost = 0;  // micro-units; PriceRecord sets it

  int64_t cached() const { return cached_memory + cached_disk + cached_shared + cached_prefill; }
  int64_t input() const { return input_uncached + cached(); }
};

// Sets record->cost from its rates: (uncached x input + cached x cached + output x output) / 10^6,
// rounded half up. Failed requests cost nothing; cancelled and interrupted ones cost nothing
// unless a token reached the client, then input and the delivered output.
void PriceRecord(UsageRecord* record);

enum class UsageGroup { kTotal, kTenant, kKey, kModel, kDay, kHour };
std::optional<UsageGroup> ParseUsageGroup(std::string_view name);  // "tenant", "key", ...

// A tenant's requests and their prompt tokens (every tier) that arrived in one second.
struct Arrivals {
  int64_t requests = 0;
  int64_t input_tokens = 0;
};

struct UsageQuery {
  int64_t from_us = 0;             // arrival >= from
  int64_t to_us = INT64_MAX;       // arrival < to
  std::string tenant;              // "" = all
  UsageGroup group = UsageGroup::kTenant;
};

// One group's sums (each currency apart).
struct UsageRow {
  std::string group;  // tenant, key id, model, "2026-12-06" or "2026-12-06T14" (UTC); "" for kTotal
  std::string currency;
  int64_t requests = 0;
  int64_t input_uncached = 0, cached_memory = 0, cached_disk = 0, cached_shared = 0, cached_prefill = 0;
  int64_t output_tokens = 0, reasoning_tokens = 0;
  int64_t speculative_drafted = 0, speculative_accepted = 0;
  int64_t cost = 0;
};

// "2026-12-01", "2026-12-01T10:00:00Z" (UTC) or Unix seconds -> Unix microseconds.
base::Result<int64_t> ParseUsageTime(std::string_view text);

// A query from text parameters (the CLI's flags, /admin/usage's query string): from defaults to
// the start of the current UTC month, to to now; group: total, tenant, key, model, day, hour.
base::Result<UsageQuery> MakeUsageQuery(std::string_view from, std::string_view to, std::string tenant,
                                        std::string_view group, int64_t now_us);

Json UsageRowJson(const UsageRow& row);

}  // namespace flashserve::meter
