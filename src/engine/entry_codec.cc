// Entry encodings (engine/entry_codec.h).
#include "engine/entry_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/number_formats.h"

namespace flashserve::engine {
namespace {

// Exact power-of-two block scale for values already on a (grid * 2^k) lattice: the smallest
// power of two with amax / scale <= qmax. Returns the ue8m0 byte.
uint8_t BlockScale(const float* x, int n, float qmax, float* scale) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  if (amax == 0.0f) {
    *scale = 1.0f;
    return 127;
  }
  int e;
  std::frexp(amax / qmax, &e);  // amax/qmax in [2^(e-1), 2^e)
  float s = std::ldexp(1.0f, e);
  if (amax / std::ldexp(1.0f, e - 1) <= qmax) s = std::ldexp(1.0f, e - 1);
  *scale = s;
  int biased = static_cast<int>(std::lround(std::log2(s))) + 127;
  return static_cast<uint8_t>(std::clamp(biased, 0, 254));
}

// FP8 blocks of `block` over x[0, n): per block one ue8m0 byte then the codes.
bool EncodeFp8Blocks(const float* x, int n_total, int block, std::string* out) {
  for (int b = 0; b < n_total; b += block) {
    const int n = std::min(block, n_total - b);
    float scale;
    uint8_t sb = BlockScale(x + b, n, 448.0f, &scale);
    if (model::E8m0ToFloat(sb) != scale) return false;
    out->push_back(static_cast<char>(sb));
    for (int i = 0; i < n; ++i) {
      uint8_t q = model::FloatToE4m3(x[b + i] / scale);
      if (model::E4m3ToFloat(q) * scale != x[b + i]) return false;
      out->push_back(static_cast<char>(q));
    }
  }
  return true;
}

bool EncodeFp8Row(const float* x, int dim, int nope, std::string* out) {
  if (!EncodeFp8Blocks(x, nope, 64, out)) return false;
  out->append(reinterpret_cast<const char*>(x + nope), sizeof(float) * (dim - nope));
  return true;
}

// n values (even n) as e2m1 codes times `scale`, two per byte (low nibble first), into codes;
// false unless every value is exactly code * scale.
bool PackE2m1Exact(const float* x, int n, float scale, uint8_t* codes) {
  for (int i = 0; i < n; i += 2) {
    const uint8_t lo = model::FloatToE2m1(x[i] / scale), hi = model::FloatToE2m1(x[i + 1] / scale);
    if (model::E2m1ToFloat(lo) * scale != x[i] || model::E2m1ToFloat(hi) * scale != x[i + 1]) return false;
    codes[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
  }
  return true;
}

// Finds the e4m3 scale and e2m1 codes that reproduce a 16-value block exactly: the largest
// magnitude is code * scale for one of the grid's magnitudes.
bool EncodeFp4E4m3Block(const float* x, std::string* out) {
  float amax = 0.0f;
  for (int i = 0; i < 16; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  uint8_t codes[8];
  auto try_scale = [&](uint8_t sb) {
    const float scale = model::E4m3ToFloat(sb);
    if (!(scale > 0.0f) || !PackE2m1Exact(x, 16, scale, codes)) return false;
    out->push_back(static_cast<char>(sb));
    out->append(reinterpret_cast<const char*>(codes), 8);
    return true;
  };
  if (amax == 0.0f) return try_scale(model::FloatToE4m3(1.0f));
  for (float grid : {6.0f, 4.0f, 3.0f, 2.0f, 1.5f, 1.0f, 0.5f}) {
    const uint8_t sb = model::FloatToE4m3(amax / grid);
    for (int delta : {0, -1, 1})
      if (sb + delta >= 1 && sb + delta < 0x7F && try_scale(static_cast<uint8_t>(sb + delta))) return true;
  }
  return false;
}

bool EncodeFp4Row(const float* x, int dim, std::string* out) {
  for (int b = 0; b < dim; b += 32) {
    float scale;
    uint8_t sb = BlockScale(x + b, 32, 6.0f, &scale);
    uint8_t codes[16];
    if (model::E8m0ToFloat(sb) != scale || !PackE2m1Exact(x + b, 32, scale, codes)) return false;
    out->push_back(static_cast<char>(sb));
    out->append(reinterpret_cast<const char*>(codes), 16);
  }
  return true;
}

// Decoders of the block forms: per block one scale byte (ue8m0, or e4m3 for kFp4E4m3) then the
// codes; each returns the position after what it read.
const uint8_t* DecodeFp8Blocks(const uint8_t* p, int n_total, int block, float* x) {
  for (int b = 0; b < n_total; b += block) {
    const float scale = model::E8m0ToFloat(*p++);
    for (int i = 0; i < std::min(block, n_total - b); ++i) x[b + i] = model::E4m3ToFloat(*p++) * scale;
  }
  return p;
}

const uint8_t* DecodeFp4Blocks(const uint8_t* p, int n_total, int block, bool e4m3_scale, float* x) {
  for (int b = 0; b < n_total; b += block) {
    const float scale = e4m3_scale ? model::E4m3ToFloat(*p) : model::E8m0ToFloat(*p);
    ++p;
    for (int i = 0; i < block; i += 2, ++p) {
      x[b + i] = model::E2m1ToFloat(*p & 0xF) * scale;
      x[b + i + 1] = model::E2m1ToFloat(*p >> 4) * scale;
    }
  }
  return p;
}

}  // namespace

int64_t EncodedEntryBytes(EntryEncoding enc, int dim, int nope) {
  switch (enc) {
    case EntryEncoding::kRawF32: return 4LL * dim;
    case EntryEncoding::kFp8Nope: return (nope + 63) / 64 + nope + 4LL * (dim - nope);
    case EntryEncoding::kFp4: return dim / 32 + dim / 2;
    case EntryEncoding::kFp8Block32: return dim / 32 + dim;
    case EntryEncoding::kFp4E4m3: return dim / 16 + dim / 2;
  }
  return 0;
}

bool EncodeEntries(EntryEncoding enc, const float* rows, int64_t count, int dim, int nope, std::string* out) {
  if ((enc == EntryEncoding::kFp4 || enc == EntryEncoding::kFp8Block32) && dim % 32 != 0) return false;
  if (enc == EntryEncoding::kFp4E4m3 && dim % 16 != 0) return false;
  out->reserve(out->size() + static_cast<size_t>(count * EncodedEntryBytes(enc, dim, nope)));
  for (int64_t r = 0; r < count; ++r) {
    const float* x = rows + r * dim;
    switch (enc) {
      case EntryEncoding::kRawF32: out->append(reinterpret_cast<const char*>(x), sizeof(float) * dim); break;
      case EntryEncoding::kFp8Nope: if (!EncodeFp8Row(x, dim, nope, out)) return false; break;
      case EntryEncoding::kFp4: if (!EncodeFp4Row(x, dim, out)) return false; break;
      case EntryEncoding::kFp8Block32: if (!EncodeFp8Blocks(x, dim, 32, out)) return false; break;
      case EntryEncoding::kFp4E4m3:
        for (int b = 0; b < dim; b += 16)
          if (!EncodeFp4E4m3Block(x + b, out)) return false;
        break;
    }
  }
  return true;
}

bool DecodeEntries(EntryEncoding enc, std::string_view bytes, int64_t count, int dim, int nope, float* rows) {
  const int64_t per = EncodedEntryBytes(enc, dim, nope);
  if (per <= 0 || static_cast<int64_t>(bytes.size()) != per * count) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  for (int64_t r = 0; r < count; ++r) {
    float* x = rows + r * dim;
    switch (enc) {
      case EntryEncoding::kRawF32: std::memcpy(x, p, sizeof(float) * dim); p += 4 * dim; break;
      case EntryEncoding::kFp8Nope:
        p = DecodeFp8Blocks(p, nope, 64, x);
        std::memcpy(x + nope, p, sizeof(float) * (dim - nope));
        p += 4 * (dim - nope);
        break;
      case EntryEncoding::kFp4: p = DecodeFp4Blocks(p, dim, 32, /*e4m3_scale=*/false, x); break;
      case EntryEncoding::kFp8Block32: p = DecodeFp8Blocks(p, dim, 32, x); break;
      case EntryEncoding::kFp4E4m3: p = DecodeFp4Blocks(p, dim, 16, /*e4m3_scale=*/true, x); break;
    }
  }
  return true;
}

}  // namespace flashserve::engine
