// Test helpers for the transfer room: a sink that records every call, a raw socket that writes
// hand-made (or deliberately broken) frames, and random payloads. Tests only; thread-safe sink.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/clock.h"
#include "transfer/receiver.h"
#include "transfer/socket_io.h"
#include "transfer/wire.h"

namespace flashserve::transfer::testutil {

inline const char kFingerprint[] = "0123abcd";

// Records every sink call; Wait* block until a transfer reached its terminal call.
class RecordingSink final : public TransferSink {
 public:
  struct Record {
    std::optional<Hello> hello;
    std::vector<TransferObject> objects;
    std::optional<EndSummary> end;
    std::optional<base::Error> error;
    double terminal_at_s = 0;  // base::MonotonicSeconds() of OnEnd / OnFailed
    int num_terminal = 0;
  };

  void OnHello(const TransferId& id, const Hello& hello) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_FALSE(records_[id].hello.has_value()) << "second OnHello";
    records_[id].hello = hello;
  }
  void OnObject(const TransferId& id, TransferObject object) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_TRUE(records_[id].hello.has_value()) << "OnObject before OnHello";
    records_[id].objects.push_back(std::move(object));
  }
  void OnEnd(const TransferId& id, const EndSummary& end) override {
    std::lock_guard<std::mutex> lock(mu_);
    records_[id].end = end;
    Terminal(records_[id]);
  }
  void OnFailed(const TransferId& id, const base::Error& error) override {
    std::lock_guard<std::mutex> lock(mu_);
    records_[id].error = error;
    Terminal(records_[id]);
  }

  // The record once the transfer ended or failed; nullopt after timeout_s.
  std::optional<Record> WaitDone(const TransferId& id, double timeout_s = 5.0) {
    std::unique_lock<std::mutex> lock(mu_);
    const bool done = cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                                   [&] { return records_.count(id) && records_[id].num_terminal > 0; });
    if (!done) return std::nullopt;
    return records_[id];
  }
  size_t num_transfers() {
    std::lock_guard<std::mutex> lock(mu_);
    return records_.size();
  }

 private:
  void Terminal(Record& r) {
    EXPECT_EQ(r.num_terminal, 0) << "second terminal call";
    r.num_terminal += 1;
    r.terminal_at_s = base::MonotonicSeconds();
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<TransferId, Record> records_;
};

// A plain client socket for writing raw frames.
class RawClient {
 public:
  explicit RawClient(int port) {
    auto fd = ConnectTcp(HostPort{"127.0.0.1", port}, 2.0, -1);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (fd.ok()) fd_ = std::move(fd).value();
  }
  bool Write(std::string_view bytes) {
    struct iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
    return WriteAll(fd_.get(), &iov, 1).ok();
  }
  void Close() { fd_.reset(); }
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
};

inline Hello TestHello(int64_t expected_objects = -1) {
  return Hello{kFingerprint, "tenant-a", 4096, expected_objects};
}

inline std::string ObjectPayload(const ObjectMeta& meta, std::string_view bytes) {
  std::string out(kObjectMetaBytes, '\0');
  EncodeObjectMeta(meta, out.data());
  out.append(bytes);
  return out;
}

inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t r = rng();
    std::memcpy(out.data() + i, &r, std::min<size_t>(8, n - i));
  }
  return out;
}

inline kv::BlockHash HashOf(int i) {
  kv::BlockHash h{};
  h[0] = static_cast<uint8_t>(i);
  h[31] = static_cast<uint8_t>(i * 7 + 1);
  return h;
}

}  // namespace flashserve::transfer::testutil
