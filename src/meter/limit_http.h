// A tenant's limits on the wire, the same at a worker and at the router: the rate-limit headers
// of a decision (OpenAI's x-ratelimit-*, Anthropic's anthropic-ratelimit-* on Messages) and the
// answer to a refused request. Pure functions; any thread.
#pragma once

#include <cstdint>

#include "meter/limiter.h"
#include "net/api_error.h"

namespace flashserve::meter {

// Only limits that are set appear. OpenAI: requests, and input tokens as "tokens" (resets as
// "Ns"); Anthropic: requests, input and output tokens (resets as RFC 3339 times).
net::HeaderList RateLimitHeaders(const LimitDecision& d, net::ErrorDialect dialect, int64_t now_s);

// A refused request's response: 400 input_tokens_limit_exceeded when the prompt alone exceeds
// the input tokens per minute (no wait helps); 429 insufficient_quota for a spent monthly
// budget; else 429 with Retry-After. With the decision's rate-limit headers and, when waiting
// helps, `x-flashserve-limit: tenant` (a router passes it on rather than trying another worker).
net::HttpResponse LimitRefusal(const LimitDecision& d, int64_t prompt_tokens, net::ErrorDialect dialect,
                               int64_t now_s);

}  // namespace flashserve::meter
