// Usage records, prices and queries as values (meter/usage.h).
#include "meter/usage.h"

#include <cctype>
#include <cstdio>
#include <climits>
#include <ctime>

#include "fmt/format.h"

namespace flashserve::meter {

namespace {
constexpr std::pair<UsageStatus, std::string_view> kStatusNames[] = {
    {UsageStatus::kInterrupted, "interrupted"}, {UsageStatus::kCompleted, "completed"},
    {UsageStatus::kLength, "length"},           {UsageStatus::kCancelled, "cancelled"},
    {UsageStatus::kFailed, "failed"}};

constexpr std::pair<UsageGroup, std::string_view> kGroupNames[] = {
    {UsageGroup::kTotal, "total"}, {UsageGroup::kTenant, "tenant"}, {UsageGroup::kKey, "key"},
    {UsageGroup::kModel, "model"}, {UsageGroup::kDay, "day"},       {UsageGroup::kHour, "hour"}};

// tokens x micro-units per million / 10^6, exact in 128 bits.
__int128 Scaled(int64_t tokens, int64_t rate) { return static_cast<__int128>(tokens) * rate; }
}  // namespace

std::string_view UsageStatusName(UsageStatus s) {
  for (const auto& [status, name] : kStatusNames)
    if (status == s) return name;
  return "interrupted";
}

std::optional<UsageStatus> ParseUsageStatus(std::string_view n) {
  for (const auto& [status, name] : kStatusNames)
    if (name == n) return status;
  return std::nullopt;
}

std::optional<UsageGroup> ParseUsageGroup(std::string_view n) {
  for (const auto& [group, name] : kGroupNames)
    if (name == n) return group;
  return std::nullopt;
}

void PriceRecord(UsageRecord* r) {
  const bool partial = r->status == UsageStatus::kCancelled || r->status == UsageStatus::kInterrupted;
  if (r->status == UsageStatus::kFailed || (partial && r->output_tokens == 0)) {
    r->cost = 0;
    return;
  }
  const __int128 total = Scaled(r->input_uncached, r->rates.input) + Scaled(r->cached(), r->rates.cached) +
                         Scaled(r->output_tokens, r->rates.output);
  const __int128 cost = (total + 500'000) / 1'000'000;
  r->cost = cost > INT64_MAX ? INT64_MAX : static_cast<int64_t>(cost);
}

namespace {
// The number in s[at, at + n), all digits; -1 when any is not.
int Digits(const std::string& s, size_t at, size_t n) {
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}
}  // namespace

base::Result<int64_t> ParseUsageTime(std::string_view text) {
  const std::string s(text);
  if (!s.empty() && s.size() <= 12 && s.find_first_not_of("0123456789") == std::string::npos)
    return static_cast<int64_t>(std::stoll(s)) * 1'000'000;
  // YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ, every field its digits exactly (no signs, no spaces).
  const bool date_only = s.size() == 10;
  const bool full = s.size() == 20 && s[10] == 'T' && s[13] == ':' && s[16] == ':' && s[19] == 'Z';
  const bool dashes = s.size() >= 10 && s[4] == '-' && s[7] == '-';
  const int y = dashes ? Digits(s, 0, 4) : -1, mo = dashes ? Digits(s, 5, 2) : -1, d = dashes ? Digits(s, 8, 2) : -1;
  const int h = full ? Digits(s, 11, 2) : 0, mi = full ? Digits(s, 14, 2) : 0, sec = full ? Digits(s, 17, 2) : 0;
  if (!(date_only || full) || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 ||
      mi > 59 || sec < 0 || sec > 59)
    return base::Error(base::ErrorCode::kInvalidArgument,
                       fmt::format("\"{}\" is not a time: YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ (UTC) or Unix seconds", text));
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  const std::time_t t = timegm(&tm);
  std::tm back{};
  gmtime_r(&t, &back);
  if (back.tm_mday != d || back.tm_mon != mo - 1)  // 2026-02-31 would roll into March
    return base::Error(base::ErrorCode::kInvalidArgument, fmt::format("\"{}\" is not a calendar date", text));
  return static_cast<int64_t>(t) * 1'000'000;
}

base::Result<UsageQuery> MakeUsageQuery(std::string_view from, std::string_view to, std::string tenant,
                                        std::string_view group, int64_t now_us) {
  UsageQuery q;
  if (from.empty()) {
    const std::time_t now = now_us / 1'000'000;
    std::tm tm{};
    gmtime_r(&now, &tm);
    tm.tm_mday = 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    q.from_us = static_cast<int64_t>(timegm(&tm)) * 1'000'000;
  } else {
    FS_ASSIGN_OR_RETURN(q.from_us, ParseUsageTime(from));
  }
  if (to.empty()) {
    q.to_us = now_us + 1;
  } else {
    FS_ASSIGN_OR_RETURN(q.to_us, ParseUsageTime(to));
  }
  if (q.to_us <= q.from_us) return base::Error(base::ErrorCode::kInvalidArgument, "\"to\" must be after \"from\"");
  if (!tenant.empty() && !ValidName(tenant))
    return base::Error(base::ErrorCode::kInvalidArgument, "tenant must match [A-Za-z0-9_.-]{1,64}");
  q.tenant = std::move(tenant);
  const auto g = ParseUsageGroup(group.empty() ? "tenant" : group);
  if (!g) return base::Error(base::ErrorCode::kInvalidArgument, "group by one of total, tenant, key, model, day, hour");
  q.group = *g;
  return q;
}

Json UsageRowJson(const UsageRow& r) {
  return {{"group", r.group},
          {"currency", r.currency},
          {"requests", r.requests},
          {"input_tokens", r.input_uncached + r.cached_memory + r.cached_disk + r.cached_shared + r.cached_prefill},
          {"input_uncached_tokens", r.input_uncached},
          {"cached_tokens",
           {{"memory", r.cached_memory}, {"disk", r.cached_disk}, {"shared", r.cached_shared},
            {"prefill", r.cached_prefill}}},
          {"output_tokens", r.output_tokens},
          {"reasoning_tokens", r.reasoning_tokens},
          {"speculative", {{"drafted", r.speculative_drafted}, {"accepted", r.speculative_accepted}}},
          {"cost", FormatMoney(r.cost)},
          {"cost_micros", r.cost}};
}

}  // namespace flashserve::meter
