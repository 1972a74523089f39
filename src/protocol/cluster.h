// Wire types between engine workers and the router (design.md section 6): KV events (objects
// stored in / removed from a worker's KV-store tiers, numbered per store epoch), index
// snapshots for resync, and the worker's load report; with their JSON codecs. Pure values and
// functions, any thread; parsing never throws.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace flashserve::protocol {

enum class KvTier : uint8_t { kMemory = 0, kDisk = 1, kShared = 2 };  // L1 DRAM, L2 local dir, L3 shared dir
// A 128-token block / a snapshot at its end / a picture's vision-tower output (keyed by its
// content key, not a chained block hash).
enum class KvObjectKind : uint8_t { kBlock = 1, kBoundary = 2, kImage = 3 };
// Whether a byte read from a file or the wire names one of the kinds.
inline bool IsKvObjectKind(uint8_t kind) { return kind >= 1 && kind <= 3; }

using KvHash = std::array<uint8_t, 32>;  // the chained block hash (same type as kv::BlockHash)

struct KvObject {
  KvTier tier = KvTier::kMemory;
  KvObjectKind kind = KvObjectKind::kBlock;
  KvHash hash{};
  int64_t expiry_unix = 0;  // stored objects: when the store stops returning it (0 = unknown)
};

struct KvEvent {
  uint64_t seq = 0;  // 1, 2, 3, ... within one epoch, no gaps
  bool stored = true;
  KvObject object;
};

// GET /v1/kv/events?after=N: the events with seq > N that the worker still holds. gap = true
// when some were already dropped from its ring (or N is beyond last_seq): resync from a snapshot.
struct KvEventPage {
  std::string epoch;  // changes when the worker's store restarts: resync
  uint64_t first_seq = 0, last_seq = 0;  // the ring's range (last_seq = 0: no events yet)
  bool gap = false;
  std::vector<KvEvent> events;
};

// GET /v1/kv/snapshot: every object the worker's store indexes, as of event `seq` (apply the
// events after it on top; applying an event twice is harmless).
struct KvSnapshot {
  std::string epoch;
  uint64_t seq = 0;
  std::vector<KvObject> objects;
};

// What a worker does in a disaggregated deployment: everything (both), only prompts (prefill:
// it ships each prompt's state to a decode worker), or only generation from shipped state
// (decode). On the wire: "both" | "prefill" | "decode".
// kEncode: runs only the vision tower for other workers' pictures (never chosen for generation).
enum class WorkerRole : uint8_t { kBoth, kPrefill, kDecode, kEncode };
const char* WorkerRoleName(WorkerRole role);
base::Result<WorkerRole> ParseWorkerRole(std::string_view name);  // kInvalidArgument naming the value

// GET /v1/load: what the router's load view and hashing need from a worker.
struct WorkerLoad {
  std::string model;         // served model id
  std::string fingerprint;   // model fingerprint (seeds the block hashes)
  WorkerRole role = WorkerRole::kBoth;
  int encoding_version = 1;  // block-hash seed input
  std::string prompt_format; // chat prompt format the worker encodes with: "v4" | "v41" ("" = not reported)
  int64_t block_tokens = 128;
  int64_t queued_prefill_tokens = 0;  // prompt tokens admitted but not yet computed
  int64_t queued_images = 0;          // pictures waiting for or in the vision tower
  int64_t running = 0, waiting = 0;
  int64_t state_pool_bytes = 0, state_pool_capacity = 0;
  double recent_ttft_seconds = 0;          // moving average (0 = none yet)
  double prefill_tokens_per_second = 0;    // measured by the engine (0 = not measured yet)
  double busy_fraction = 0;                // share of the last minute or so spent on prefill (0..1)
  std::string transfer_address;            // host:port receiving prompt state (decode side); "" = none
  // Counters since the worker started, for the router's live economics (optional on the wire).
  int64_t generated_tokens_total = 0;
  double engine_busy_seconds_total = 0;
  bool kv_enabled = false;                 // events and snapshots are served
  std::string kv_epoch;
  uint64_t kv_last_seq = 0;
};

const char* KvTierName(KvTier tier);          // "memory", "disk", "shared"
const char* KvObjectKindName(KvObjectKind k);  // "block", "boundary", "image"

std::string ToJson(const KvEventPage& page);
std::string ToJson(const KvSnapshot& snapshot);
std::string ToJson(const WorkerLoad& load);
// kInvalidArgument naming the field on any malformed input.
base::Result<KvEventPage> ParseKvEventPage(std::string_view json_text);
base::Result<KvSnapshot> ParseKvSnapshot(std::string_view json_text);
base::Result<WorkerLoad> ParseWorkerLoad(std::string_view json_text);

}  // namespace flashserve::protocol
