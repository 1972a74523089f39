// The decode side of a transfer (transfer/receiver.h): an accept thread and one blocking reader
// thread per connection. A connection carries one transfer; on any failure the reader sends the
// sender one ABORT frame with the reason (best effort), closes, and tells the sink.
#include "transfer/receiver.h"

#include <errno.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "base/bytes.h"
#include "base/log.h"
#include "fmt/format.h"
#include "transfer/frame_io.h"
#include "transfer/socket_io.h"

namespace flashserve::transfer {

using base::Error;
using base::ErrorCode;

namespace {

constexpr double kReplyTimeoutS = 0.1;  // the ABORT reply never holds a reader thread longer

constexpr std::string_view kTooMany = "too many concurrent transfers";

Error Corrupt(std::string message) { return Error(ErrorCode::kDataLoss, std::move(message)); }

FrameHeader AbortHeader(const TransferId& id, std::string_view reason) {
  return FrameHeader{FrameType::kAbort, id, 0, reason.size(), base::Checksum64(reason)};
}

struct Connection {
  std::mutex mu;  // guards fd: the reader closes it, Stop() shuts it down
  UniqueFd fd;
  std::thread thread;
  std::atomic<bool> done{false};
};

// What one connection's reader learned.
struct Session {
  TransferId id{};
  bool registered = false;  // id is known, unique, and reported to the sink on failure
  int64_t expected_objects = -1;
  EndSummary received;
};

}  // namespace

base::Status ReceiverOptions::Validate() const {
  if (port < 0 || port > 65535) return Error(ErrorCode::kInvalidArgument, "receiver: port must be in [0, 65535]");
  if (model_fingerprint.empty() || model_fingerprint.size() > kMaxFingerprintBytes)
    return Error(ErrorCode::kInvalidArgument, "receiver: model fingerprint must be 1..256 bytes");
  if (!(idle_timeout_s > 0)) return Error(ErrorCode::kInvalidArgument, "receiver: idle timeout must be > 0");
  if (max_frame_payload < kObjectMetaBytes)
    return Error(ErrorCode::kInvalidArgument, "receiver: max frame payload is below the OBJECT meta size");
  if (max_transfers < 1) return Error(ErrorCode::kInvalidArgument, "receiver: max transfers must be >= 1");
  return base::Status::Ok();
}

struct TransferReceiver::Impl {
  Impl(ReceiverOptions o, TransferSink* s) : options(std::move(o)), sink(s) {}

  void AcceptLoop();
  void Serve(Connection* conn);
  base::Status RunSession(FrameReader& reader, Session* session);
  base::Status OnFrame(const Frame& frame, Session* session, bool* ended);
  bool Register(const FrameReader& reader, Session* session);

