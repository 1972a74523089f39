// Test doubles for the api tests (not part of fs_api): the byte tokenizer and scripted Service of
// api/fake_service.h, and an in-memory net::Exchange.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/fake_service.h"
#include "net/exchange.h"
#include "encoding/prompt.h"
#include "serve/service.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::api::testing {

// A net::Exchange that records the response; Post-ed tasks wait for RunTasks().
class FakeExchange final : public net::Exchange {
 public:
  explicit FakeExchange(std::string body, std::string method = "POST", std::string path = "/v1/chat/completions") {
    request_.method = std::move(method);
    request_.path = request_.target = std::move(path);
    request_.body = std::move(body);
  }
  const net::HttpRequest& request() const override { return request_; }
  void Respond(net::HttpResponse r) override {
    if (closed()) return;
    ended = true;
    status = r.status;
    body = r.body;
    headers = r.headers;
  }
  void StartStream(int s, std::string ct, net::HeaderList h) override {
    if (closed()) return;
    status = s;
    content_type = ct;
    headers = std::move(h);
    streaming = true;
  }
  void Write(std::string data) override {
    if (!closed()) body += data;
  }
  void EndStream() override {
    if (!closed()) ended = true;
  }
  bool closed() const override { return ended || gone; }
  void Post(std::function<void()> task) override {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  void PostAfter(double seconds, std::function<void()> task) override {
    std::lock_guard<std::mutex> lock(mu_);
    delayed_.emplace_back(seconds, std::move(task));
  }
  void SetCloseHandler(std::function<void()> h) override { on_close_ = std::move(h); }
  double start_seconds() const override { return 0.0; }

  // Lets the delayed tasks' time come: they run on the next RunTasks. Returns how many.
  int ElapseDelayed() {
    std::lock_guard<std::mutex> lock(mu_);
    const int num = static_cast<int>(delayed_.size());
    for (auto& [seconds, task] : delayed_) tasks_.push_back(std::move(task));
    delayed_.clear();
    return num;
  }

  int RunTasks() {
    int num = 0;
    for (;;) {
      std::function<void()> task;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (tasks_.empty()) return num;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
      ++num;
    }
  }
  void Disconnect() {
    gone = true;
    if (on_close_) on_close_();
  }

  int status = 0;
  std::string content_type;
  std::string body;
  net::HeaderList headers;
  bool streaming = false, ended = false, gone = false;

 private:
  net::HttpRequest request_;
  std::mutex mu_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::pair<double, std::function<void()>>> delayed_;
  std::function<void()> on_close_;
};

}  // namespace flashserve::api::testing
