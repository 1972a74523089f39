// JSON codecs of the worker <-> router wire types (protocol/cluster.h).
#include "protocol/cluster.h"

#include <nlohmann/json.hpp>

#include "base/bytes.h"

namespace flashserve::protocol {
namespace {

using Json = nlohmann::json;
using base::Error;
using base::ErrorCode;

Error Bad(const std::string& what) { return Error(ErrorCode::kInvalidArgument, "malformed cluster message: " + what); }

Json ObjectJson(const KvObject& o) {
  return Json{{"tier", KvTierName(o.tier)}, {"kind", KvObjectKindName(o.kind)}, {"hash", base::HexEncode(o.hash)},
              {"expiry", o.expiry_unix}};
}

base::Result<KvObject> ObjectFromJson(const Json& j, const std::string& path) {
  if (!j.is_object()) return Bad(path + ": expected an object");
  KvObject o;
  const auto tier = j.find("tier"), kind = j.find("kind"), hash = j.find("hash"), expiry = j.find("expiry");
  if (tier == j.end() || !tier->is_string()) return Bad(path + ".tier: expected a string");
  const std::string& t = tier->get_ref<const std::string&>();
  if (t == "memory") o.tier = KvTier::kMemory;
  else if (t == "disk") o.tier = KvTier::kDisk;
  else if (t == "shared") o.tier = KvTier::kShared;
  else return Bad(path + ".tier: unknown tier '" + t + "'");
  if (kind == j.end() || !kind->is_string()) return Bad(path + ".kind: expected a string");
  const std::string& k = kind->get_ref<const std::string&>();
  if (k == "block") o.kind = KvObjectKind::kBlock;
  else if (k == "boundary") o.kind = KvObjectKind::kBoundary;
  else if (k == "image") o.kind = KvObjectKind::kImage;
  else return Bad(path + ".kind: unknown kind '" + k + "'");
  if (hash == j.end() || !hash->is_string() || !base::HexDecode(hash->get_ref<const std::string&>(), o.hash))
    return Bad(path + ".hash: expected 64 hex digits");
  if (expiry != j.end()) {
    if (!expiry->is_number_integer()) return Bad(path + ".expiry: expected an integer");
    o.expiry_unix = expiry->get<int64_t>();
  }
  return o;
}

base::Result<Json> ParseObject(std::string_view text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad("not a JSON object");
  return j;
}

// Reads an unsigned / signed integer / string / bool / number field; absent fields keep *out.
bool GetU64(const Json& j, const char* key, uint64_t* out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) return false;
  *out = it->get<uint64_t>();
  return true;
}
bool GetI64(const Json& j, const char* key, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_number_integer()) return false;
  *out = it->get<int64_t>();
  return true;
}
bool GetString(const Json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}
bool GetDouble(const Json& j, const char* key, double* out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_number()) return false;
  *out = it->get<double>();
  return true;
}
bool GetBool(const Json& j, const char* key, bool* out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_boolean()) return false;
  *out = it->get<bool>();
  return true;
}

}  // namespace

const char* KvTierName(KvTier tier) {
  switch (tier) {
    case KvTier::kMemory: return "memory";
    case KvTier::kDisk: return "disk";
    case KvTier::kShared: return "shared";
  }
  return "unknown";
}

const char* KvObjectKindName(KvObjectKind k) {
  switch (k) {
    case KvObjectKind::kBoundary: return "boundary";
    case KvObjectKind::kImage: return "image";
    default: return "block";
  }
}

const char* WorkerRoleName(WorkerRole role) {
  switch (role) {
    case WorkerRole::kPrefill:
      return "prefill";
    case WorkerRole::kEncode:
      return "encode";
    case WorkerRole::kDecode:
      return "decode";
    case WorkerRole::kBoth:
      break;
  }
  return "both";
}

base::Result<WorkerRole> ParseWorkerRole(std::string_view name) {
  for (WorkerRole r : {WorkerRole::kBoth, WorkerRole::kPrefill, WorkerRole::kDecode, WorkerRole::kEncode}) {
    if (name == WorkerRoleName(r)) return r;
  }
  return base::MakeError(base::ErrorCode::kInvalidArgument,
                         "unknown worker role '" + std::string(name) + "' (both, prefill, decode or encode)");
}

std::string ToJson(const KvEventPage& page) {
  Json events = Json::array();
  for (const KvEvent& e : page.events) {
    Json o = ObjectJson(e.object);
    o["seq"] = e.seq;
    o["op"] = e.stored ? "stored" : "removed";
    events.push_back(std::move(o));
  }
  return Json{{"epoch", page.epoch}, {"first_seq", page.first_seq}, {"last_seq", page.last_seq},
              {"gap", page.gap}, {"events", std::move(events)}}
      .dump();
}

std::string ToJson(const KvSnapshot& snapshot) {
  Json objects = Json::array();
  for (const KvObject& o : snapshot.objects) objects.push_back(ObjectJson(o));
  return Json{{"epoch", snapshot.epoch}, {"seq", snapshot.seq}, {"objects", std::move(objects)}}.dump();
}

