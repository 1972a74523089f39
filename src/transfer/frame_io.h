// Frames over a blocking socket: FrameReader reads and fully validates one frame at a time, for
// TransferReceiver (and TransferSender, for the receiver's ABORT reply); SendFrame writes one.
// A FrameReader belongs to the one thread reading its socket; SendFrame is a pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "transfer/wire.h"

namespace flashserve::transfer {

struct Frame {
  FrameHeader header;
  std::string control;  // HELLO / END / ABORT payload
  ObjectMeta meta;      // OBJECT only
  Payload object;       // OBJECT only: the object bytes (never null for an OBJECT)
};

class FrameReader {
 public:
  // fd: a blocking socket whose SO_RCVTIMEO is the idle timeout (idle_timeout_s, for messages).
  FrameReader(int fd, double idle_timeout_s, uint64_t max_payload);

  // The next frame, or why the stream ends: kUnavailable (closed at a frame boundary, reset),
  // kTimeout (no byte for the idle timeout), kDataLoss (bad magic / version / type / checksum,
  // sequence gap, another transfer id, malformed OBJECT meta, closed mid-frame), or
  // kResourceExhausted (payload length over the limit; nothing is allocated). Nothing of a frame
  // that fails is returned. Sequence numbers must run 0, 1, 2, ...
  base::Result<Frame> Next();
  // With dont_wait, Next() never blocks before the first byte of a frame (kTimeout if none).
  void set_dont_wait(bool dont_wait) { dont_wait_ = dont_wait; }

  // The transfer id of the first intact header on this stream.
  const std::optional<TransferId>& transfer_id() const { return transfer_id_; }
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  // Reads exactly n bytes; frame_start: no byte of this frame was read yet.
  base::Status ReadExact(char* out, size_t n, bool frame_start);
  base::Status ReadPayload(const FrameHeader& header, Frame* frame);

  int fd_;
  double idle_timeout_s_;
  uint64_t max_payload_;
  uint64_t next_seq_ = 0;
  uint64_t bytes_read_ = 0;
  bool dont_wait_ = false;
  std::optional<TransferId> transfer_id_;
};

// Writes header (with payload_bytes / payload_checksum already set) followed by the parts.
base::Status SendFrame(int fd, const FrameHeader& header, std::string_view part1, std::string_view part2 = {});

}  // namespace flashserve::transfer
