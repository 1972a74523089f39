// What the metering store keeps about a tenant (its cache namespace, default retention class,
// price book, limits and data policy) and about an API key (its SHA-256 digest, never the key),
// with money in integer micro-units and the JSON forms the store and the admin routes use.
// Plain values; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "nlohmann/json.hpp"

namespace flashserve::meter {

using Json = nlohmann::json;

// Prices per million tokens, in micro-units of the book's currency ($0.15 = 150000).
struct Rates {
  int64_t input = 0;   // uncached input
  int64_t cached = 0;  // cached input, any tier
  int64_t output = 0;  // output, reasoning included
  bool operator==(const Rates&) const = default;
};

// A daily window (UTC, minutes after midnight; may wrap past midnight) with its own rates, like
// DeepSeek's off-peak discount.
struct OffPeak {
  int start_minute = 0;
  int end_minute = 0;
  Rates rates;
  bool operator==(const OffPeak&) const = default;
};

struct PriceBook {
  std::string currency = "USD";
  Rates standard;
  std::optional<OffPeak> off_peak;
  // The rates in force at a Unix time.
  const Rates& RatesAt(int64_t unix_seconds) const;
  bool operator==(const PriceBook&) const = default;
};

// 0 = no limit.
struct Limits {
  int64_t requests_per_minute = 0;
  int64_t input_tokens_per_minute = 0;
  int64_t output_tokens_per_minute = 0;
  int64_t concurrent_requests = 0;
  int64_t monthly_budget = 0;  // micro-units of the price book's currency
  bool operator==(const Limits&) const = default;
};

struct Tenant {
  std::string name;
  std::string cache_namespace;  // tenants given the same one share cached prefixes on purpose
  std::string ttl_class;        // default retention class ("" = the server's)
  PriceBook prices;
  Limits limits;
  bool log_text = false;  // prompt and completion text may appear in logs and the ledger
  int64_t created = 0;    // Unix seconds
  bool operator==(const Tenant&) const = default;
};

struct KeyRecord {
  std::string id;      // "key_" + 12 hex digits; what lists, logs and the ledger show
  std::string tenant;
  std::string label;   // free text for the operator
  std::string digest;  // hex SHA-256 of the key
  std::string prefix;  // the key's first 8 characters, to recognise it
  int64_t created = 0;
  int64_t revoked = 0;  // Unix seconds; 0 = active
};

// [A-Za-z0-9_.-]{1,64}: tenant names, namespaces and retention classes.
bool ValidName(std::string_view s);
// Checks names, rates, windows and limits; the message names the field.
base::Status ValidateTenant(const Tenant& t);

// "0.15" -> 150000 micro-units, exactly (up to 6 decimals, no sign, no exponent).
base::Result<int64_t> ParseMoney(std::string_view text);
// 150000 -> "0.15"; 3000 -> "0.003"; 2000000 -> "2".
std::string FormatMoney(int64_t micros);
// "16:30-00:30" -> {990, 30}.
base::Result<std::pair<int, int>> ParseWindow(std::string_view text);
std::string FormatWindow(int start_minute, int end_minute);

Json PriceBookJson(const PriceBook& p);
base::Result<PriceBook> PriceBookFromJson(const Json& j);
Json LimitsJson(const Limits& l);
base::Result<Limits> LimitsFromJson(const Json& j);
Json TenantJson(const Tenant& t);  // for `tenant show --json` and the admin routes
Json KeyJson(const KeyRecord& k);  // never the digest

}  // namespace flashserve::meter
