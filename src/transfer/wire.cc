// Frame header and payload codecs (transfer/wire.h).
#include "transfer/wire.h"

#include <cstring>
#include <random>

#include "base/bytes.h"
#include "fmt/format.h"

namespace flashserve::transfer {
namespace {

using base::Error;
using base::ErrorCode;

static_assert(static_cast<uint8_t>(ObjectKind::kBlock) == 1 && static_cast<uint8_t>(ObjectKind::kBoundary) == 2,
              "OBJECT kind wire values");

Error Corrupt(std::string message) { return Error(ErrorCode::kDataLoss, std::move(message)); }

template <typename T>
void Store(char* out, T v) {
  std::memcpy(out, &v, sizeof v);
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The payload cap of each frame type (0 for an unknown type).
uint64_t PayloadCap(FrameType type, uint64_t max_payload) {
  switch (type) {
    case FrameType::kHello: return kMaxHelloPayload;
    case FrameType::kObject: return max_payload;
    case FrameType::kHeartbeat: return 0;
    case FrameType::kEnd: return kEndPayloadBytes;
    case FrameType::kAbort: return kMaxAbortReason;
  }
  return 0;
}

bool IsKnownType(uint8_t type) { return type >= 1 && type <= 5; }

}  // namespace

const char* FrameTypeName(FrameType type) {
  switch (type) {
    case FrameType::kHello: return "HELLO";
    case FrameType::kObject: return "OBJECT";
    case FrameType::kHeartbeat: return "HEARTBEAT";
    case FrameType::kEnd: return "END";
    case FrameType::kAbort: return "ABORT";
  }
  return "?";
}

size_t TransferIdHasher::operator()(const TransferId& id) const { return Load<uint64_t>(reinterpret_cast<const char*>(id.data())); }

TransferId NewTransferId() {
  std::random_device rd;
  TransferId id;
  for (size_t i = 0; i < id.size(); i += 4) {
    const uint32_t r = rd();
    std::memcpy(id.data() + i, &r, 4);
  }
  return id;
}

std::string ToHex(const TransferId& id) { return base::HexEncode(id); }

void EncodeFrameHeader(const FrameHeader& header, char* out) {
  std::memcpy(out, kFrameMagic, 4);
  Store<uint16_t>(out + 4, kWireVersion);
  Store<uint8_t>(out + 6, static_cast<uint8_t>(header.type));
  Store<uint8_t>(out + 7, 0);
  std::memcpy(out + 8, header.transfer_id.data(), 16);
  Store<uint64_t>(out + 24, header.seq);
  Store<uint64_t>(out + 32, header.payload_bytes);
  Store<uint64_t>(out + 40, header.payload_checksum);
  Store<uint64_t>(out + 48, base::Checksum64(std::string_view(out, 48)));
}

base::Result<FrameHeader> DecodeFrameHeader(std::string_view bytes) {
  if (bytes.size() < kFrameHeaderBytes) return Corrupt(fmt::format("truncated frame header ({} bytes)", bytes.size()));
  const char* p = bytes.data();
  if (std::memcmp(p, kFrameMagic, 4) != 0) return Corrupt("bad frame magic (not a flashserve transfer stream)");
  const uint16_t version = Load<uint16_t>(p + 4);
  if (version != kWireVersion) return Corrupt(fmt::format("unsupported transfer format version {}", version));
  if (Load<uint64_t>(p + 48) != base::Checksum64(bytes.substr(0, 48))) return Corrupt("frame header checksum mismatch");
  const uint8_t type = Load<uint8_t>(p + 6);
  if (!IsKnownType(type)) return Corrupt(fmt::format("unknown frame type {}", type));
  if (Load<uint8_t>(p + 7) != 0) return Corrupt("nonzero frame flags");
  FrameHeader h;
  h.type = static_cast<FrameType>(type);
  std::memcpy(h.transfer_id.data(), p + 8, 16);
  h.seq = Load<uint64_t>(p + 24);
  h.payload_bytes = Load<uint64_t>(p + 32);
  h.payload_checksum = Load<uint64_t>(p + 40);
  return h;
}

base::Status CheckFrameLength(const FrameHeader& h, uint64_t max_payload) {
  const uint64_t cap = PayloadCap(h.type, max_payload);
  if (h.payload_bytes > cap) {
    return Error(ErrorCode::kResourceExhausted,
                 fmt::format("{} frame payload of {} bytes exceeds the limit of {}", FrameTypeName(h.type),
                             h.payload_bytes, cap));
  }
  if (h.type == FrameType::kEnd && h.payload_bytes != kEndPayloadBytes) return Corrupt("END payload is not 24 bytes");
  if (h.type == FrameType::kObject && h.payload_bytes < kObjectMetaBytes) return Corrupt("OBJECT payload too short");
  return base::Status::Ok();
}

std::string EncodeFrame(FrameType type, const TransferId& id, uint64_t seq, std::string_view payload) {
  FrameHeader h{type, id, seq, payload.size(), base::Checksum64(payload)};
  std::string out(kFrameHeaderBytes, '\0');
  EncodeFrameHeader(h, out.data());
  out.append(payload);
  return out;
}

base::Status ValidateHello(const Hello& hello) {
  if (hello.model_fingerprint.empty() || hello.model_fingerprint.size() > kMaxFingerprintBytes)
    return Error(ErrorCode::kInvalidArgument, "HELLO: model fingerprint must be 1..256 bytes");
  if (hello.cache_namespace.size() > kMaxNamespaceBytes)
    return Error(ErrorCode::kInvalidArgument, "HELLO: cache namespace must be at most 256 bytes");
  if (hello.prompt_tokens < 0 || hello.expected_objects < -1)
    return Error(ErrorCode::kInvalidArgument, "HELLO: negative prompt tokens or expected object count");
  return base::Status::Ok();
}

std::string EncodeHello(const Hello& hello) {
  base::ByteWriter w;
  w.Put<uint16_t>(static_cast<uint16_t>(hello.model_fingerprint.size()));
  w.PutBytes(hello.model_fingerprint.data(), hello.model_fingerprint.size());
  w.Put<uint16_t>(static_cast<uint16_t>(hello.cache_namespace.size()));
  w.PutBytes(hello.cache_namespace.data(), hello.cache_namespace.size());
  w.Put<int64_t>(hello.prompt_tokens);
  w.Put<int64_t>(hello.expected_objects);
  return std::move(w.str());
}

base::Result<Hello> DecodeHello(std::string_view payload) {
  base::ByteReader r(payload);
  uint16_t fp_len = 0, ns_len = 0;
  std::string_view fp, ns;
  Hello h;
  r.Get(&fp_len);
  r.View(fp_len, &fp);
  r.Get(&ns_len);
  r.View(ns_len, &ns);
  r.Get(&h.prompt_tokens);
  r.Get(&h.expected_objects);
  if (r.failed() || r.remaining() != 0) return Corrupt("malformed HELLO payload");
  h.model_fingerprint = std::string(fp);
  h.cache_namespace = std::string(ns);
  if (base::Status s = ValidateHello(h); !s.ok()) return Corrupt(s.error().message());
  return h;
}

void EncodeObjectMeta(const ObjectMeta& meta, char* out) {
  Store<uint8_t>(out, static_cast<uint8_t>(meta.kind));
  std::memcpy(out + 1, meta.hash.data(), meta.hash.size());
  Store<int64_t>(out + 33, meta.tokens);
}

base::Result<ObjectMeta> DecodeObjectMeta(std::string_view bytes) {
  if (bytes.size() < kObjectMetaBytes) return Corrupt("OBJECT payload too short");
  const uint8_t kind = Load<uint8_t>(bytes.data());
  if (!protocol::IsKvObjectKind(kind))
    return Corrupt(fmt::format("unknown object kind {}", kind));
  ObjectMeta m;
  m.kind = static_cast<ObjectKind>(kind);
  std::memcpy(m.hash.data(), bytes.data() + 1, m.hash.size());
  m.tokens = Load<int64_t>(bytes.data() + 33);
  if (m.tokens < 0) return Corrupt("negative object token count");
  return m;
}

std::string EncodeEnd(const EndSummary& end) {
  std::string out(kEndPayloadBytes, '\0');
  Store<uint64_t>(out.data(), end.num_objects);
  Store<uint64_t>(out.data() + 8, end.object_bytes);
  Store<int64_t>(out.data() + 16, end.source_cached_tokens);
  return out;
}

base::Result<EndSummary> DecodeEnd(std::string_view payload) {
  if (payload.size() != kEndPayloadBytes) return Corrupt("END payload is not 24 bytes");
  return EndSummary{Load<uint64_t>(payload.data()), Load<uint64_t>(payload.data() + 8), Load<int64_t>(payload.data() + 16)};
}

bool ParseTransferId(std::string_view hex, TransferId* out) { return base::HexDecode(hex, *out); }

}  // namespace flashserve::transfer
