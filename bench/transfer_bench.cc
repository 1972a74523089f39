// Transfer benchmark: throughput of one TransferSender -> TransferReceiver stream over loopback
// (framing, checksums on both sides, a fresh receive buffer per object, delivery to a sink that
// drops the bytes), next to a plain loopback socket copy of the same bytes (the floor: one
// send/recv pair, reused buffers, no framing) and Checksum64 alone. Prints; asserts nothing.
//
//   transfer_bench [--gb G] [--object-mb M] [--rounds R]
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "transfer/receiver.h"
#include "transfer/sender.h"
#include "transfer/socket_io.h"

namespace {

using namespace flashserve;
using namespace flashserve::transfer;

struct Flags {
  double gb = 1.0;
  int64_t object_mb = 4;
  int rounds = 3;
};

// Counts what arrives and signals the end.
class CountingSink final : public TransferSink {
 public:
  void OnHello(const TransferId&, const Hello&) override {}
  void OnObject(const TransferId&, TransferObject object) override { bytes_ += object.payload->size(); }
  void OnEnd(const TransferId&, const EndSummary&) override { Done(true); }
  void OnFailed(const TransferId&, const base::Error& error) override {
    std::fprintf(stderr, "transfer failed: %s\n", error.ToString().c_str());
    Done(false);
  }
  bool Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    done_ = false;
    return ok_;
  }
  uint64_t bytes() const { return bytes_.load(); }

 private:
  void Done(bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    ok_ = ok;
    cv_.notify_all();
  }
  std::atomic<uint64_t> bytes_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false, ok_ = false;
};

std::vector<Payload> MakePayloads(size_t object_bytes, int count) {
  std::vector<Payload> out;
  for (int i = 0; i < count; ++i) {
    std::string s(object_bytes, '\0');
    for (size_t j = 0; j < s.size(); j += 64) s[j] = static_cast<char>(i * 31 + j);
    out.push_back(base::MakeSharedBytes(std::move(s)));
  }
  return out;
}

// Seconds to stream num_objects objects through the transfer room (0 on failure).
double RunTransfer(const std::vector<Payload>& payloads, int64_t num_objects, CountingSink& sink, int port) {
  SenderOptions o;
  o.address = "127.0.0.1:" + std::to_string(port);
  o.transfer_id = NewTransferId();
  o.hello = Hello{"bench", "", num_objects * 128, num_objects};
  const double t0 = base::MonotonicSeconds();
  auto sender = TransferSender::Start(o);
  if (!sender.ok()) return 0;
  const int64_t pace_bytes = o.max_queued_bytes / 2;  // the engine would pace like this too
  for (int64_t i = 0; i < num_objects; ++i) {
    while ((*sender)->stats().queued_bytes > pace_bytes) std::this_thread::sleep_for(std::chrono::microseconds(200));
    kv::BlockHash hash{};
    std::memcpy(hash.data(), &i, sizeof i);
    const Payload& p = payloads[static_cast<size_t>(i) % payloads.size()];
    if (!(*sender)->Send(ObjectKind::kBlock, hash, 128, p).ok()) return 0;
  }
  if (!(*sender)->Finish().ok()) return 0;
  if (!sink.Wait()) return 0;
  return base::MonotonicSeconds() - t0;
}

// Seconds for a plain loopback TCP copy of the same bytes (0 on failure).
double RunPlainSocket(const std::vector<Payload>& payloads, int64_t num_objects) {
  int port = 0;
  auto listener = ListenTcp(HostPort{"127.0.0.1", 0}, &port);
  if (!listener.ok()) return 0;
  const uint64_t total = static_cast<uint64_t>(num_objects) * payloads[0]->size();
  std::atomic<bool> ok{true};
  const double t0 = base::MonotonicSeconds();
  std::thread reader([&] {
    UniqueFd fd(::accept(listener->get(), nullptr, nullptr));
    std::string buf(payloads[0]->size(), '\0');
    uint64_t got = 0;
    while (got < total) {
      auto n = ReadSome(fd.get(), buf.data(), buf.size());
      if (!n.ok() || *n == 0) {
        ok = false;
        return;
      }
      got += *n;
    }
  });
  auto fd = ConnectTcp(HostPort{"127.0.0.1", port}, 2.0, -1);
  for (int64_t i = 0; fd.ok() && i < num_objects; ++i) {
    const Payload& p = payloads[static_cast<size_t>(i) % payloads.size()];
    struct iovec iov{const_cast<char*>(p->data()), p->size()};
    if (!WriteAll(fd->get(), &iov, 1).ok()) ok = false;
  }
  reader.join();
  const double seconds = base::MonotonicSeconds() - t0;
  return ok && fd.ok() ? seconds : 0;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i];
    if (name == "--gb") f.gb = std::atof(argv[i + 1]);
    else if (name == "--object-mb") f.object_mb = std::atoll(argv[i + 1]);
    else if (name == "--rounds") f.rounds = std::atoi(argv[i + 1]);
    else std::fprintf(stderr, "unknown flag %s\n", argv[i]);
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  const size_t object_bytes = static_cast<size_t>(flags.object_mb) << 20;
  const int64_t num_objects = static_cast<int64_t>(flags.gb * (1ull << 30) / static_cast<double>(object_bytes));
  const double gb = static_cast<double>(num_objects) * static_cast<double>(object_bytes) / 1e9;
  const auto payloads = MakePayloads(object_bytes, 16);  // 16 distinct buffers: beyond the caches
  std::printf("transfer_bench: %lld objects x %zu MiB = %.2f GB per round, %d rounds, loopback\n",
              static_cast<long long>(num_objects), object_bytes >> 20, gb, flags.rounds);

  const double c0 = base::MonotonicSeconds();
  uint64_t sink_value = 0;
  for (int64_t i = 0; i < num_objects; ++i) sink_value ^= base::Checksum64(*payloads[i % payloads.size()]);
  std::printf("  Checksum64 alone          %6.2f GB/s (one core)  [%llx]\n", gb / (base::MonotonicSeconds() - c0),
              static_cast<unsigned long long>(sink_value & 0xf));

  CountingSink sink;
  ReceiverOptions options;
  options.model_fingerprint = "bench";
  auto receiver = TransferReceiver::Start(options, &sink);
  if (!receiver.ok()) {
    std::fprintf(stderr, "receiver: %s\n", receiver.status().ToString().c_str());
    return 1;
  }
  for (int round = 0; round < flags.rounds; ++round) {
    const double plain = RunPlainSocket(payloads, num_objects);
    const double framed = RunTransfer(payloads, num_objects, sink, (*receiver)->port());
    if (plain <= 0 || framed <= 0) {
      std::fprintf(stderr, "round %d failed\n", round);
      return 1;
    }
    std::printf("  round %d: plain socket %6.2f GB/s   transfer %6.2f GB/s   (transfer/plain %.2f)\n", round,
                gb / plain, gb / framed, plain / framed);
  }
  return 0;
}
