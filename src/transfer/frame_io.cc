// Reading and writing frames over a blocking socket (transfer/frame_io.h).
#include "transfer/frame_io.h"

#include <sys/uio.h>

#include "base/bytes.h"
#include "fmt/format.h"
#include "transfer/socket_io.h"

namespace flashserve::transfer {
namespace {

using base::Error;
using base::ErrorCode;

Error Corrupt(std::string message) { return Error(ErrorCode::kDataLoss, std::move(message)); }

}  // namespace

FrameReader::FrameReader(int fd, double idle_timeout_s, uint64_t max_payload)
    : fd_(fd), idle_timeout_s_(idle_timeout_s), max_payload_(max_payload) {}

base::Result<Frame> FrameReader::Next() {
  char head[kFrameHeaderBytes];
  FS_RETURN_IF_ERROR(ReadExact(head, sizeof head, /*frame_start=*/true));
  FS_ASSIGN_OR_RETURN(const FrameHeader header, DecodeFrameHeader(std::string_view(head, sizeof head)));
  if (!transfer_id_) transfer_id_ = header.transfer_id;  // intact header: this id can be told
  if (header.transfer_id != *transfer_id_) {
    return Corrupt(fmt::format("{} frame of transfer {} on the connection of transfer {}", FrameTypeName(header.type),
                               ToHex(header.transfer_id), ToHex(*transfer_id_)));
  }
  FS_RETURN_IF_ERROR(CheckFrameLength(header, max_payload_));
  if (header.seq != next_seq_) {
    return Corrupt(fmt::format("{} frame has sequence number {} where {} was expected", FrameTypeName(header.type),
                               header.seq, next_seq_));
  }
  Frame frame;
  frame.header = header;
  FS_RETURN_IF_ERROR(ReadPayload(header, &frame));
  ++next_seq_;
  return frame;
}

base::Status FrameReader::ReadPayload(const FrameHeader& header, Frame* frame) {
  base::Checksum64Stream checksum;
  auto read = [&](char* out, size_t n) -> base::Status {
    size_t got = 0;
    while (got < n) {
      const size_t piece = std::min<size_t>(n - got, 256 << 10);  // checksum what is still in cache
      FS_RETURN_IF_ERROR(ReadExact(out + got, piece, /*frame_start=*/false));
      checksum.Update(std::string_view(out + got, piece));
      got += piece;
    }
    return base::Status::Ok();
  };
  std::string object;
  char meta[kObjectMetaBytes];
  if (header.type == FrameType::kObject) {
    FS_RETURN_IF_ERROR(read(meta, kObjectMetaBytes));
    object.resize(header.payload_bytes - kObjectMetaBytes);
    FS_RETURN_IF_ERROR(read(object.data(), object.size()));
  } else {
    frame->control.resize(header.payload_bytes);
    FS_RETURN_IF_ERROR(read(frame->control.data(), frame->control.size()));
  }
  if (checksum.Finish() != header.payload_checksum)
    return Corrupt(fmt::format("{} frame {} payload checksum mismatch", FrameTypeName(header.type), header.seq));
  if (header.type == FrameType::kObject) {
    FS_ASSIGN_OR_RETURN(frame->meta, DecodeObjectMeta(std::string_view(meta, kObjectMetaBytes)));
    frame->object = base::MakeSharedBytes(std::move(object));
  }
  return base::Status::Ok();
}

base::Status FrameReader::ReadExact(char* out, size_t n, bool frame_start) {
  size_t got = 0;
  while (got < n) {
    const bool at_boundary = frame_start && got == 0;
    auto r = ReadSome(fd_, out + got, n - got, dont_wait_ && at_boundary);
    if (r.ok() && *r > 0) {
      got += *r;
      bytes_read_ += *r;
      continue;
    }
    if (r.ok()) {  // EOF
      if (at_boundary) return Error(ErrorCode::kUnavailable, "connection closed by the peer");
      return Corrupt(fmt::format("truncated frame: connection closed {} bytes into a {}-byte read", got, n));
    }
    if (r.error().code() != ErrorCode::kTimeout) return r.error().WithContext(at_boundary ? "between frames" : "mid-frame");
    if (dont_wait_ && at_boundary) return r.error();
    return Error(ErrorCode::kTimeout, fmt::format("no data from the peer for {:.1f} s", idle_timeout_s_));
  }
  return base::Status::Ok();
}

base::Status SendFrame(int fd, const FrameHeader& header, std::string_view part1, std::string_view part2) {
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(header, head);
  struct iovec iov[3] = {{head, sizeof head},
                         {const_cast<char*>(part1.data()), part1.size()},
                         {const_cast<char*>(part2.data()), part2.size()}};
  return WriteAll(fd, iov, 3);
}

}  // namespace flashserve::transfer
