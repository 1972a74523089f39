// The prefill side of a transfer (transfer/sender.h): a queue fed by any thread and one writer
// thread that connects, writes HELLO, the queued OBJECTs, END, and HEARTBEATs while idle. The
// writer waits in poll() on the socket (a receiver's ABORT reply or close) and an eventfd.
#include "transfer/sender.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "fmt/format.h"
#include "transfer/frame_io.h"
#include "transfer/socket_io.h"

namespace flashserve::transfer {

using base::Error;
using base::ErrorCode;

base::Status SenderOptions::Validate() const {
  FS_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(address));
  if (hp.port == 0) return Error(ErrorCode::kInvalidArgument, "sender: the receiver's port must not be 0");
  FS_RETURN_IF_ERROR(ValidateHello(hello));
  if (!(connect_timeout_s > 0) || !(heartbeat_interval_s > 0) || !(write_timeout_s > 0))
    return Error(ErrorCode::kInvalidArgument, "sender: timeouts and the heartbeat interval must be > 0");
  if (max_queued_bytes < 1) return Error(ErrorCode::kInvalidArgument, "sender: max queued bytes must be >= 1");
  if (max_frame_payload < kObjectMetaBytes)
    return Error(ErrorCode::kInvalidArgument, "sender: max frame payload is below the OBJECT meta size");
  return base::Status::Ok();
}

const char* SenderStateName(SenderState state) {
  switch (state) {
    case SenderState::kConnecting: return "connecting";
    case SenderState::kStreaming: return "streaming";
    case SenderState::kFinished: return "finished";
    case SenderState::kFailed: return "failed";
  }
  return "?";
}

struct TransferSender::Impl {
  struct Item {
    ObjectMeta meta;
    Payload payload;
  };

  Impl(SenderOptions o, FailureFn f) : options(std::move(o)), on_failure(std::move(f)) {}

  void Run();
  base::Status RunTransfer();
  base::Status StreamLoop(FrameReader& replies);
  base::Status WriteObject(const Item& item);
  base::Status WriteControl(FrameType type, std::string_view payload);
  base::Error ReplyOrError(FrameReader& replies, const base::Error& error);
  void RequestAbort(Error error, std::string reason, bool by_caller);  // mu held
  bool Terminal() const { return state == SenderState::kFinished || state == SenderState::kFailed; }

  const SenderOptions options;
  const FailureFn on_failure;
  Wakeup wakeup;        // new work, Finish or Abort
  Wakeup abort_wakeup;  // Abort only (ends a connect in progress)
  std::thread thread;
  uint64_t next_seq = 0;   // writer thread only
  double last_write_s = 0;  // writer thread only

  mutable std::mutex mu;
  std::condition_variable done_cv;
  std::deque<Item> queue;
  UniqueFd sock;  // set / reset by the writer under mu; the destructor may shut it down
  SenderState state = SenderState::kConnecting;
  bool finish_requested = false;
  int64_t source_cached_tokens = -1;  // reported in END
  std::optional<Error> abort_error;  // set by Abort() or an overflow; the writer sends ABORT
  std::string abort_reason;          // the ABORT frame's text
  bool aborted_by_caller = false;
  std::optional<Error> failure;
  bool done = false;  // the writer finished, including the on_failure call: Wait returns
  SenderStats stats;
};

void TransferSender::Impl::RequestAbort(Error error, std::string reason, bool by_caller) {
  if (abort_error || Terminal()) return;
  abort_error = std::move(error);
  abort_reason = std::move(reason);
  aborted_by_caller = by_caller;
  queue.clear();
  stats.queued_bytes = 0;
  wakeup.Signal();
  abort_wakeup.Signal();
}

