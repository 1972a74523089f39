// Thin POSIX TCP helpers for the transfer room: an owning fd, "host:port" parsing, listen /
// connect with a timeout, full writes, single reads with errors as values, an eventfd wake-up.
// Internal to transfer (and its tests); every function is safe from any thread on distinct fds.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashserve::transfer {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;
  int port = 0;
};
// "host:port" or "[ipv6]:port"; port 0..65535 (kInvalidArgument otherwise).
base::Result<HostPort> ParseHostPort(std::string_view address);

// A listening TCP socket (SO_REUSEADDR) on host:port; *bound_port receives the real port.
base::Result<UniqueFd> ListenTcp(const HostPort& address, int* bound_port);
// Connects within timeout_s; gives up early with kCancelled when wake_fd (>= 0) turns readable.
// The socket comes back blocking, with TCP_NODELAY.
base::Result<UniqueFd> ConnectTcp(const HostPort& address, double timeout_s, int wake_fd);

// SO_RCVTIMEO / SO_SNDTIMEO (0 = none) and TCP_NODELAY.
void SetSocketTimeouts(int fd, double recv_timeout_s, double send_timeout_s);
void SetNoDelay(int fd);

// Writes every byte of iov (modified) with sendmsg(MSG_NOSIGNAL). kTimeout when the send
// timeout passes without progress, kUnavailable when the peer closed or reset.
base::Status WriteAll(int fd, struct iovec* iov, int iov_count);
// One recv: bytes read (0 = orderly EOF). kTimeout when the receive timeout passes with no byte,
// kUnavailable on a reset or a shut-down socket.
base::Result<size_t> ReadSome(int fd, char* out, size_t n, bool dont_wait = false);

// An eventfd other threads signal to wake a poll()ing thread.
class Wakeup {
 public:
  Wakeup();
  int fd() const { return fd_.get(); }
  void Signal();
  void Drain();

 private:
  UniqueFd fd_;
};

}  // namespace flashserve::transfer
