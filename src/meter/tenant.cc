// Tenants, price books and keys as values (meter/tenant.h).
#include "meter/tenant.h"

#include <cctype>

#include "fmt/format.h"

namespace flashserve::meter {
namespace {

base::Error Bad(std::string message) { return base::Error(base::ErrorCode::kInvalidArgument, std::move(message)); }

constexpr int64_t kMaxMicros = 1'000'000'000'000'000;  // 10^12 currency units: budgets, amounts
constexpr int64_t kMaxRate = 1'000'000'000'000;        // 10^6 currency units per million tokens

bool InWindow(int minute, const OffPeak& w) {
  if (w.start_minute <= w.end_minute) return minute >= w.start_minute && minute < w.end_minute;
  return minute >= w.start_minute || minute < w.end_minute;  // wraps past midnight
}

base::Status ValidateRates(const Rates& r, const char* what) {
  for (int64_t v : {r.input, r.cached, r.output})
    if (v < 0 || v > kMaxRate) return Bad(fmt::format("{} prices must be in [0, 1000000] per million tokens", what));
  return base::Status::Ok();
}

base::Result<int64_t> MicrosField(const Json& j, const char* key) {
  if (!j.contains(key)) return int64_t{0};
  const Json& v = j[key];
  if (!v.is_string()) return Bad(fmt::format("\"{}\" must be a decimal string", key));
  return ParseMoney(v.get<std::string>());
}

base::Result<Rates> RatesFromJson(const Json& j) {
  if (!j.is_object()) return Bad("rates must be an object");
  Rates r;
  FS_ASSIGN_OR_RETURN(r.input, MicrosField(j, "input"));
  FS_ASSIGN_OR_RETURN(r.cached, MicrosField(j, "cached_input"));
  FS_ASSIGN_OR_RETURN(r.output, MicrosField(j, "output"));
  return r;
}

Json RatesJson(const Rates& r) {
  return {{"input", FormatMoney(r.input)}, {"cached_input", FormatMoney(r.cached)}, {"output", FormatMoney(r.output)}};
}

}  // namespace

const Rates& PriceBook::RatesAt(int64_t unix_seconds) const {
  if (!off_peak) return standard;
  const int minute = static_cast<int>(((unix_seconds % 86400) + 86400) % 86400 / 60);
  return InWindow(minute, *off_peak) ? off_peak->rates : standard;
}

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

base::Status ValidateTenant(const Tenant& t) {
  if (!ValidName(t.name)) return Bad("tenant name must match [A-Za-z0-9_.-]{1,64}");
  if (!ValidName(t.cache_namespace)) return Bad("cache namespace must match [A-Za-z0-9_.-]{1,64}");
  if (!t.ttl_class.empty() && !ValidName(t.ttl_class)) return Bad("TTL class must match [A-Za-z0-9_.-]{1,64}");
  if (t.prices.currency.size() != 3 || !std::isupper(static_cast<unsigned char>(t.prices.currency[0])) ||
      !std::isupper(static_cast<unsigned char>(t.prices.currency[1])) ||
      !std::isupper(static_cast<unsigned char>(t.prices.currency[2])))
    return Bad("currency must be a three-letter code such as USD");
  FS_RETURN_IF_ERROR(ValidateRates(t.prices.standard, "standard"));
  if (t.prices.off_peak) {
    const OffPeak& w = *t.prices.off_peak;
    if (w.start_minute < 0 || w.start_minute >= 1440 || w.end_minute < 0 || w.end_minute >= 1440 ||
        w.start_minute == w.end_minute)
      return Bad("the off-peak window must be HH:MM-HH:MM with two different times");
    FS_RETURN_IF_ERROR(ValidateRates(w.rates, "off-peak"));
  }
  const Limits& l = t.limits;
  for (int64_t v : {l.requests_per_minute, l.input_tokens_per_minute, l.output_tokens_per_minute,
                    l.concurrent_requests, l.monthly_budget})
    if (v < 0 || v > kMaxMicros) return Bad("limits must be in [0, 10^18] (0 = none)");
  return base::Status::Ok();
}

base::Result<int64_t> ParseMoney(std::string_view text) {
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  const auto digits = [](std::string_view s) {
    for (char c : s)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
  };
  if (whole.empty() || whole.size() > 12 || !digits(whole) || frac.size() > 6 || !digits(frac) ||
      (dot != std::string_view::npos && frac.empty()))
    return Bad(fmt::format("\"{}\" is not an amount (digits, at most 6 decimals, below 10^12)", text));
  int64_t micros = 0;
  for (char c : whole) micros = micros * 10 + (c - '0');
  micros *= 1'000'000;
  int64_t scale = 100'000;
  for (char c : frac) {
    micros += (c - '0') * scale;
    scale /= 10;
  }
  return micros;
}

std::string FormatMoney(int64_t micros) {
  const bool negative = micros < 0;
  const uint64_t m = negative ? 0 - static_cast<uint64_t>(micros) : static_cast<uint64_t>(micros);
  std::string frac = fmt::format("{:06d}", m % 1'000'000);
  frac.erase(frac.find_last_not_of('0') + 1);
  return fmt::format("{}{}{}{}", negative ? "-" : "", m / 1'000'000, frac.empty() ? "" : ".", frac);
}

base::Result<std::pair<int, int>> ParseWindow(std::string_view text) {
  int h1 = 0, m1 = 0, h2 = 0, m2 = 0;
  char tail = 0;
  const std::string s(text);
  if (std::sscanf(s.c_str(), "%2d:%2d-%2d:%2d%c", &h1, &m1, &h2, &m2, &tail) != 4 || s.size() != 11 || h1 > 23 ||
      h2 > 23 || m1 > 59 || m2 > 59 || h1 < 0 || h2 < 0 || m1 < 0 || m2 < 0)
    return Bad(fmt::format("\"{}\" is not a window HH:MM-HH:MM (UTC)", text));
  return std::pair<int, int>{h1 * 60 + m1, h2 * 60 + m2};
}

std::string FormatWindow(int start_minute, int end_minute) {
  return fmt::format("{:02d}:{:02d}-{:02d}:{:02d}", start_minute / 60, start_minute % 60, end_minute / 60,
                     end_minute % 60);
}

Json PriceBookJson(const PriceBook& p) {
  Json j = {{"currency", p.currency}, {"per_million_tokens", RatesJson(p.standard)}};
  if (p.off_peak)
    j["off_peak"] = {{"window_utc", FormatWindow(p.off_peak->start_minute, p.off_peak->end_minute)},
                     {"per_million_tokens", RatesJson(p.off_peak->rates)}};
  return j;
}

base::Result<PriceBook> PriceBookFromJson(const Json& j) {
  if (!j.is_object() || !j.contains("currency") || !j["currency"].is_string()) return Bad("price book: no currency");
  PriceBook p;
  p.currency = j["currency"].get<std::string>();
  if (j.contains("per_million_tokens")) {
    FS_ASSIGN_OR_RETURN(p.standard, RatesFromJson(j["per_million_tokens"]));
  }
  if (j.contains("off_peak")) {
    const Json& w = j["off_peak"];
    if (!w.is_object() || !w.contains("window_utc") || !w["window_utc"].is_string())
      return Bad("price book: off_peak needs window_utc");
    FS_ASSIGN_OR_RETURN(auto window, ParseWindow(w["window_utc"].get<std::string>()));
    OffPeak off{window.first, window.second, {}};
    if (w.contains("per_million_tokens")) {
      FS_ASSIGN_OR_RETURN(off.rates, RatesFromJson(w["per_million_tokens"]));
    }
    p.off_peak = off;
  }
  return p;
}

Json LimitsJson(const Limits& l) {
  return {{"requests_per_minute", l.requests_per_minute},
          {"input_tokens_per_minute", l.input_tokens_per_minute},
          {"output_tokens_per_minute", l.output_tokens_per_minute},
          {"concurrent_requests", l.concurrent_requests},
          {"monthly_budget", FormatMoney(l.monthly_budget)}};
}

base::Result<Limits> LimitsFromJson(const Json& j) {
  if (!j.is_object()) return Bad("limits must be an object");
  Limits l;
  const auto count = [&](const char* key, int64_t* out) -> base::Status {
    if (!j.contains(key)) return base::Status::Ok();
    if (!j[key].is_number_integer()) return Bad(fmt::format("limits: \"{}\" must be an integer", key));
    *out = j[key].get<int64_t>();
    return base::Status::Ok();
  };
  FS_RETURN_IF_ERROR(count("requests_per_minute", &l.requests_per_minute));
  FS_RETURN_IF_ERROR(count("input_tokens_per_minute", &l.input_tokens_per_minute));
  FS_RETURN_IF_ERROR(count("output_tokens_per_minute", &l.output_tokens_per_minute));
  FS_RETURN_IF_ERROR(count("concurrent_requests", &l.concurrent_requests));
  FS_ASSIGN_OR_RETURN(l.monthly_budget, MicrosField(j, "monthly_budget"));
  return l;
}

Json TenantJson(const Tenant& t) {
  return {{"name", t.name},          {"cache_namespace", t.cache_namespace}, {"ttl_class", t.ttl_class},
          {"prices", PriceBookJson(t.prices)}, {"limits", LimitsJson(t.limits)},  {"log_text", t.log_text},
          {"created", t.created}};
}

Json KeyJson(const KeyRecord& k) {
  return {{"id", k.id},         {"tenant", k.tenant},   {"label", k.label},
          {"prefix", k.prefix}, {"created", k.created}, {"revoked", k.revoked == 0 ? Json(nullptr) : Json(k.revoked)}};
}

}  // namespace flashserve::meter