void TransferSender::Impl::Run() {
  base::Status result = RunTransfer();
  bool notify = false;
  Error error(ErrorCode::kInternal, "");
  {
    std::lock_guard<std::mutex> lock(mu);
    sock.reset();
    if (state != SenderState::kFinished) {
      state = SenderState::kFailed;
      failure = abort_error ? *abort_error : result.ok() ? Error(ErrorCode::kInternal, "writer stopped") : result.error();
      error = *failure;
      notify = !aborted_by_caller;
      queue.clear();
      stats.queued_bytes = 0;
    }
  }
  if (notify) {
    FS_LOG(kWarning, "transfer {} to {} failed: {}", ToHex(options.transfer_id), options.address, error.ToString());
    if (on_failure) on_failure(error);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  done_cv.notify_all();
}

base::Status TransferSender::Impl::RunTransfer() {
  FS_ASSIGN_OR_RETURN(const HostPort address, ParseHostPort(options.address));
  auto fd = ConnectTcp(address, options.connect_timeout_s, abort_wakeup.fd());
  if (!fd.ok()) return fd.error();
  // Receive timeout bounds reading a reply once poll() said one is there.
  SetSocketTimeouts(fd->get(), options.write_timeout_s, options.write_timeout_s);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (abort_error) return *abort_error;
    sock = std::move(fd).value();
  }
  FrameReader replies(sock.get(), options.write_timeout_s, kMaxAbortReason);
  if (base::Status s = WriteControl(FrameType::kHello, EncodeHello(options.hello)); !s.ok())
    return ReplyOrError(replies, s.error());
  {
    std::lock_guard<std::mutex> lock(mu);
    state = SenderState::kStreaming;
  }
  return StreamLoop(replies);
}

// Writes queued objects, then END once finished; HEARTBEATs while idle; stops on abort.
base::Status TransferSender::Impl::StreamLoop(FrameReader& replies) {
  for (;;) {
    std::optional<Item> item;
    std::optional<Error> abort;
    std::string reason;
    std::optional<EndSummary> end;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (abort_error) {
        abort = abort_error;
        reason = abort_reason.substr(0, kMaxAbortReason);
      } else if (!queue.empty()) {
        item = std::move(queue.front());
        queue.pop_front();
      } else if (finish_requested) {
        end = EndSummary{static_cast<uint64_t>(stats.objects_sent), static_cast<uint64_t>(stats.object_bytes_sent),
                         source_cached_tokens};
      }
    }
    if (abort) {
      WriteControl(FrameType::kAbort, reason).ok();  // best effort: the transfer is over either way
      return *abort;
    }
    if (item) {
      if (base::Status s = WriteObject(*item); !s.ok()) return ReplyOrError(replies, s.error());
      std::lock_guard<std::mutex> lock(mu);
      // An Abort while this object was on the wire already zeroed the count.
      stats.queued_bytes = std::max<int64_t>(0, stats.queued_bytes - static_cast<int64_t>(item->payload->size()));
      stats.objects_sent += 1;
      stats.object_bytes_sent += static_cast<int64_t>(item->payload->size());
      continue;
    }
    if (end) {
      if (base::Status s = WriteControl(FrameType::kEnd, EncodeEnd(*end)); !s.ok()) return ReplyOrError(replies, s.error());
      std::lock_guard<std::mutex> lock(mu);
      state = SenderState::kFinished;  // END is out: an Abort that raced with it changes nothing
      return base::Status::Ok();
    }
    const double wait_s = last_write_s + options.heartbeat_interval_s - base::MonotonicSeconds();
    pollfd fds[2] = {{sock.get(), POLLIN, 0}, {wakeup.fd(), POLLIN, 0}};
    const int n = ::poll(fds, 2, wait_s <= 0 ? 0 : static_cast<int>(std::ceil(wait_s * 1000)));
    if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      return ReplyOrError(replies, Error(ErrorCode::kUnavailable, "connection closed by the receiver"));
    }
    if (n > 0) wakeup.Drain();
    if (base::MonotonicSeconds() >= last_write_s + options.heartbeat_interval_s) {
      if (base::Status s = WriteControl(FrameType::kHeartbeat, {}); !s.ok()) return ReplyOrError(replies, s.error());
      std::lock_guard<std::mutex> lock(mu);
      stats.heartbeats_sent += 1;
    }
  }
}

base::Status TransferSender::Impl::WriteObject(const Item& item) {
  char meta[kObjectMetaBytes];
  EncodeObjectMeta(item.meta, meta);
  base::Checksum64Stream checksum;
  checksum.Update(std::string_view(meta, sizeof meta));
  checksum.Update(*item.payload);
  FrameHeader header{FrameType::kObject, options.transfer_id, next_seq++, sizeof meta + item.payload->size(),
                     checksum.Finish()};
  FS_RETURN_IF_ERROR(SendFrame(sock.get(), header, std::string_view(meta, sizeof meta), *item.payload));
  last_write_s = base::MonotonicSeconds();
  return base::Status::Ok();
}