std::string ToJson(const WorkerLoad& l) {
  return Json{{"model", l.model},
              {"fingerprint", l.fingerprint},
              {"role", WorkerRoleName(l.role)},
              {"encoding_version", l.encoding_version},
              {"prompt_format", l.prompt_format},
              {"block_tokens", l.block_tokens},
              {"queued_prefill_tokens", l.queued_prefill_tokens},
              {"queued_images", l.queued_images},
              {"running", l.running},
              {"waiting", l.waiting},
              {"state_pool_bytes", l.state_pool_bytes},
              {"state_pool_capacity", l.state_pool_capacity},
              {"recent_ttft_seconds", l.recent_ttft_seconds},
              {"prefill_tokens_per_second", l.prefill_tokens_per_second},
              {"busy_fraction", l.busy_fraction},
              {"generated_tokens_total", l.generated_tokens_total},
              {"engine_busy_seconds_total", l.engine_busy_seconds_total},
              {"transfer_address", l.transfer_address},
              {"kv_enabled", l.kv_enabled},
              {"kv_epoch", l.kv_epoch},
              {"kv_last_seq", l.kv_last_seq}}
      .dump();
}

base::Result<KvEventPage> ParseKvEventPage(std::string_view json_text) {
  FS_ASSIGN_OR_RETURN(Json j, ParseObject(json_text));
  KvEventPage page;
  if (!GetString(j, "epoch", &page.epoch) || !GetU64(j, "first_seq", &page.first_seq) ||
      !GetU64(j, "last_seq", &page.last_seq) || !GetBool(j, "gap", &page.gap))
    return Bad("event page header");
  auto events = j.find("events");
  if (events == j.end() || !events->is_array()) return Bad("events: expected an array");
  page.events.reserve(events->size());
  for (size_t i = 0; i < events->size(); ++i) {
    const Json& e = (*events)[i];
    const std::string path = "events[" + std::to_string(i) + "]";
    FS_ASSIGN_OR_RETURN(KvObject object, ObjectFromJson(e, path));
    KvEvent event;
    event.object = object;
    std::string op;
    if (!GetU64(e, "seq", &event.seq) || event.seq == 0) return Bad(path + ".seq: expected a positive integer");
    if (!GetString(e, "op", &op) || (op != "stored" && op != "removed")) return Bad(path + ".op: expected stored|removed");
    event.stored = op == "stored";
    page.events.push_back(event);
  }
  return page;
}

base::Result<KvSnapshot> ParseKvSnapshot(std::string_view json_text) {
  FS_ASSIGN_OR_RETURN(Json j, ParseObject(json_text));
  KvSnapshot snapshot;
  if (!GetString(j, "epoch", &snapshot.epoch) || !GetU64(j, "seq", &snapshot.seq)) return Bad("snapshot header");
  auto objects = j.find("objects");
  if (objects == j.end() || !objects->is_array()) return Bad("objects: expected an array");
  snapshot.objects.reserve(objects->size());
  for (size_t i = 0; i < objects->size(); ++i) {
    FS_ASSIGN_OR_RETURN(KvObject o, ObjectFromJson((*objects)[i], "objects[" + std::to_string(i) + "]"));
    snapshot.objects.push_back(o);
  }
  return snapshot;
}

base::Result<WorkerLoad> ParseWorkerLoad(std::string_view json_text) {
  FS_ASSIGN_OR_RETURN(Json j, ParseObject(json_text));
  WorkerLoad l;
  int64_t version = l.encoding_version;
  std::string role = WorkerRoleName(l.role);
  const bool ok = GetString(j, "model", &l.model) && GetString(j, "fingerprint", &l.fingerprint) &&
                  GetString(j, "role", &role) && GetI64(j, "encoding_version", &version) &&
                  GetString(j, "prompt_format", &l.prompt_format) &&
                  GetI64(j, "block_tokens", &l.block_tokens) &&
                  GetI64(j, "queued_prefill_tokens", &l.queued_prefill_tokens) &&
                  GetI64(j, "queued_images", &l.queued_images) && GetI64(j, "running", &l.running) &&
                  GetI64(j, "waiting", &l.waiting) && GetI64(j, "state_pool_bytes", &l.state_pool_bytes) &&
                  GetI64(j, "state_pool_capacity", &l.state_pool_capacity) &&
                  GetDouble(j, "recent_ttft_seconds", &l.recent_ttft_seconds) &&
                  GetDouble(j, "prefill_tokens_per_second", &l.prefill_tokens_per_second) &&
                  GetDouble(j, "busy_fraction", &l.busy_fraction) &&
                  GetI64(j, "generated_tokens_total", &l.generated_tokens_total) &&
                  GetDouble(j, "engine_busy_seconds_total", &l.engine_busy_seconds_total) &&
                  GetString(j, "transfer_address", &l.transfer_address) && GetBool(j, "kv_enabled", &l.kv_enabled) && GetString(j, "kv_epoch", &l.kv_epoch) &&
                  GetU64(j, "kv_last_seq", &l.kv_last_seq);
  if (!ok) return Bad("load report: a field has the wrong type");
  FS_ASSIGN_OR_RETURN(l.role, ParseWorkerRole(role));
  if (l.fingerprint.empty()) return Bad("load report: fingerprint is missing");
  if (l.block_tokens <= 0) return Bad("load report: block_tokens must be positive");
  l.encoding_version = static_cast<int>(version);
  return l;
}

}  // namespace flashserve::protocol
