// Prefill/decode transfer frames from the network: raw bytes through the frame header, HELLO,
// OBJECT meta and END decoders; payloads that decode encode back to bytes that decode equal;
// and a frame header built from fuzzed fields, with any one bit flipped, never decodes.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "transfer/wire.h"

namespace {

namespace transfer = flashserve::transfer;

void Raw(std::string_view bytes) {
  if (bytes.size() >= transfer::kFrameHeaderBytes) {
    auto header = transfer::DecodeFrameHeader(bytes);
    if (header.ok()) (void)transfer::CheckFrameLength(header.value());
  }
  auto hello = transfer::DecodeHello(bytes);
  if (hello.ok() && transfer::ValidateHello(hello.value()).ok()) {
    auto again = transfer::DecodeHello(transfer::EncodeHello(hello.value()));
    if (!again.ok() || again.value().model_fingerprint != hello.value().model_fingerprint ||
        again.value().cache_namespace != hello.value().cache_namespace ||
        again.value().prompt_tokens != hello.value().prompt_tokens ||
        again.value().expected_objects != hello.value().expected_objects) {
      __builtin_trap();
    }
  }
  if (bytes.size() >= transfer::kObjectMetaBytes) {
    auto meta = transfer::DecodeObjectMeta(bytes.substr(0, transfer::kObjectMetaBytes));
    if (meta.ok()) {
      char out[transfer::kObjectMetaBytes];
      transfer::EncodeObjectMeta(meta.value(), out);
      auto again = transfer::DecodeObjectMeta(std::string_view(out, sizeof out));
      if (!again.ok() || again.value().kind != meta.value().kind || again.value().hash != meta.value().hash ||
          again.value().tokens != meta.value().tokens) {
        __builtin_trap();
      }
    }
  }
  auto end = transfer::DecodeEnd(bytes);
  if (end.ok()) {
    auto again = transfer::DecodeEnd(transfer::EncodeEnd(end.value()));
    if (!again.ok() || !(again.value() == end.value())) __builtin_trap();
  }
}

void FlippedHeader(FuzzedDataProvider& in) {
  transfer::FrameHeader h;
  h.type = static_cast<transfer::FrameType>(in.ConsumeIntegralInRange<uint8_t>(1, 5));
  for (auto& b : h.transfer_id) b = in.ConsumeIntegral<uint8_t>();
  h.seq = in.ConsumeIntegral<uint64_t>();
  h.payload_bytes = in.ConsumeIntegral<uint64_t>();
  h.payload_checksum = in.ConsumeIntegral<uint64_t>();
  char out[transfer::kFrameHeaderBytes];
  transfer::EncodeFrameHeader(h, out);
  auto back = transfer::DecodeFrameHeader(std::string_view(out, sizeof out));
  if (!back.ok() || back.value().seq != h.seq || back.value().payload_bytes != h.payload_bytes ||
      back.value().transfer_id != h.transfer_id || back.value().type != h.type) {
    __builtin_trap();
  }
  const size_t bit = in.ConsumeIntegral<uint32_t>() % (8 * sizeof out);
  out[bit / 8] = static_cast<char>(out[bit / 8] ^ (1 << (bit % 8)));
  if (transfer::DecodeFrameHeader(std::string_view(out, sizeof out)).ok()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] & 1) {
    FuzzedDataProvider in(data + 1, size - 1);
    FlippedHeader(in);
  } else {
    Raw(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  }
  return 0;
}
