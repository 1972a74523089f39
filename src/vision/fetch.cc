// Remote image URLs through libcurl under a FetchPolicy (vision/fetch.h).
#include "vision/fetch.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>

#include <fmt/format.h>

namespace flashserve::vision {
namespace {

using base::ErrorCode;

base::Error Refused(std::string message) { return base::MakeError(ErrorCode::kInvalidArgument, std::move(message)); }
base::Error Failed(std::string message) { return base::MakeError(ErrorCode::kUnavailable, std::move(message)); }
base::Error TimedOut(double seconds) {
  return base::MakeError(ErrorCode::kTimeout, fmt::format("fetching the image took longer than {} s", seconds));
}

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

struct V4Range {
  uint32_t base;
  int bits;
  const char* reason;
};

constexpr uint32_t Ip(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return a << 24 | b << 16 | c << 8 | d; }

constexpr V4Range kV4NonPublic[] = {
    {Ip(0, 0, 0, 0), 8, "unspecified"},         {Ip(10, 0, 0, 0), 8, "private"},
    {Ip(100, 64, 0, 0), 10, "shared (CGNAT)"},  {Ip(127, 0, 0, 0), 8, "loopback"},
    {Ip(169, 254, 0, 0), 16, "link-local"},     {Ip(172, 16, 0, 0), 12, "private"},
    {Ip(192, 0, 0, 0), 24, "reserved"},         {Ip(192, 0, 2, 0), 24, "documentation"},
    {Ip(192, 168, 0, 0), 16, "private"},        {Ip(198, 18, 0, 0), 15, "benchmarking"},
    {Ip(198, 51, 100, 0), 24, "documentation"}, {Ip(203, 0, 113, 0), 24, "documentation"},
    {Ip(224, 0, 0, 0), 4, "multicast"},         {Ip(240, 0, 0, 0), 4, "reserved"},
};

std::string V4Reason(uint32_t ip) {
  for (const V4Range& r : kV4NonPublic) {
    if ((ip >> (32 - r.bits)) == (r.base >> (32 - r.bits))) return r.reason;
  }
  return "";
}

uint32_t V4At(const uint8_t* b) { return Ip(b[0], b[1], b[2], b[3]); }

std::string V6Reason(const uint8_t* a) {
  static constexpr uint8_t kZero[16] = {};
  const bool first80_zero = std::memcmp(a, kZero, 10) == 0;
  if (first80_zero && a[10] == 0xff && a[11] == 0xff) return V4Reason(V4At(a + 12));  // ::ffff:a.b.c.d
  if (std::memcmp(a, kZero, 15) == 0) return a[15] == 1 ? "loopback" : a[15] == 0 ? "unspecified" : "reserved";
  if (first80_zero && a[10] == 0 && a[11] == 0) return "reserved";  // IPv4-compatible (deprecated)
  static constexpr uint8_t kNat64[12] = {0, 0x64, 0xff, 0x9b};
  if (std::memcmp(a, kNat64, 12) == 0) return V4Reason(V4At(a + 12));
  if (a[0] == 0x20 && a[1] == 0x02) return V4Reason(V4At(a + 2));  // 6to4
  if ((a[0] & 0xfe) == 0xfc) return "private";                     // fc00::/7 unique local
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return "link-local";   // fe80::/10
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) return "site-local";   // fec0::/10
  if (a[0] == 0xff) return "multicast";
  if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && a[3] == 0xb8) return "documentation";
  if (a[0] == 0x01 && std::memcmp(a + 1, kZero, 7) == 0) return "discard";  // 100::/64
  return "";
}

std::string AddressText(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text, sizeof(text));
  else if (address->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text, sizeof(text));
  return text;
}

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// What one transfer collects; the socket callback refuses addresses the policy forbids.
struct Transfer {
  const FetchPolicy* policy = nullptr;
  std::vector<uint8_t> body;
  bool too_large = false;
  std::string refused_address;  // "10.0.0.5 (private)" when the socket callback said no
};

curl_socket_t OpenSocket(void* clientp, curlsocktype, curl_sockaddr* address) {
  auto* t = static_cast<Transfer*>(clientp);
  if (!t->policy->allow_private) {
    const std::string reason = NonPublicReason(&address->addr);
    if (!reason.empty()) {
      t->refused_address = fmt::format("{} ({})", AddressText(&address->addr), reason);
      return CURL_SOCKET_BAD;
    }
  }
  return socket(address->family, address->socktype, address->protocol);
}

size_t Collect(char* data, size_t size, size_t count, void* clientp) {
  auto* t = static_cast<Transfer*>(clientp);
  const size_t n = size * count;
  if (static_cast<int64_t>(t->body.size() + n) > t->policy->max_bytes) {
    t->too_large = true;
    return 0;  // aborts the transfer
  }
  t->body.insert(t->body.end(), data, data + n);
  return n;
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};

