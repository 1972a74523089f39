// Object files (kvstore/object_file.h).
#include "kvstore/object_file.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "base/bytes.h"
#include "base/log.h"
#include "fmt/format.h"

namespace flashserve::kvstore {
namespace {

using base::Error;
using base::ErrorCode;

constexpr char kMagic[8] = {'F', 'S', 'K', 'V', 'O', 'B', 'J', '1'};
constexpr size_t kFixedHeaderBytes = 88;

inline uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

Error Corrupt(std::string message) { return Error(ErrorCode::kDataLoss, std::move(message)); }

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

ReadOutcome Outcome(Verdict verdict, std::string detail) {
  ReadOutcome out;
  out.verdict = verdict;
  out.detail = std::move(detail);
  return out;
}

}  // namespace

size_t EncodedHeaderBytes(const ObjectHeader& header) {
  return kFixedHeaderBytes + header.fingerprint.size() + header.ttl_class.size() + 8;
}

std::string EncodeHeader(ObjectHeader* header) {
  base::ByteWriter w;
  w.PutBytes(kMagic, sizeof kMagic);
  w.Put<uint16_t>(kObjectFormatVersion);
  w.Put<uint8_t>(static_cast<uint8_t>(header->key.kind));
  w.Put<uint8_t>(static_cast<uint8_t>(header->ttl_class.size()));
  w.Put<uint16_t>(static_cast<uint16_t>(header->fingerprint.size()));
  header->header_bytes = static_cast<uint32_t>(EncodedHeaderBytes(*header));
  w.Put<uint16_t>(static_cast<uint16_t>(header->header_bytes));
  w.Put<int64_t>(header->tokens);
  w.Put<int64_t>(header->created_unix);
  w.Put<int64_t>(header->expiry_unix);
  w.Put<uint64_t>(header->payload_bytes);
  w.Put<uint64_t>(header->payload_checksum);
  w.PutBytes(header->key.hash.data(), header->key.hash.size());
  w.PutBytes(header->fingerprint.data(), header->fingerprint.size());
  w.PutBytes(header->ttl_class.data(), header->ttl_class.size());
  w.Put<uint64_t>(Checksum64(w.str()));
  return std::move(w.str());
}

base::Result<ObjectHeader> DecodeHeader(std::string_view bytes) {
  if (bytes.size() < kFixedHeaderBytes + 8) return Corrupt(fmt::format("truncated header ({} bytes)", bytes.size()));
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return Corrupt("bad magic");
  base::ByteReader r(bytes.substr(sizeof kMagic));
  uint16_t version = 0, fingerprint_len = 0, header_bytes = 0;
  uint8_t kind = 0, class_len = 0;
  ObjectHeader h;
  r.Get(&version);
  r.Get(&kind);
  r.Get(&class_len);
  r.Get(&fingerprint_len);
  r.Get(&header_bytes);
  if (version != kObjectFormatVersion) return Corrupt(fmt::format("unsupported format version {}", version));
  if (header_bytes != kFixedHeaderBytes + fingerprint_len + class_len + 8 || fingerprint_len > kMaxFingerprintChars ||
      class_len > kMaxClassChars) {
    return Corrupt("bad header length fields");
  }
  if (bytes.size() < header_bytes) return Corrupt(fmt::format("truncated header ({} bytes)", bytes.size()));
  const uint64_t stored = Load64(bytes.data() + header_bytes - 8);
  if (stored != Checksum64(bytes.substr(0, header_bytes - 8))) return Corrupt("header checksum mismatch");
  if (!protocol::IsKvObjectKind(kind)) {
    return Corrupt(fmt::format("unknown object kind {}", kind));
  }
  h.key.kind = static_cast<ObjectKind>(kind);
  r.Get(&h.tokens);
  r.Get(&h.created_unix);
  r.Get(&h.expiry_unix);
  r.Get(&h.payload_bytes);
  r.Get(&h.payload_checksum);
  r.GetBytes(h.key.hash.data(), h.key.hash.size());
  std::string_view fingerprint, ttl_class;
  r.View(fingerprint_len, &fingerprint);
  r.View(class_len, &ttl_class);
  if (r.failed()) return Corrupt("truncated header");
  h.fingerprint = std::string(fingerprint);
  h.ttl_class = std::string(ttl_class);
  h.header_bytes = header_bytes;
  return h;
}

bool IsValidFingerprint(std::string_view fingerprint) {
  if (fingerprint.empty() || fingerprint.size() > kMaxFingerprintChars) return false;
  for (char c : fingerprint) {
    if (!IsLowerHex(c)) return false;
  }
  return true;
}

bool IsValidClassName(std::string_view name) {
  if (name.empty() || name.size() > kMaxClassChars) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}

std::string ObjectFileName(const ObjectKey& key) { return kv::ToHex(key.hash) + "." + KindName(key.kind); }

bool ParseObjectFileName(std::string_view name, ObjectKey* key) {
  const size_t dot = name.find('.');
  if (dot != 64) return false;
  const std::string_view suffix = name.substr(dot + 1);
  if (suffix == KindName(ObjectKind::kBlock)) {
    key->kind = ObjectKind::kBlock;
  } else if (suffix == KindName(ObjectKind::kBoundary)) {
    key->kind = ObjectKind::kBoundary;
  } else if (suffix == KindName(ObjectKind::kImage)) {
    key->kind = ObjectKind::kImage;
  } else {
    return false;
  }
  for (char c : name.substr(0, dot)) {
    if (!IsLowerHex(c)) return false;
  }
  return kv::FromHex(name.substr(0, dot), &key->hash);
}

std::string ObjectPath(const std::string& root, const std::string& fingerprint, const ObjectKey& key) {
  const std::string hex = kv::ToHex(key.hash);
  return fmt::format("{}/{}/{}/{}/{}.{}", root, fingerprint, hex.substr(0, 2), hex.substr(2, 2), hex,
                     KindName(key.kind));
}

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kOk: return "ok";
    case Verdict::kMissing: return "missing";
    case Verdict::kCorrupt: return "corrupt";
    case Verdict::kForeign: return "foreign";
    case Verdict::kExpired: return "expired";
    case Verdict::kIoError: return "io-error";
  }
  return "?";
}