  const ReceiverOptions options;
  TransferSink* const sink;
  UniqueFd listener;
  int port = 0;
  std::thread accept_thread;
  std::atomic<bool> stopping{false};
  std::mutex mu;  // guards connections, live_ids
  std::list<std::unique_ptr<Connection>> connections;
  std::unordered_set<TransferId, TransferIdHasher> live_ids;
  std::atomic<int64_t> started{0}, completed{0}, failed{0}, refused{0}, objects{0}, object_bytes{0};
};

void TransferReceiver::Impl::AcceptLoop() {
  for (;;) {
    UniqueFd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (stopping.load()) return;
    if (!fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      FS_LOG_THROTTLED(10, kWarning, "transfer: accept failed: {}", strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // e.g. out of fds: do not spin
      continue;
    }
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = connections.begin(); it != connections.end();) {
      if (!(*it)->done.load()) {
        ++it;
        continue;
      }
      (*it)->thread.join();
      it = connections.erase(it);
    }
    SetSocketTimeouts(fd.get(), options.idle_timeout_s, kReplyTimeoutS);
    if (connections.size() >= static_cast<size_t>(options.max_transfers)) {
      refused.fetch_add(1);
      FS_LOG_THROTTLED(10, kWarning, "transfer: refusing a connection: {} transfers already open", connections.size());
      SendFrame(fd.get(), AbortHeader(TransferId{}, kTooMany), kTooMany).ok();  // best effort
      continue;
    }
    SetNoDelay(fd.get());
    auto conn = std::make_unique<Connection>();
    conn->fd = std::move(fd);
    Connection* raw = conn.get();
    connections.push_back(std::move(conn));
    raw->thread = std::thread([this, raw] { Serve(raw); });
  }
}

void TransferReceiver::Impl::Serve(Connection* conn) {
  FrameReader reader(conn->fd.get(), options.idle_timeout_s, options.max_frame_payload);
  Session session;
  base::Status result = RunSession(reader, &session);
  if (!result.ok()) {
    Error error = stopping.load() ? Error(ErrorCode::kCancelled, "the receiver stopped") : result.error();
    const std::string reason = error.message().substr(0, kMaxAbortReason);
    const FrameHeader reply = AbortHeader(reader.transfer_id().value_or(TransferId{}), reason);
    SendFrame(conn->fd.get(), reply, reason).ok();  // best effort: the sender learns why
    FS_LOG_THROTTLED(10, kWarning, "transfer {}: {}",
                     reader.transfer_id() ? ToHex(*reader.transfer_id()) : "(unknown id)", error.ToString());
    if (session.registered) {
      failed.fetch_add(1);
      sink->OnFailed(session.id, error);
    } else {
      refused.fetch_add(1);
    }
  }
  if (session.registered) {
    std::lock_guard<std::mutex> lock(mu);
    live_ids.erase(session.id);
  }
  {
    std::lock_guard<std::mutex> lock(conn->mu);
    conn->fd.reset();
  }
  conn->done.store(true);
}

// Registers the connection's transfer id once an intact header named it; false for an id
// that another live connection already uses.
bool TransferReceiver::Impl::Register(const FrameReader& reader, Session* session) {
  if (session->registered || !reader.transfer_id()) return true;
  std::lock_guard<std::mutex> lock(mu);
  if (!live_ids.insert(*reader.transfer_id()).second) return false;
  session->id = *reader.transfer_id();
  session->registered = true;
  started.fetch_add(1);
  return true;
}

base::Status TransferReceiver::Impl::RunSession(FrameReader& reader, Session* session) {
  auto first = reader.Next();
  if (!Register(reader, session))
    return Error(ErrorCode::kAlreadyExists, "transfer id already in use by another connection");
  if (!first.ok()) return first.error();
  if (first->header.type != FrameType::kHello)
    return Corrupt(fmt::format("first frame is {}, not HELLO", FrameTypeName(first->header.type)));
  FS_ASSIGN_OR_RETURN(const Hello hello, DecodeHello(first->control));
  if (hello.model_fingerprint != options.model_fingerprint) {
    return Error(ErrorCode::kFailedPrecondition, fmt::format("model fingerprint mismatch: sender '{}', receiver '{}'",
                                                             hello.model_fingerprint, options.model_fingerprint));
  }
  session->expected_objects = hello.expected_objects;
  sink->OnHello(session->id, hello);
  for (bool ended = false; !ended;) {
    FS_ASSIGN_OR_RETURN(const Frame frame, reader.Next());
    FS_RETURN_IF_ERROR(OnFrame(frame, session, &ended));
  }
  return base::Status::Ok();
}

base::Status TransferReceiver::Impl::OnFrame(const Frame& frame, Session* session, bool* ended) {
  switch (frame.header.type) {
    case FrameType::kHeartbeat: return base::Status::Ok();
    case FrameType::kHello: return Corrupt("a second HELLO");
    case FrameType::kAbort: return Error(ErrorCode::kCancelled, "the sender aborted the transfer: " + frame.control);
    case FrameType::kObject: {
      session->received.num_objects += 1;
      session->received.object_bytes += frame.object->size();
      objects.fetch_add(1);
      object_bytes.fetch_add(static_cast<int64_t>(frame.object->size()));
      sink->OnObject(session->id, TransferObject{frame.meta.kind, frame.meta.hash, frame.meta.tokens, frame.object});
      return base::Status::Ok();
    }
    case FrameType::kEnd: {
      FS_ASSIGN_OR_RETURN(const EndSummary end, DecodeEnd(frame.control));
      const EndSummary& got = session->received;
      const bool totals_match = end.num_objects == got.num_objects && end.object_bytes == got.object_bytes;
      if (!totals_match || (session->expected_objects >= 0 && got.num_objects != uint64_t(session->expected_objects))) {
        return Corrupt(fmt::format("END reports {} objects / {} bytes (HELLO expected {}), received {} / {}",
                                   end.num_objects, end.object_bytes, session->expected_objects, got.num_objects,
                                   got.object_bytes));
      }
      completed.fetch_add(1);
      sink->OnEnd(session->id, end);
      *ended = true;
      return base::Status::Ok();
    }
  }
  return Corrupt("unknown frame type");
}

TransferReceiver::TransferReceiver(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

base::Result<std::unique_ptr<TransferReceiver>> TransferReceiver::Start(ReceiverOptions options, TransferSink* sink) {
  FS_RETURN_IF_ERROR(options.Validate());
  if (sink == nullptr) return Error(ErrorCode::kInvalidArgument, "receiver: null sink");
  auto impl = std::make_unique<Impl>(std::move(options), sink);
  FS_ASSIGN_OR_RETURN(impl->listener, ListenTcp(HostPort{impl->options.host, impl->options.port}, &impl->port));
  impl->accept_thread = std::thread([raw = impl.get()] { raw->AcceptLoop(); });
  return std::unique_ptr<TransferReceiver>(new TransferReceiver(std::move(impl)));
}

TransferReceiver::~TransferReceiver() { Stop(); }

int TransferReceiver::port() const { return impl_->port; }

ReceiverStats TransferReceiver::stats() const {
  const Impl& m = *impl_;
  return ReceiverStats{m.started.load(), m.completed.load(), m.failed.load(),
                       m.refused.load(), m.objects.load(),   m.object_bytes.load()};
}

void TransferReceiver::Stop() {
  Impl& m = *impl_;
  if (m.stopping.exchange(true)) return;
  ::shutdown(m.listener.get(), SHUT_RDWR);  // wakes accept()
  m.accept_thread.join();
  m.listener.reset();
  std::list<std::unique_ptr<Connection>> connections;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    connections.swap(m.connections);
  }
  for (auto& conn : connections) {
    std::lock_guard<std::mutex> lock(conn->mu);
    if (conn->fd.valid()) ::shutdown(conn->fd.get(), SHUT_RDWR);  // wakes the reader
  }
  for (auto& conn : connections) conn->thread.join();
}

}  // namespace flashserve::transfer
