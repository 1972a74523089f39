// A KV store directory as a worker finds it after a crash, a full disk or a hostile neighbour:
// sound, expired, corrupt, truncated, foreign, misplaced and temporary objects, junk names,
// symbolic links to a directory outside the root. The store opens it (as L2 or L3) and fetches
// every object, then `flashserve kv gc`'s walk runs twice. Only sound objects are served, every
// one of them is, the walk agrees, and nothing outside the root is touched.
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kvstore/dir_tool.h"
#include "kvstore/kv_store.h"
#include "kvstore/object_file.h"
#include "kvstore/test_util.h"

namespace {

namespace kvstore = flashserve::kvstore;
namespace fsys = std::filesystem;

constexpr char kFingerprint[] = "f00d";
constexpr char kOtherFingerprint[] = "beef";
constexpr int64_t kNow = 1'800'000'000;

enum class Expect : uint8_t { kServed, kNotServed };

struct Tree {
  std::string root, outside;
  std::map<kvstore::ObjectKey, Expect> keys;  // keys under this model's folder
  int64_t sound_elsewhere = 0;                 // sound objects of the other model
  // Shard folders to replace by links to the outside folder (made last, where nothing else went).
  std::vector<std::pair<kvstore::ObjectKey, std::string>> linked_shards;
};

void WriteFile(const std::string& path, const std::string& bytes) {
  fsys::create_directories(fsys::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string ObjectBytes(FuzzedDataProvider& in, const kvstore::ObjectKey& key, const std::string& fingerprint,
                        int64_t expiry) {
  kvstore::ObjectHeader h;
  h.key = key;
  h.fingerprint = fingerprint;
  h.ttl_class = in.ConsumeBool() ? "chat" : "agent";
  h.tokens = in.ConsumeIntegralInRange<int64_t>(0, 4096);
  h.created_unix = kNow - 10;
  h.expiry_unix = expiry;
  const std::string payload = in.ConsumeBytesAsString(in.ConsumeIntegralInRange<size_t>(0, 256));
  h.payload_bytes = payload.size();
  h.payload_checksum = kvstore::Checksum64(payload);
  return kvstore::EncodeHeader(&h) + payload;
}

kvstore::ObjectKey NewKey(FuzzedDataProvider& in, size_t index) {
  kvstore::ObjectKey key;
  key.kind = static_cast<kvstore::ObjectKind>(in.ConsumeIntegralInRange<uint8_t>(1, 2));
  for (auto& b : key.hash) b = in.ConsumeIntegral<uint8_t>();
  key.hash[31] = static_cast<uint8_t>(index);  // one file per key
  key.hash[30] = static_cast<uint8_t>(index >> 8);
  return key;
}

// One entry of the tree; what the store must do with it goes into tree->keys.
void AddEntry(FuzzedDataProvider& in, size_t index, Tree* tree) {
  const kvstore::ObjectKey key = NewKey(in, index);
  const std::string path = kvstore::ObjectPath(tree->root, kFingerprint, key);
  const int64_t expiry = kNow + in.ConsumeIntegralInRange<int64_t>(-100, 1'000'000);
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
    case 1: {  // sound, or expired
      WriteFile(path, ObjectBytes(in, key, kFingerprint, expiry));
      tree->keys[key] = expiry > kNow ? Expect::kServed : Expect::kNotServed;
      break;
    }
    case 2: {  // one bit flipped anywhere
      std::string bytes = ObjectBytes(in, key, kFingerprint, kNow + 1000);
      const size_t bit = in.ConsumeIntegralInRange<size_t>(0, 8 * bytes.size() - 1);
      bytes[bit / 8] = static_cast<char>(bytes[bit / 8] ^ (1 << (bit % 8)));
      WriteFile(path, bytes);
      tree->keys[key] = Expect::kNotServed;
      break;
    }
    case 3: {  // truncated or extended
      std::string bytes = ObjectBytes(in, key, kFingerprint, kNow + 1000);
      if (in.ConsumeBool()) {
        bytes.resize(in.ConsumeIntegralInRange<size_t>(0, bytes.size() - 1));
      } else {
        bytes += in.ConsumeBytesAsString(in.ConsumeIntegralInRange<size_t>(1, 8)) + "x";
      }
      WriteFile(path, bytes);
      tree->keys[key] = Expect::kNotServed;
      break;
    }
    case 4:  // another model's object in this model's folder
      WriteFile(path, ObjectBytes(in, key, kOtherFingerprint, kNow + 1000));
      tree->keys[key] = Expect::kNotServed;
      break;
    case 5: {  // a sound object in the wrong shard folder
      std::string bytes = ObjectBytes(in, key, kFingerprint, kNow + 1000);
      const std::string name = kvstore::ObjectFileName(key);
      WriteFile(tree->root + "/" + kFingerprint + "/" + (name[0] == '0' ? "1" : "0") + name.substr(1, 1) + "/" +
                    name.substr(2, 2) + "/" + name,
                bytes);
      tree->keys[key] = Expect::kNotServed;
      break;
    }
    case 6:  // raw bytes under an object's name, or junk names and temporary files beside it
      if (in.ConsumeBool()) {
        WriteFile(path, in.ConsumeBytesAsString(in.ConsumeIntegralInRange<size_t>(0, 300)));
        tree->keys[key] = Expect::kNotServed;
      } else {
        const std::string junk = in.ConsumeRandomLengthString(24);
        if (junk.empty() || junk.find_first_of(std::string("/\0", 2)) != std::string::npos || junk == "." ||
            junk == "..") {
          break;
        }
        WriteFile(fsys::path(path).parent_path().string() + "/" + junk, "junk");
        WriteFile(path + ".tmp." + std::to_string(index), in.ConsumeRandomLengthString(64));
      }
      break;
    case 7: {  // a symbolic link to a sound object outside the root, under an object's name
      const std::string target = tree->outside + "/" + kvstore::ObjectFileName(key);
      WriteFile(target, ObjectBytes(in, key, kFingerprint, kNow + 1000));
      fsys::create_directories(fsys::path(path).parent_path());
      fsys::create_symlink(target, path);
      tree->keys[key] = Expect::kNotServed;
      break;
    }
    case 8:  // a shard folder that is a link to the outside folder
      tree->linked_shards.emplace_back(key, ObjectBytes(in, key, kFingerprint, kNow + 1000));
      break;
    default:  // a sound object of the other model, in its own folder: not this store's business
      WriteFile(kvstore::ObjectPath(tree->root, kOtherFingerprint, key),
                ObjectBytes(in, key, kOtherFingerprint, kNow + 1000));
      ++tree->sound_elsewhere;
      break;
  }
}

void LinkShards(Tree* tree) {
  for (const auto& [key, bytes] : tree->linked_shards) {
    const std::string name = kvstore::ObjectFileName(key);
    const std::string shard = tree->root + "/" + kFingerprint + "/" + name.substr(0, 2);
    const std::string leaf = shard + "/" + name.substr(2, 2);
    if (fsys::symlink_status(leaf).type() != fsys::file_type::not_found) continue;
    fsys::create_directories(shard);
    fsys::create_symlink(tree->outside, leaf);
    WriteFile(tree->outside + "/" + name, bytes);
    tree->keys[key] = Expect::kNotServed;
  }
}

// Every file under dir with its bytes (links not followed).
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fsys::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    out[e.path().string()] = std::string(std::istreambuf_iterator<char>(f), {});
  }
  return out;
}

