// TransferSender (prefill side): streams one sequence's objects to a decode worker's
// TransferReceiver over one TCP connection (HELLO, OBJECT..., END; HEARTBEAT while idle). Owns
// a writer thread; Send / Finish / Abort / status are thread-safe and never block on the network.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/result.h"
#include "kv/block_hash.h"
#include "transfer/wire.h"

namespace flashserve::transfer {

struct SenderOptions {
  std::string address;                    // "host:port" of the receiver
  TransferId transfer_id{};               // chosen by the caller (NewTransferId()), unique per transfer
  Hello hello;                            // sent first
  double connect_timeout_s = 1.0;
  double heartbeat_interval_s = 0.2;      // HEARTBEAT after this long without a frame
  double write_timeout_s = 5.0;           // a receiver that accepts no byte for this long = failed
  int64_t max_queued_bytes = 512ll << 20; // object bytes queued but not yet written (see Send)
  uint64_t max_frame_payload = kMaxFramePayload;
  base::Status Validate() const;
};

enum class SenderState : uint8_t {
  kConnecting,  // the writer thread is connecting (objects may already be queued)
  kStreaming,   // HELLO written
  kFinished,    // END written (handed to the kernel; the receiver sends no acknowledgement)
  kFailed,      // connect / write error, peer closed, queue overflow, or Abort()
};
const char* SenderStateName(SenderState state);

struct SenderStats {
  int64_t objects_sent = 0;
  int64_t object_bytes_sent = 0;
  int64_t heartbeats_sent = 0;
  int64_t queued_bytes = 0;
};

class TransferSender {
 public:
  // Called at most once, on the writer thread, when the transfer fails for any reason other than
  // the caller's own Abort(). It must not call back into this sender's Wait or destructor.
  using FailureFn = std::function<void(const base::Error&)>;

  // Validates the options and starts the writer thread, which connects and sends HELLO; returns
  // at once (connect errors arrive through on_failure / status()).
  static base::Result<std::unique_ptr<TransferSender>> Start(SenderOptions options, FailureFn on_failure = nullptr);
  // Aborts an unfinished transfer ("sender destroyed") and joins the writer thread; a writer
  // blocked on a stalled receiver is cut off after ~200 ms.
  ~TransferSender();
  TransferSender(const TransferSender&) = delete;
  TransferSender& operator=(const TransferSender&) = delete;

  // Queues one object (payload not copied; kept alive until written). Never blocks. Errors:
  // the transfer's failure once failed; kFailedPrecondition after Finish/Abort; kInvalidArgument
  // for a null payload or one over the frame limit; kResourceExhausted when the queue would exceed
  // max_queued_bytes. The last two also abort the transfer (objects form a chain: a transfer
  // missing one is useless to the receiver, which then recomputes).
  base::Status Send(ObjectKind kind, const kv::BlockHash& hash, int64_t tokens, Payload payload);
  // END after everything queued is written, reporting the prompt tokens this (prefill) side found
  // cached (-1 = not reported). Non-blocking; see Wait.
  base::Status Finish(int64_t source_cached_tokens = -1);
  // Drops what is queued, sends ABORT(reason) after the frame being written (if connected) and
  // closes. No effect once finished or failed.
  void Abort(std::string reason);

  // OK unless failed (then the error). kCancelled after Abort.
  base::Status status() const;
  SenderState state() const;
  SenderStats stats() const;
  // Blocks until finished or failed (the outcome), or kTimeout after timeout_s.
  base::Status Wait(double timeout_s);

 private:
  struct Impl;
  explicit TransferSender(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve::transfer
