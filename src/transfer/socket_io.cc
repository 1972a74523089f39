// POSIX TCP helpers (transfer/socket_io.h).
#include "transfer/socket_io.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/check.h"
#include "base/clock.h"
#include "fmt/format.h"

namespace flashserve::transfer {
namespace {

using base::Error;
using base::ErrorCode;

std::string Where(const HostPort& a) { return fmt::format("{}:{}", a.host, a.port); }

timeval ToTimeval(double seconds) {
  timeval tv{};
  if (seconds <= 0) return tv;
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - static_cast<double>(tv.tv_sec)) * 1e6);
  if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1;
  return tv;
}

struct AddrInfoList {
  addrinfo* list = nullptr;
  ~AddrInfoList() {
    if (list != nullptr) freeaddrinfo(list);
  }
};

base::Status Resolve(const HostPort& address, bool passive, AddrInfoList* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string port = std::to_string(address.port);
  const int rc = getaddrinfo(address.host.c_str(), port.c_str(), &hints, &out->list);
  if (rc != 0 || out->list == nullptr)
    return Error(ErrorCode::kUnavailable, fmt::format("resolving {}: {}", Where(address), gai_strerror(rc)));
  return base::Status::Ok();
}

// Waits for a non-blocking connect to finish (or time out, or be abandoned through wake_fd).
base::Status FinishConnect(int fd, const HostPort& address, double timeout_s, int wake_fd) {
  const double deadline = base::MonotonicSeconds() + timeout_s;
  for (;;) {
    const double left = deadline - base::MonotonicSeconds();
    if (left <= 0) return Error(ErrorCode::kTimeout, fmt::format("connecting to {}: timed out", Where(address)));
    pollfd fds[2] = {{fd, POLLOUT, 0}, {wake_fd, POLLIN, 0}};
    const int n = ::poll(fds, wake_fd >= 0 ? 2 : 1, static_cast<int>(std::ceil(left * 1000)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(ErrorCode::kIoError, fmt::format("connecting to {}: poll: {}", Where(address), strerror(errno)));
    if (wake_fd >= 0 && (fds[1].revents & POLLIN)) return Error(ErrorCode::kCancelled, "connect abandoned");
    if (fds[0].revents == 0) continue;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Error(ErrorCode::kUnavailable, fmt::format("connecting to {}: {}", Where(address), strerror(err)));
    return base::Status::Ok();
  }
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

base::Result<HostPort> ParseHostPort(std::string_view address) {
  const size_t colon = address.rfind(':');
  auto bad = [&] {
    return Error(ErrorCode::kInvalidArgument, fmt::format("address '{}': expected host:port", address));
  };
  if (colon == std::string_view::npos || colon == 0) return bad();
  HostPort out;
  out.host = std::string(address.substr(0, colon));
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') out.host = out.host.substr(1, out.host.size() - 2);
  const std::string port(address.substr(colon + 1));
  char* end = nullptr;
  const long value = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || value < 0 || value > 65535) return bad();
  out.port = static_cast<int>(value);
  return out;
}

base::Result<UniqueFd> ListenTcp(const HostPort& address, int* bound_port) {
  AddrInfoList ai;
  FS_RETURN_IF_ERROR(Resolve(address, /*passive=*/true, &ai));
  UniqueFd fd(::socket(ai.list->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Error(ErrorCode::kIoError, fmt::format("socket: {}", strerror(errno)));
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), ai.list->ai_addr, ai.list->ai_addrlen) != 0 || ::listen(fd.get(), SOMAXCONN) != 0)
    return Error(ErrorCode::kUnavailable, fmt::format("cannot listen on {}: {}", Where(address), strerror(errno)));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  *bound_port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

base::Result<UniqueFd> ConnectTcp(const HostPort& address, double timeout_s, int wake_fd) {
  AddrInfoList ai;
  FS_RETURN_IF_ERROR(Resolve(address, /*passive=*/false, &ai));
  UniqueFd fd(::socket(ai.list->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Error(ErrorCode::kIoError, fmt::format("socket: {}", strerror(errno)));
  if (::connect(fd.get(), ai.list->ai_addr, ai.list->ai_addrlen) != 0) {
    if (errno != EINPROGRESS)
      return Error(ErrorCode::kUnavailable, fmt::format("connecting to {}: {}", Where(address), strerror(errno)));
    FS_RETURN_IF_ERROR(FinishConnect(fd.get(), address, timeout_s, wake_fd));
  }
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  SetNoDelay(fd.get());
  return fd;
}

void SetSocketTimeouts(int fd, double recv_timeout_s, double send_timeout_s) {
  const timeval rcv = ToTimeval(recv_timeout_s), snd = ToTimeval(send_timeout_s);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof rcv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof snd);
}

void SetNoDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

base::Status WriteAll(int fd, struct iovec* iov, int iov_count) {
  while (iov_count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iov_count);
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Error(ErrorCode::kTimeout, "write timed out (the peer stopped reading)");
      const bool closed = errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN;
      return Error(closed ? ErrorCode::kUnavailable : ErrorCode::kIoError,
                   closed ? "connection closed by the peer" : fmt::format("write: {}", strerror(errno)));
    }
    size_t done = static_cast<size_t>(n);
    while (iov_count > 0 && done >= iov->iov_len) {
      done -= iov->iov_len;
      ++iov;
      --iov_count;
    }
    if (iov_count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + done;
      iov->iov_len -= done;
    }
  }
  return base::Status::Ok();
}

base::Result<size_t> ReadSome(int fd, char* out, size_t n, bool dont_wait) {
  for (;;) {
    const ssize_t got = ::recv(fd, out, n, dont_wait ? MSG_DONTWAIT : 0);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Error(ErrorCode::kTimeout, "no data");
    const bool closed = errno == ECONNRESET || errno == ENOTCONN || errno == EPIPE;
    return Error(closed ? ErrorCode::kUnavailable : ErrorCode::kIoError,
                 closed ? "connection reset by the peer" : fmt::format("read: {}", strerror(errno)));
  }
}

Wakeup::Wakeup() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) { FS_CHECK(fd_.valid(), "eventfd: %s", strerror(errno)); }

void Wakeup::Signal() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(fd_.get(), &one, sizeof one);
}

void Wakeup::Drain() {
  uint64_t value = 0;
  [[maybe_unused]] ssize_t n = ::read(fd_.get(), &value, sizeof value);
}

}  // namespace flashserve::transfer
