// KV object files (days of customers' cache on disk): raw bytes through the checks a read runs
// (CheckObjectBytes) and file names through ParseObjectFileName; and objects written by
// EncodeHeader from fuzzed fields, which read back equal, and with any one bit flipped read as
// corrupt (every byte is under the header or the payload checksum).
#include <fuzzer/FuzzedDataProvider.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/shared_bytes.h"
#include "kvstore/object_file.h"

namespace {

namespace kvstore = flashserve::kvstore;

std::string Hex(FuzzedDataProvider& in, size_t max_chars) {
  std::string out;
  const size_t n = in.ConsumeIntegralInRange<size_t>(1, max_chars);
  for (size_t i = 0; i < n; ++i) out.push_back("0123456789abcdef"[in.ConsumeIntegral<uint8_t>() & 15]);
  return out;
}

void RoundTrip(FuzzedDataProvider& in) {
  kvstore::ObjectHeader h;
  h.key.kind = static_cast<kvstore::ObjectKind>(in.ConsumeIntegralInRange<uint8_t>(1, 3));
  for (auto& b : h.key.hash) b = in.ConsumeIntegral<uint8_t>();
  h.fingerprint = Hex(in, kvstore::kMaxFingerprintChars);
  h.ttl_class = in.ConsumeBool() ? "chat" : "agent-3d";
  h.tokens = in.ConsumeIntegral<int64_t>();
  h.created_unix = in.ConsumeIntegral<int64_t>();
  h.expiry_unix = in.ConsumeIntegral<int64_t>();
  const uint64_t flip = in.ConsumeIntegral<uint64_t>();
  const std::string payload = in.ConsumeRemainingBytesAsString();
  h.payload_bytes = payload.size();
  h.payload_checksum = kvstore::Checksum64(payload);
  std::string file = kvstore::EncodeHeader(&h) + payload;
  kvstore::ReadOptions options;
  options.now_unix = INT64_MIN;
  options.expected_key = &h.key;
  options.fingerprint = h.fingerprint;
  const kvstore::ReadOutcome ok = kvstore::CheckObjectBytes(flashserve::base::MakeSharedBytes(file), options);
  if (ok.verdict != kvstore::Verdict::kOk || ok.header.tokens != h.tokens || ok.header.expiry_unix != h.expiry_unix ||
      ok.header.ttl_class != h.ttl_class || !ok.payload || *ok.payload != payload) {
    __builtin_trap();
  }
  const uint64_t bit = flip % (8 * file.size());
  file[bit / 8] = static_cast<char>(file[bit / 8] ^ (1 << (bit % 8)));
  const kvstore::ReadOutcome bad = kvstore::CheckObjectBytes(flashserve::base::MakeSharedBytes(file), options);
  if (bad.verdict == kvstore::Verdict::kOk) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] & 1) {
    FuzzedDataProvider in(data + 1, size - 1);
    RoundTrip(in);
    return 0;
  }
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  kvstore::ReadOptions options;
  options.now_unix = INT64_MIN;
  const kvstore::ReadOutcome outcome = kvstore::CheckObjectBytes(flashserve::base::MakeSharedBytes(bytes), options);
  if (outcome.verdict == kvstore::Verdict::kOk &&
      outcome.header.header_bytes + outcome.header.payload_bytes != bytes.size()) {
    __builtin_trap();
  }
  kvstore::ObjectKey key;
  if (kvstore::ParseObjectFileName(bytes, &key) && kvstore::ObjectFileName(key) != bytes) __builtin_trap();
  return 0;
}
