// HTTP/1.1 heads, chunk framing and SSE frames (net/http_wire.h).
#include "net/http_wire.h"

#include <strings.h>

#include <fmt/format.h>

namespace flashserve::net {

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (key.size() == name.size() && strncasecmp(key.data(), name.data(), name.size()) == 0) return value;
  return "";
}

namespace {
int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 && HexDigit(s[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}
}  // namespace

std::string HttpRequest::Query(std::string_view name) const {
  const size_t q = target.find('?');
  if (q == std::string::npos) return "";
  std::string_view query = std::string_view(target).substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return "";
}

const char* StatusReason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 529: return "Overloaded";
    default: return "Unknown";
  }
}

std::string ResponseHead(int status, std::string_view content_type, int64_t content_length, bool keep_alive,
                         const HeaderList& extra_headers) {
  std::string head = fmt::format("HTTP/1.1 {} {}\r\nServer: flashserve\r\n", status, StatusReason(status));
  if (!content_type.empty()) head += fmt::format("Content-Type: {}\r\n", content_type);
  if (content_length >= 0) {
    head += fmt::format("Content-Length: {}\r\n", content_length);
  } else {
    head += "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n";
  }
  head += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : extra_headers) {
    std::string safe = value;  // a CR or LF would end the header: never let a value do that
    for (char& c : safe)
      if (c == '\r' || c == '\n') c = ' ';
    head += fmt::format("{}: {}\r\n", name, safe);
  }
  head += "\r\n";
  return head;
}

std::string Chunk(std::string_view data) {
  if (data.empty()) return {};
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

std::string LastChunk() { return "0\r\n\r\n"; }

std::string SseData(std::string_view payload) { return fmt::format("data: {}\n\n", payload); }

std::string SseDone() { return "data: [DONE]\n\n"; }

std::string SseEvent(std::string_view name, std::string_view payload) {
  return fmt::format("event: {}\ndata: {}\n\n", name, payload);
}

}  // namespace flashserve::net
