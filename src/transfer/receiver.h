// TransferReceiver (decode side): listens for TransferSenders, validates every frame and hands
// each transfer's HELLO, objects and outcome to a TransferSink. Owns an accept thread and one
// reader thread per connection; Start / Stop from one controlling thread, port / stats any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "kv/block_hash.h"
#include "transfer/wire.h"

namespace flashserve::transfer {

struct TransferObject {
  ObjectKind kind = ObjectKind::kBlock;
  kv::BlockHash hash{};
  int64_t tokens = 0;
  Payload payload;  // the exact bytes sent (checksum verified); never null
};

// Per transfer id the sink sees: OnHello, OnObject* (in send order), then exactly one of OnEnd
// or OnFailed. OnFailed alone (no OnHello) when the first frame was refused (foreign
// fingerprint, corrupt HELLO) but its header was intact. A connection whose first header is
// unreadable, or that reuses the id of a live transfer, is refused without any sink call.
// Calls come from the transfer's reader thread: sequential per transfer, concurrent across
// transfers. A slow sink slows its own sender (TCP back-pressure) and no one else; time spent
// in the sink does not count towards the idle timeout.
class TransferSink {
 public:
  virtual ~TransferSink() = default;
  virtual void OnHello(const TransferId& id, const Hello& hello) = 0;
  virtual void OnObject(const TransferId& id, TransferObject object) = 0;
  virtual void OnEnd(const TransferId& id, const EndSummary& end) = 0;
  // kDataLoss: corrupt / truncated frame, sequence gap, END totals that disagree with what
  // arrived; kResourceExhausted: a frame over the length limit; kTimeout: no byte for
  // idle_timeout_s; kUnavailable: closed or reset before END; kFailedPrecondition: foreign model
  // fingerprint; kCancelled: the sender sent ABORT, or the receiver stopped.
  virtual void OnFailed(const TransferId& id, const base::Error& error) = 0;
};

struct ReceiverOptions {
  std::string host = "127.0.0.1";
  int port = 0;                    // 0 = any free port (see TransferReceiver::port)
  std::string model_fingerprint;   // HELLOs with another fingerprint are refused
  double idle_timeout_s = 1.0;     // no byte for this long = the sender is gone
  uint64_t max_frame_payload = kMaxFramePayload;
  int max_transfers = 64;          // concurrent connections; more are closed at once
  base::Status Validate() const;
};

struct ReceiverStats {
  int64_t transfers_started = 0;    // connections whose first header named a usable id
  int64_t transfers_completed = 0;  // OnEnd
  int64_t transfers_failed = 0;     // OnFailed
  int64_t connections_refused = 0;  // closed without any sink call (see TransferSink)
  int64_t objects_received = 0;
  int64_t object_bytes_received = 0;
};

class TransferReceiver {
 public:
  // Binds, listens and starts accepting. sink is not owned and must outlive the receiver.
  static base::Result<std::unique_ptr<TransferReceiver>> Start(ReceiverOptions options, TransferSink* sink);
  ~TransferReceiver();  // Stop()
  TransferReceiver(const TransferReceiver&) = delete;
  TransferReceiver& operator=(const TransferReceiver&) = delete;

  int port() const;
  ReceiverStats stats() const;
  // Stops accepting, closes every connection (their transfers get OnFailed kCancelled) and joins
  // the threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit TransferReceiver(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve::transfer
