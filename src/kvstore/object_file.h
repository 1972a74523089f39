// The on-disk object: file layout <root>/<fingerprint>/ab/cd/<hash-hex>.<kind>, the header
// (magic, version, fingerprint, kind, tokens, TTL class, expiry, payload and header checksums),
// and reading / writing one object through the FileSystem seam. Pure functions, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/bytes.h"
#include "base/result.h"
#include "kvstore/file_system.h"
#include "kvstore/kv_store.h"

namespace flashserve::kvstore {

// Objects of another version read as corrupt (and are deleted): a new version must come with a
// new fingerprint directory (serve::ModelFingerprint folds it in from version 2 on).
constexpr uint16_t kObjectFormatVersion = 1;
constexpr size_t kMaxFingerprintChars = 128;
constexpr size_t kMaxClassChars = 32;
// Upper bound of an encoded header: the fixed part + longest fingerprint + class + checksum.
constexpr size_t kMaxHeaderBytes = 88 + kMaxFingerprintChars + kMaxClassChars + 8;

struct ObjectHeader {
  ObjectKey key;
  std::string fingerprint;
  std::string ttl_class;
  int64_t tokens = 0;
  int64_t created_unix = 0;
  int64_t expiry_unix = 0;  // expired when now >= expiry_unix
  uint64_t payload_bytes = 0;
  uint64_t payload_checksum = 0;
  uint32_t header_bytes = 0;  // set by Encode/Decode
};

// The payload and header checksum (base/bytes.h; transfer frames use the same function).
using base::Checksum64;

// Size of the encoded header: the fixed part + fingerprint + class + checksum.
size_t EncodedHeaderBytes(const ObjectHeader& header);
// Encodes the header (sets header->header_bytes); the payload follows it in the file.
std::string EncodeHeader(ObjectHeader* header);
// Decodes a header from the first bytes of a file (extra bytes are ignored): kDataLoss on a bad
// magic, version, length field or header checksum.
base::Result<ObjectHeader> DecodeHeader(std::string_view bytes);

// Lower-case hex of [0-9a-f] only, 1..kMaxFingerprintChars long: safe as a path component.
bool IsValidFingerprint(std::string_view fingerprint);
bool IsValidClassName(std::string_view name);
// "<hash-hex>.<kind>" and its inverse (false for anything else, including temporary names).
std::string ObjectFileName(const ObjectKey& key);
bool ParseObjectFileName(std::string_view name, ObjectKey* key);
// <root>/<fingerprint>/ab/cd/<hash-hex>.<kind>; fingerprint must be valid.
std::string ObjectPath(const std::string& root, const std::string& fingerprint, const ObjectKey& key);

enum class Verdict : uint8_t {
  kOk,
  kMissing,  // no such file
  kCorrupt,  // bad header or checksum, truncated, trailing bytes, wrong key, not a regular file
  kForeign,  // written for another model fingerprint
  kExpired,
  kIoError,  // the read failed (kept: may be transient)
};
const char* VerdictName(Verdict verdict);

struct ReadOutcome {
  Verdict verdict = Verdict::kMissing;
  ObjectHeader header;
  Payload payload;          // kOk with read_payload only (else null)
  int64_t file_bytes = 0;
  std::string detail;       // why, for logs and tools
};

// Whether a read file's pages stay in the page cache (tiers read with direct I/O drop them:
// their DRAM tier is the cache).
enum class CacheUse : uint8_t { kKeep, kDrop };

struct ReadOptions {
  const ObjectKey* expected_key = nullptr;  // checked against the header when set
  std::string_view fingerprint;             // empty = accept any
  int64_t now_unix = 0;                     // expiry check; INT64_MIN = skip it
  bool read_payload = true;                 // false: header and file size only (index scans)
  CacheUse cache = CacheUse::kKeep;         // kDrop: drop the file's pages after reading
};

// Reads and checks one object. Checks run in order: open, header, size == header + payload,
// key, fingerprint, expiry, then the payload checksum.
ReadOutcome ReadObject(FileSystem& fs, const std::string& path, const ReadOptions& options);
// The same checks on a whole file already in memory (FileSystem::ReadWholeFilesDirect); the payload
// is a slice of `file`, sharing its memory (no copy).
ReadOutcome CheckObjectBytes(const Payload& file, const ReadOptions& options);
// The verdict for a file that could not be opened or read: kNotFound = kMissing, kDataLoss (a
// symlink, not a regular file, short) = kCorrupt, anything else kIoError.
ReadOutcome OutcomeOf(const base::Error& error);

// Encodes the header and writes header + payload atomically.
base::Status WriteObject(FileSystem& fs, const std::string& path, ObjectHeader header, std::string_view payload);

// Deletes the object file at path unless, read again with `check`, it is sound and unexpired:
// in a shared directory another worker may have replaced it since it was judged. The file is
// moved aside first, so that what is checked is what is deleted; a live one (or one that could
// not be read: kIoError) goes back unless a newer file took its place meanwhile. Returns the
// check's outcome: kOk = kept, with its header; kMissing = nothing was there any more;
// kIoError = kept (unreadable, or it could not be put back: then it stays aside, logged).
// now_unix: the caller's clock, for the name it is moved aside under (FileSystem::MoveAside).
ReadOutcome RemoveObjectUnlessLive(FileSystem& fs, const std::string& path, const ReadOptions& check,
                                   int64_t now_unix);

// Whether RemoveObjectUnlessLive deleted the file, by the verdict it returned.
inline bool Deleted(Verdict v) { return v != Verdict::kOk && v != Verdict::kMissing && v != Verdict::kIoError; }

}  // namespace flashserve::kvstore
