// Rate-limit headers and refusals (meter/limit_http.h).
#include "meter/limit_http.h"

#include "base/wall_time.h"
#include "fmt/format.h"
#include "protocol/headers.h"

namespace flashserve::meter {

net::HeaderList RateLimitHeaders(const LimitDecision& d, net::ErrorDialect dialect, int64_t now_s) {
  net::HeaderList h;
  const auto add = [&](const char* openai, const char* anthropic, int64_t limit, int64_t remaining, int reset) {
    if (limit <= 0) return;
    if (dialect == net::ErrorDialect::kAnthropic) {
      h.emplace_back(fmt::format("anthropic-ratelimit-{}-limit", anthropic), std::to_string(limit));
      h.emplace_back(fmt::format("anthropic-ratelimit-{}-remaining", anthropic), std::to_string(remaining));
      h.emplace_back(fmt::format("anthropic-ratelimit-{}-reset", anthropic),
                     base::FormatUtc(now_s + reset, "%Y-%m-%dT%H:%M:%SZ"));
    } else if (openai != nullptr) {
      h.emplace_back(fmt::format("x-ratelimit-limit-{}", openai), std::to_string(limit));
      h.emplace_back(fmt::format("x-ratelimit-remaining-{}", openai), std::to_string(remaining));
      h.emplace_back(fmt::format("x-ratelimit-reset-{}", openai), fmt::format("{}s", reset));
    }
  };
  add("requests", "requests", d.requests_limit, d.requests_remaining, d.requests_reset_s);
  add("tokens", "input-tokens", d.input_limit, d.input_remaining, d.input_reset_s);
  add(nullptr, "output-tokens", d.output_limit, d.output_remaining, d.output_reset_s);
  return h;
}

namespace {

net::ApiError LimitError(const LimitDecision& d, int64_t prompt_tokens) {
  if (d.never)
    return net::InvalidRequest(fmt::format("the prompt ({} tokens) exceeds the tenant's input tokens per minute ({})",
                                           prompt_tokens, d.input_limit),
                               "", "input_tokens_limit_exceeded");
  net::ApiError e = net::RateLimited("rate limit reached: the tenant's " + d.reason + "; retry later", d.retry_after_s);
  if (d.budget) {
    e.message = "the tenant's monthly budget is spent; requests resume next month or when the operator raises it";
    e.code = "insufficient_quota";
  }
  return e;
}

}  // namespace

net::HttpResponse LimitRefusal(const LimitDecision& d, int64_t prompt_tokens, net::ErrorDialect dialect,
                               int64_t now_s) {
  net::HttpResponse refused = net::ErrorResponse(LimitError(d, prompt_tokens), dialect);
  for (auto& header : RateLimitHeaders(d, dialect, now_s)) refused.headers.push_back(std::move(header));
  if (!d.never) refused.headers.emplace_back(protocol::kLimitHeader, "tenant");
  return refused;
}

}  // namespace flashserve::meter
