// Test doubles shared by the api tests and the HTTP fuzz target (not part of fs_api; no gtest):
// a byte-level tokenizer where token id == byte value plus the DeepSeek control tokens, and a
// scripted serve::Service whose events are delivered by the caller or a background thread.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "encoding/prompt.h"
#include "serve/service.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::api::testing {

inline constexpr int32_t kBos = 256;
inline constexpr int32_t kEos = 257;
inline constexpr int32_t kThinkEnd = 259;  // "</think>" (kV4ControlTokens[1])

// Ids 0..255 = bytes, 256 BOS, 257 EOS, 258.. the V4 control tokens in kV4ControlTokens order.
inline std::unique_ptr<tokenizer::Tokenizer> ByteTokenizer() {
  using Json = nlohmann::json;
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[tokenizer::BytesToByteLevel(std::string(1, static_cast<char>(b)))] = b;
  Json added = Json::array();
  auto add = [&](int id, std::string_view text) {
    added.push_back({{"id", id}, {"content", std::string(text)}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  };
  add(kBos, encoding::kBosToken);
  add(kEos, encoding::kEosToken);
  int id = 258;
  for (std::string_view t : tokenizer::kV4ControlTokens) add(id++, t);
  Json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
  Json doc = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
              {"normalizer", nullptr}, {"pre_tokenizer", byte_level}, {"post_processor", nullptr},
              {"decoder", byte_level},
              {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                         {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                         {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", Json::array()}}}};
  auto tok = tokenizer::Tokenizer::LoadFromJson(doc.dump());
  return tok.ok() ? std::move(tok).value() : nullptr;  // callers check
}

// Token ids of `text` under ByteTokenizer (one per byte).
inline std::vector<int32_t> Bytes(std::string_view text) {
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

// A Service that answers each request with `reply` (ids, `tokens_per_event` tokens per event, as
// a speculative step may make several; every choice),
// then a stop (or length when `finish_length`). Events queue up until Deliver() (or the
// background thread) hands them to the sinks, as the engine thread would.
class FakeService final : public serve::Service {
 public:
  FakeService() { info.name = "test-model"; info.vocab_size = 290; info.max_context = 4096; info.eos_token_id = kEos; info.bos_token_id = kBos; }
  ~FakeService() override { StopThread(); }

  serve::ModelInfo info;
  std::vector<int32_t> reply = Bytes("Hello world");
  bool finish_length = false;
  size_t tokens_per_event = 1;
  int64_t cached_tokens = 0;
  std::optional<base::Error> reject;  // Submit fails with this

  base::Status Submit(protocol::GenerateRequest request, serve::EventSink sink) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (reject) return *reject;
    submitted.push_back(request);
    Req& r = reqs_[request.id];
    r.sink = std::move(sink);
    r.prompt_tokens = static_cast<int64_t>(request.prompt.size());
    r.n = request.n;
    const size_t len = std::min<size_t>(reply.size(), static_cast<size_t>(request.max_tokens));
    for (size_t begin = 0; begin < len; begin += tokens_per_event) {
      for (int c = 0; c < request.n; ++c) {
        protocol::GenerateEvent e;
        e.choice = c;
        for (size_t i = begin; i < std::min(len, begin + tokens_per_event); ++i) {
          e.tokens.push_back({reply[i], -0.5f, {}});
          if (request.sampling.top_logprobs > 0) e.tokens.back().top_logprobs = {{reply[i], -0.5f}, {'x', -1.5f}};
        }
        queue_.emplace_back(request.id, e);
      }
    }
    for (int c = 0; c < request.n; ++c) {
      protocol::GenerateEvent e;
      e.choice = c;
      e.finish = finish_length || len < reply.size() ? protocol::FinishReason::kLength : protocol::FinishReason::kStop;
      e.request_done = c + 1 == request.n;
      queue_.emplace_back(request.id, e);
    }
    return base::Status::Ok();
  }

  void Cancel(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled.push_back(id);
    auto it = reqs_.find(id);
    if (it == reqs_.end() || it->second.done) return;
    std::erase_if(queue_, [&](const auto& q) { return q.first == id; });
    for (int c = 0; c < it->second.n; ++c) {
      protocol::GenerateEvent e;
      e.choice = c;
      e.finish = protocol::FinishReason::kCancelled;
      e.request_done = c + 1 == it->second.n;
      queue_.emplace_back(id, e);
    }
  }

  serve::ServiceStats Stats() const override {
    serve::ServiceStats s;
    s.running = 2;
    s.state_pool_capacity = 1000;
    s.prompt_tokens_total = 42;
    return s;
  }
  serve::ModelInfo Info() const override { return info; }

  // Delivers every queued event (on the calling thread); returns how many.
  int Deliver(int max_events = 1 << 30) {
    int num = 0;
    while (num < max_events) {
      std::pair<std::string, protocol::GenerateEvent> next;
      serve::EventSink sink;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (queue_.empty()) break;
        next = std::move(queue_.front());
        queue_.pop_front();
        Req& r = reqs_[next.first];
        if (r.done) continue;
        protocol::GenerateEvent& e = next.second;
        r.completion_tokens += static_cast<int64_t>(e.tokens.size());
        if (e.request_done) {
          r.done = true;
          e.usage.prompt_tokens = r.prompt_tokens;
          e.usage.completion_tokens = r.completion_tokens;
          e.usage.cached_tokens = cached_tokens;
          e.usage.cached_memory = cached_tokens;
        }
        sink = r.sink;
      }
      sink(next.second);
      ++num;
    }
    return num;
  }

  // A background thread delivering one event every `gap`.
  void StartThread(std::chrono::microseconds gap) {
    running_ = true;
    thread_ = std::thread([this, gap] {
      while (running_) {
        if (Deliver(1) == 0 || gap.count() > 0) std::this_thread::sleep_for(gap.count() > 0 ? gap : std::chrono::microseconds(500));
      }
    });
  }
  void StopThread() {
    running_ = false;
    if (thread_.joinable()) thread_.join();
  }
  // Drops every sink (and what they hold) without delivering, and forgets every request (call
  // when none is in flight).
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.clear();
    reqs_.clear();
    submitted.clear();
    cancelled.clear();
  }
  std::vector<std::string> Cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled;
  }

  std::vector<protocol::GenerateRequest> submitted;
  std::vector<std::string> cancelled;

 private:
  struct Req {
    serve::EventSink sink;
    int64_t prompt_tokens = 0, completion_tokens = 0;
    int n = 1;
    bool done = false;
  };
  std::mutex mu_;
  std::map<std::string, Req> reqs_;
  std::deque<std::pair<std::string, protocol::GenerateEvent>> queue_;
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace flashserve::api::testing