namespace {

// Header checks in ReadObject's order: header, size == header + payload, key, fingerprint,
// expiry. kOk when they pass (the payload is not checked yet).
ReadOutcome CheckHeader(std::string_view head, int64_t file_bytes, const ReadOptions& options) {
  auto header = DecodeHeader(head);
  if (!header.ok()) return Outcome(Verdict::kCorrupt, header.error().message());
  ReadOutcome out;
  out.file_bytes = file_bytes;
  out.header = std::move(header).value();
  const ObjectHeader& h = out.header;
  if (static_cast<uint64_t>(file_bytes) != h.header_bytes + h.payload_bytes) {
    out.verdict = Verdict::kCorrupt;
    out.detail = fmt::format("{} bytes, header says {}", file_bytes, h.header_bytes + h.payload_bytes);
    return out;
  }
  if (options.expected_key != nullptr && !(h.key == *options.expected_key)) {
    out.verdict = Verdict::kCorrupt;
    out.detail = "header key does not match the file name";
    return out;
  }
  if (!options.fingerprint.empty() && h.fingerprint != options.fingerprint) {
    out.verdict = Verdict::kForeign;
    out.detail = "fingerprint " + h.fingerprint;
    return out;
  }
  if (options.now_unix != INT64_MIN && options.now_unix >= h.expiry_unix) {
    out.verdict = Verdict::kExpired;
    out.detail = fmt::format("expired at {}", h.expiry_unix);
    return out;
  }
  out.verdict = Verdict::kOk;
  return out;
}

// The payload checksum over `payload`: out keeps it when it matches, else becomes kCorrupt.
void CheckPayload(Payload payload, ReadOutcome* out) {
  if (Checksum64(*payload) == out->header.payload_checksum) {
    out->payload = std::move(payload);
    return;
  }
  out->verdict = Verdict::kCorrupt;
  out->detail = "payload checksum mismatch";
}

std::string_view Head(std::string_view file) { return file.substr(0, std::min(file.size(), kMaxHeaderBytes)); }

// ReadObject after the open: hints, header, checks, payload.
ReadOutcome ReadOpened(ReadableFile& file, const ReadOptions& options) {
  const int64_t size = file.size();
  if (options.read_payload) {
    file.WillReadAll();
  } else {
    file.WillReadHeaderOnly();  // index scans: one page per object, not a readahead window
  }
  std::string head(static_cast<size_t>(std::min<int64_t>(size, kMaxHeaderBytes)), '\0');
  if (base::Status s = file.ReadAt(0, head.size(), head.data()); !s.ok()) return OutcomeOf(s.error());
  ReadOutcome out = CheckHeader(head, size, options);
  if (out.verdict != Verdict::kOk || !options.read_payload) return out;
  std::string payload(out.header.payload_bytes, '\0');
  if (base::Status s = file.ReadAt(out.header.header_bytes, payload.size(), payload.data()); !s.ok()) {
    ReadOutcome failed = OutcomeOf(s.error());
    failed.header = std::move(out.header);
    failed.file_bytes = size;
    return failed;
  }
  CheckPayload(base::MakeSharedBytes(std::move(payload)), &out);
  return out;
}

}  // namespace