void CheckStore(FuzzedDataProvider& in, const Tree& tree) {
  kvstore::testing::FakeClock clock(kNow);
  kvstore::StoreConfig config;
  config.fingerprint = kFingerprint;
  config.memory_bytes = 64 << 20;
  const bool shared = in.ConsumeBool();
  (shared ? config.shared_dir : config.disk_dir) = tree.root;
  (shared ? config.shared_bytes : config.disk_bytes) = 1 << 30;
  config.background_gc = false;
  config.io_threads = in.ConsumeIntegralInRange<int>(1, 2);
  config.shared_rescan_seconds = 0;
  auto store = kvstore::KvStore::Open(config, clock);
  if (!store.ok()) __builtin_trap();
  std::vector<kvstore::ObjectKey> keys;
  for (const auto& [key, expect] : tree.keys) {
    const bool located = (*store)->Locate(key).has_value();
    if (expect == Expect::kServed && !located) __builtin_trap();
    keys.push_back(key);
  }
  std::promise<std::vector<bool>> fetched;
  (*store)->Fetch(keys, [&](std::vector<bool> got) { fetched.set_value(std::move(got)); });
  const std::vector<bool> present = fetched.get_future().get();
  if (present.size() != keys.size()) __builtin_trap();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (present[i] != (tree.keys.at(keys[i]) == Expect::kServed)) {
      std::fprintf(stderr, "kv_dir_scan_fuzz: %s was %s\n", kvstore::ObjectFileName(keys[i]).c_str(),
                   present[i] ? "served" : "not served");
      __builtin_trap();
    }
  }
  (*store)->Close();
}

void CheckWalk(const Tree& tree) {
  int64_t served = 0;
  for (const auto& [key, expect] : tree.keys) served += expect == Expect::kServed;
  kvstore::DirScanOptions options;
  options.now_unix = kNow;
  options.verify_payload = true;
  options.delete_bad = true;
  options.delete_expired = true;
  auto first = kvstore::ScanStoreDir(*kvstore::FileSystem::Posix(), tree.root, options);
  if (!first.ok() || first->objects - first->expired != served + tree.sound_elsewhere) __builtin_trap();
  auto again = kvstore::ScanStoreDir(*kvstore::FileSystem::Posix(), tree.root, options);
  if (!again.ok() || !again->bad.empty() || again->expired != 0 || again->objects != served + tree.sound_elsewhere) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string pattern = "/tmp/fs_kv_dir_fuzz_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return 0;
  Tree tree{pattern + "/root", pattern + "/outside", {}, 0, {}};
  fsys::create_directories(tree.root);
  fsys::create_directories(tree.outside);
  WriteFile(tree.outside + "/sentinel", "not the store's");
  const size_t entries = in.ConsumeIntegralInRange<size_t>(0, 24);
  for (size_t i = 0; i < entries && in.remaining_bytes() > 0; ++i) AddEntry(in, i, &tree);
  LinkShards(&tree);
  const auto outside_before = Snapshot(tree.outside);
  CheckStore(in, tree);
  CheckWalk(tree);
  if (Snapshot(tree.outside) != outside_before) __builtin_trap();
  fsys::remove_all(pattern);  // does not follow links
  return 0;
}
