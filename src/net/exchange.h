// One HTTP request/response as routes see it: the request, a complete or chunked response, and
// the client-gone signal. Implemented by the HTTP session and test fakes. All methods run on the
// exchange's strand, except Post, which any thread may call.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashserve::net {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent, with the query string
  std::string path;    // target without the query string
  HeaderList headers;  // names as sent
  std::string body;
  // Value of the first header named `name` (case-insensitive); "" when absent.
  std::string Header(std::string_view name) const;
  // Value of the first query parameter `name`, percent-decoded ('+' is a space); "" when absent.
  std::string Query(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HeaderList headers;  // extra headers (Retry-After, Allow, ...)
};

class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual const HttpRequest& request() const = 0;
  // Sends a complete response and ends the exchange. Ignored once ended or closed.
  virtual void Respond(HttpResponse response) = 0;
  // Starts a chunked streaming response (e.g. text/event-stream) with extra `headers`; Write sends one piece,
  // EndStream the terminating chunk (ends the exchange).
  virtual void StartStream(int status, std::string content_type, HeaderList headers = {}) = 0;
  virtual void Write(std::string data) = 0;
  virtual void EndStream() = 0;
  // True once the exchange ended or the client went away: further output is dropped.
  virtual bool closed() const = 0;
  // Runs `task` on this exchange's strand (thread-safe; used by engine-thread sinks).
  virtual void Post(std::function<void()> task) = 0;
  // Runs `task` on the strand after `seconds` (keep-alive ticks). The task runs even when the
  // exchange has ended meanwhile; it checks closed() itself. A task still waiting when the
  // server stops is dropped without running.
  virtual void PostAfter(double seconds, std::function<void()> task) = 0;
  // Called once, on the strand, when the client disconnects before the exchange ended.
  virtual void SetCloseHandler(std::function<void()> handler) = 0;
  // Monotonic seconds (base::MonotonicSeconds) when the request was fully read.
  virtual double start_seconds() const = 0;
};

}  // namespace flashserve::net
