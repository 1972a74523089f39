// The transfer wire format (design.md section 6): frame header, frame types, payload codecs and
// transfer ids. Used by TransferSender, TransferReceiver and tests. Pure functions, any thread.
//
// Frame = 56-byte header + payload; every integer little-endian:
//   off size field
//     0    4 magic "FSXF" (46 53 58 46)
//     4    2 format version (kWireVersion)
//     6    1 frame type (FrameType)
//     7    1 flags, must be 0
//     8   16 transfer id (the same in every frame of a connection)
//    24    8 sequence number: 0 for HELLO, then +1 per frame
//    32    8 payload length (checked against the type's limit before anything is allocated)
//    40    8 payload checksum: base::Checksum64 of the payload bytes
//    48    8 header checksum: base::Checksum64 of bytes [0, 48)
// Payloads:
//   HELLO     u16 n + model fingerprint (1..256 bytes), u16 n + cache namespace (0..256 bytes),
//             i64 prompt tokens, i64 expected object count (-1 = unknown)
//   OBJECT    u8 kind (1 block, 2 boundary), 32-byte block hash, i64 token count, object bytes
//   HEARTBEAT empty
//   END       u64 number of objects, u64 total object bytes (OBJECT payloads minus their 41-byte meta)
//   ABORT     reason text (<= 4096 bytes)
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/shared_bytes.h"
#include "kv/block_hash.h"
#include "protocol/cluster.h"

namespace flashserve::transfer {

constexpr char kFrameMagic[4] = {'F', 'S', 'X', 'F'};
constexpr uint16_t kWireVersion = 1;
constexpr size_t kFrameHeaderBytes = 56;
constexpr uint64_t kMaxFramePayload = 256ull << 20;  // default cap of one frame's payload
constexpr size_t kObjectMetaBytes = 41;               // OBJECT payload prefix: kind, hash, tokens
constexpr size_t kEndPayloadBytes = 24;
constexpr size_t kMaxHelloPayload = 4096;
constexpr size_t kMaxAbortReason = 4096;
constexpr size_t kMaxFingerprintBytes = 256;
constexpr size_t kMaxNamespaceBytes = 256;

enum class FrameType : uint8_t { kHello = 1, kObject = 2, kHeartbeat = 3, kEnd = 4, kAbort = 5 };
// The kind shared with the KV store and KV events: kBlock = 1, kBoundary = 2, kImage = 3 (the wire values).
using ObjectKind = protocol::KvObjectKind;

const char* FrameTypeName(FrameType type);  // "HELLO", ...

using TransferId = std::array<uint8_t, 16>;
using Payload = base::SharedBytes;  // immutable, shared with the KV store without copies

struct TransferIdHasher {
  size_t operator()(const TransferId& id) const;
};
// A random id (std::random_device); ids must be unique among a receiver's live transfers.
TransferId NewTransferId();
std::string ToHex(const TransferId& id);
// 32 hex digits -> id; false when malformed.
bool ParseTransferId(std::string_view hex, TransferId* out);

struct FrameHeader {
  FrameType type = FrameType::kHeartbeat;
  TransferId transfer_id{};
  uint64_t seq = 0;
  uint64_t payload_bytes = 0;
  uint64_t payload_checksum = 0;
};

// Writes kFrameHeaderBytes bytes (including the header checksum) to out.
void EncodeFrameHeader(const FrameHeader& header, char* out);
// Checks, in order: magic, version, header checksum, type, flags (kDataLoss on any). bytes must
// hold at least kFrameHeaderBytes.
base::Result<FrameHeader> DecodeFrameHeader(std::string_view bytes);
// The payload length against the type's limit, before anything is allocated: kResourceExhausted
// over it (OBJECT: max_payload, HELLO: 4096, ABORT: 4096, HEARTBEAT: 0); kDataLoss for an END
// that is not 24 bytes or an OBJECT shorter than its meta.
base::Status CheckFrameLength(const FrameHeader& header, uint64_t max_payload = kMaxFramePayload);
// Header + payload with the checksums filled in (control frames, tests).
std::string EncodeFrame(FrameType type, const TransferId& id, uint64_t seq, std::string_view payload);

struct Hello {
  std::string model_fingerprint;  // must equal the receiver's
  std::string cache_namespace;
  int64_t prompt_tokens = 0;
  int64_t expected_objects = -1;  // -1 = unknown; otherwise END must report exactly this many
};
base::Status ValidateHello(const Hello& hello);
std::string EncodeHello(const Hello& hello);
base::Result<Hello> DecodeHello(std::string_view payload);  // kDataLoss when malformed

struct ObjectMeta {
  ObjectKind kind = ObjectKind::kBlock;
  kv::BlockHash hash{};
  int64_t tokens = 0;
};
void EncodeObjectMeta(const ObjectMeta& meta, char* out);  // kObjectMetaBytes bytes
base::Result<ObjectMeta> DecodeObjectMeta(std::string_view bytes);

struct EndSummary {
  uint64_t num_objects = 0;
  uint64_t object_bytes = 0;
  // Prompt tokens the sending (prefill) worker found in its own prefix cache: the prefill side's
  // accounting is authoritative for the request's cached-token usage (-1 = not reported).
  int64_t source_cached_tokens = -1;
  bool operator==(const EndSummary&) const = default;
};
std::string EncodeEnd(const EndSummary& end);
base::Result<EndSummary> DecodeEnd(std::string_view payload);

}  // namespace flashserve::transfer