ReadOutcome ReadObject(FileSystem& fs, const std::string& path, const ReadOptions& options) {
  auto file = fs.OpenForRead(path);
  if (!file.ok()) return OutcomeOf(file.error());
  ReadOutcome out = ReadOpened(**file, options);
  if (options.cache == CacheUse::kDrop) (*file)->DropCached();
  return out;
}

ReadOutcome CheckObjectBytes(const Payload& file, const ReadOptions& options) {
  ReadOutcome out = CheckHeader(Head(*file), static_cast<int64_t>(file->size()), options);
  if (out.verdict != Verdict::kOk || !options.read_payload) return out;
  CheckPayload(base::SliceBytes(file, out.header.header_bytes, out.header.payload_bytes), &out);
  return out;
}

ReadOutcome OutcomeOf(const base::Error& error) {
  const ErrorCode code = error.code();
  return Outcome(code == ErrorCode::kNotFound   ? Verdict::kMissing
                 : code == ErrorCode::kDataLoss ? Verdict::kCorrupt
                                                : Verdict::kIoError,
                 error.message());
}

base::Status WriteObject(FileSystem& fs, const std::string& path, ObjectHeader header, std::string_view payload) {
  header.payload_bytes = payload.size();
  header.payload_checksum = Checksum64(payload);
  const std::string encoded = EncodeHeader(&header);
  return fs.WriteAtomic(path, encoded, payload);
}

ReadOutcome RemoveObjectUnlessLive(FileSystem& fs, const std::string& path, const ReadOptions& check,
                                   int64_t now_unix) {
  auto aside = fs.MoveAside(path, now_unix);
  if (!aside.ok()) {
    if (aside.error().code() == ErrorCode::kNotFound) return OutcomeOf(aside.error());  // kMissing
    FS_LOG_THROTTLED(10, kWarning, "kvstore: kept: {}", aside.error().ToString());
    ReadOutcome kept;  // not moved, so not deleted (a linked folder, an I/O error)
    kept.verdict = Verdict::kIoError;
    kept.detail = aside.error().message();
    return kept;
  }
  ReadOutcome out = ReadObject(fs, *aside, check);
  if (out.verdict == Verdict::kIoError) {
    FS_LOG_THROTTLED(10, kWarning, "kvstore: kept {}: cannot check it: {}", path, out.detail);
  }
  if (out.verdict == Verdict::kOk || out.verdict == Verdict::kIoError) {
    const base::Status back = fs.PutBack(*aside, path);
    if (back.ok()) return out;
    if (back.error().code() != ErrorCode::kAlreadyExists) {  // kept aside; scans remove it in time
      FS_LOG_THROTTLED(10, kWarning, "kvstore: {} (the object stays at {})", back.error().ToString(), *aside);
      out.verdict = Verdict::kIoError;
      out.detail = back.error().message();
      return out;
    }
    out.verdict = Verdict::kMissing;  // a newer file took its place: this copy goes
  }
  if (base::Status s = fs.Remove(*aside); !s.ok()) FS_LOG_THROTTLED(10, kWarning, "kvstore: {}", s.error().ToString());
  return out;
}

}  // namespace flashserve::kvstore
