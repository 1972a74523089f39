// Remote image URLs (http, https) under the operator's policy: a host allowlist, size and time
// limits, redirects re-checked hop by hop, and no connection to loopback, private, link-local or
// other non-public addresses unless allowed (checked on every socket libcurl opens, after DNS, so
// a public name cannot point at an internal service). Blocking; any thread; no shared state.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace flashserve::vision {

struct FetchPolicy {
  // Hosts pictures may come from: exact names or addresses, "*.example.com" (its subdomains) or
  // "*" (any host). Empty: remote URLs are refused.
  std::vector<std::string> hosts;
  bool allow_private = false;  // loopback, private, link-local, ... addresses too
  int64_t max_bytes = 20 << 20;
  double timeout_seconds = 10;  // the whole fetch, redirects included
  int max_redirects = 3;
  bool enabled() const { return !hosts.empty(); }
};

// True when `host` (any case; IPv6 literals in brackets) matches one of `patterns`.
bool HostAllowed(std::string_view host, const std::vector<std::string>& patterns);

// Why `address` is not a public unicast address ("loopback", "private", "link-local", ...), or ""
// when it is one. IPv4-mapped IPv6 addresses are judged by their IPv4 address.
std::string NonPublicReason(const sockaddr* address);

// The refusal of a remote URL by a server that does not fetch them, saying how to enable it.
base::Error RemoteFetchDisabled();

// The body of a 200 answer to `url`. kInvalidArgument: refused by the policy (host, scheme,
// address, redirects, not a URL); kUnavailable: unreachable or another status; kTimeout: over
// the time limit; kResourceExhausted: over max_bytes. Messages name the URL's host.
base::Result<std::vector<uint8_t>> FetchImage(std::string_view url, const FetchPolicy& policy);

}  // namespace flashserve::vision
