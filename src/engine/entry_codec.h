// Lossless compact encodings of entry vectors (rows of `dim` floats) used by the state codec:
// raw f32; FP8 e4m3 on the leading `nope` channels with one ue8m0 scale per 64 (trailing
// channels raw f32; V4 KV); FP8 e4m3 on all channels with one ue8m0 scale per 32 (V4.1 raw
// KV); FP4 e2m1 with one ue8m0 scale per 32 (indexer keys); FP4 e2m1 with one e4m3 scale per
// 16 (V4.1 compressed KV). Encode* returns false when the values are not exactly
// representable, so the caller falls back to raw. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flashserve::engine {

enum class EntryEncoding : uint8_t { kRawF32 = 0, kFp8Nope = 1, kFp4 = 2, kFp8Block32 = 3, kFp4E4m3 = 4 };
constexpr uint8_t kMaxEntryEncoding = 4;

int64_t EncodedEntryBytes(EntryEncoding enc, int dim, int nope);
bool EncodeEntries(EntryEncoding enc, const float* rows, int64_t count, int dim, int nope, std::string* out);
bool DecodeEntries(EntryEncoding enc, std::string_view bytes, int64_t count, int dim, int nope, float* rows);

}  // namespace flashserve::engine