// The scheme and host of `url`, checked against the policy.
base::Result<std::string> CheckedHost(std::string_view url, const FetchPolicy& policy) {
  std::unique_ptr<CURLU, CurlDeleter> u(curl_url());
  const std::string text(url);
  if (curl_url_set(u.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK) return Refused("the image URL is not a valid URL");
  char* scheme = nullptr;
  char* host = nullptr;
  curl_url_get(u.get(), CURLUPART_SCHEME, &scheme, 0);
  curl_url_get(u.get(), CURLUPART_HOST, &host, 0);
  const std::string s = scheme != nullptr ? Lower(scheme) : "", h = host != nullptr ? Lower(host) : "";
  curl_free(scheme);
  curl_free(host);
  if (s != "http" && s != "https") return Refused(fmt::format("image URLs must be http or https, not '{}'", s));
  if (h.empty()) return Refused("the image URL names no host");
  if (!HostAllowed(h, policy.hosts)) {
    return Refused(fmt::format("the host '{}' is not among the hosts this server fetches images from "
                               "(--image-fetch-hosts)", h));
  }
  return h;
}

// One request to `url` within `seconds`; *redirect receives the Location of a 3xx answer.
base::Result<std::vector<uint8_t>> FetchOnce(const std::string& url, const std::string& host, const FetchPolicy& policy,
                                             double seconds, std::string* redirect) {
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return base::MakeError(ErrorCode::kResourceExhausted, "cannot start an image fetch");
  Transfer t;
  t.policy = &policy;
  const long ms = std::max(1L, static_cast<long>(seconds * 1000));
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROXY, "");  // direct connections only: the address check sees the target
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms);
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(policy.max_bytes));
  curl_easy_setopt(c, CURLOPT_USERAGENT, "flashserve-image-fetch");
  curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, OpenSocket);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  const CURLcode rc = curl_easy_perform(c);
  if (!t.refused_address.empty()) {
    return Refused(fmt::format("the host '{}' resolves to {}, which this server does not connect to for images "
                               "(--image-fetch-allow-private allows it)", host, t.refused_address));
  }
  if (t.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
    return base::MakeError(ErrorCode::kResourceExhausted,
                           fmt::format("the image at '{}' is over the limit of {} bytes", host, policy.max_bytes));
  }
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return base::MakeError(ErrorCode::kTimeout, fmt::format("fetching the image from '{}' took longer than {} s", host,
                                                            policy.timeout_seconds));
  }
  if (rc != CURLE_OK) return Failed(fmt::format("cannot fetch the image from '{}': {}", host, curl_easy_strerror(rc)));
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 300 && status < 400) {
    char* location = nullptr;
    curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &location);
    if (location != nullptr) {
      *redirect = location;
      return std::vector<uint8_t>();
    }
  }
  if (status != 200) return Failed(fmt::format("the image URL on '{}' answered HTTP {}", host, status));
  return std::move(t.body);
}

}  // namespace

bool HostAllowed(std::string_view host, const std::vector<std::string>& patterns) {
  const std::string h = Lower(host);
  for (const std::string& raw : patterns) {
    const std::string p = Lower(raw);
    if (p == "*" || p == h) return true;
    if (p.starts_with("*.") && h.size() > p.size() - 1 && h.ends_with(std::string_view(p).substr(1))) return true;
  }
  return false;
}

std::string NonPublicReason(const sockaddr* address) {
  if (address->sa_family == AF_INET) return V4Reason(ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr));
  if (address->sa_family == AF_INET6) return V6Reason(reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr.s6_addr);
  return "not an internet address";
}

base::Error RemoteFetchDisabled() {
  return Refused("this server does not fetch remote image URLs (the operator enables it with --image-fetch-hosts); "
                 "send the picture inline as a data URL (data:image/png;base64,...) or a base64 image block");
}

base::Result<std::vector<uint8_t>> FetchImage(std::string_view url, const FetchPolicy& policy) {
  if (!policy.enabled()) return RemoteFetchDisabled();
  InitCurlOnce();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(policy.timeout_seconds);
  std::string current(url);
  for (int hop = 0; hop <= policy.max_redirects; ++hop) {
    FS_ASSIGN_OR_RETURN(std::string host, CheckedHost(current, policy));
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return TimedOut(policy.timeout_seconds);
    std::string redirect;
    FS_ASSIGN_OR_RETURN(std::vector<uint8_t> body, FetchOnce(current, host, policy, left, &redirect));
    if (redirect.empty()) return body;
    current = std::move(redirect);
  }
  return Refused(fmt::format("the image URL redirected more than {} times", policy.max_redirects));
}

}  // namespace flashserve::vision