base::Status TransferSender::Impl::WriteControl(FrameType type, std::string_view payload) {
  FrameHeader header{type, options.transfer_id, next_seq++, payload.size(), base::Checksum64(payload)};
  FS_RETURN_IF_ERROR(SendFrame(sock.get(), header, payload));
  last_write_s = base::MonotonicSeconds();
  return base::Status::Ok();
}

// The receiver explains a refusal with an ABORT frame before closing; prefer its reason.
base::Error TransferSender::Impl::ReplyOrError(FrameReader& replies, const base::Error& error) {
  replies.set_dont_wait(true);
  auto reply = replies.Next();
  if (reply.ok() && reply->header.type == FrameType::kAbort)
    return Error(ErrorCode::kUnavailable, "the receiver refused the transfer: " + reply->control);
  return error;
}

TransferSender::TransferSender(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

base::Result<std::unique_ptr<TransferSender>> TransferSender::Start(SenderOptions options, FailureFn on_failure) {
  FS_RETURN_IF_ERROR(options.Validate());
  auto impl = std::make_unique<Impl>(std::move(options), std::move(on_failure));
  impl->thread = std::thread([raw = impl.get()] { raw->Run(); });
  return std::unique_ptr<TransferSender>(new TransferSender(std::move(impl)));
}

TransferSender::~TransferSender() {
  Abort("sender destroyed");
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (!impl_->done_cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return impl_->done; })) {
    if (impl_->sock.valid()) ::shutdown(impl_->sock.get(), SHUT_RDWR);  // unblocks a stalled write
  }
  lock.unlock();
  impl_->thread.join();
}

base::Status TransferSender::Send(ObjectKind kind, const kv::BlockHash& hash, int64_t tokens, Payload payload) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  if (m.failure) return *m.failure;
  if (m.abort_error || m.finish_requested)
    return Error(ErrorCode::kFailedPrecondition, "transfer: Send after Finish or Abort");
  std::optional<Error> refused;
  if (payload == nullptr || tokens < 0) {
    refused = Error(ErrorCode::kInvalidArgument, "transfer: null payload or negative token count");
  } else if (payload->size() > m.options.max_frame_payload - kObjectMetaBytes) {
    refused = Error(ErrorCode::kInvalidArgument, fmt::format("transfer: a {}-byte object exceeds the frame limit", payload->size()));
  } else if (m.stats.queued_bytes + static_cast<int64_t>(payload->size()) > m.options.max_queued_bytes) {
    refused = Error(ErrorCode::kResourceExhausted,
                    fmt::format("transfer: send queue full ({} bytes queued, limit {})", m.stats.queued_bytes,
                                m.options.max_queued_bytes));
  }
  if (refused) {
    m.RequestAbort(*refused, refused->message(), /*by_caller=*/false);
    return *refused;
  }
  m.stats.queued_bytes += static_cast<int64_t>(payload->size());
  m.queue.push_back(Impl::Item{ObjectMeta{kind, hash, tokens}, std::move(payload)});
  m.wakeup.Signal();
  return base::Status::Ok();
}

base::Status TransferSender::Finish(int64_t source_cached_tokens) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->failure) return *impl_->failure;
  if (impl_->abort_error || impl_->finish_requested)
    return Error(ErrorCode::kFailedPrecondition, "transfer: Finish after Finish or Abort");
  impl_->finish_requested = true;
  impl_->source_cached_tokens = source_cached_tokens;
  impl_->wakeup.Signal();
  return base::Status::Ok();
}

void TransferSender::Abort(std::string reason) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->RequestAbort(Error(ErrorCode::kCancelled, "sender aborted: " + reason), reason, /*by_caller=*/true);
}

base::Status TransferSender::status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->failure ? base::Status(*impl_->failure) : base::Status::Ok();
}

SenderState TransferSender::state() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->state;
}

SenderStats TransferSender::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

base::Status TransferSender::Wait(double timeout_s) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  const auto timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(timeout_s));
  if (!impl_->done_cv.wait_for(lock, timeout, [&] { return impl_->done; }))
    return Error(ErrorCode::kTimeout, fmt::format("transfer still {} after {:.1f} s", SenderStateName(impl_->state), timeout_s));
  return impl_->failure ? base::Status(*impl_->failure) : base::Status::Ok();
}

}  // namespace flashserve::transfer
