// Aligner rows by content key in memory and in the KV store (serve/encoder_cache.h).
#include "serve/encoder_cache.h"

#include <bit>
#include <cstring>
#include <future>

#include <fmt/format.h>

namespace flashserve::serve {

namespace {

static_assert(std::endian::native == std::endian::little, "image payloads are written in host order");
constexpr char kMagic[4] = {'F', 'S', 'I', 'R'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8;

kvstore::ObjectKey StoreKey(const ImageKey& key) { return {kvstore::ObjectKind::kImage, key}; }

int64_t RowBytes(const ImageRows& rows) { return static_cast<int64_t>(rows->size() * sizeof(float)); }

}  // namespace

base::SharedBytes EncodeImageRows(const std::vector<float>& rows, int64_t columns) {
  const int64_t n = columns > 0 ? static_cast<int64_t>(rows.size()) / columns : 0;
  std::string out(kHeaderBytes + rows.size() * sizeof(float), '\0');
  std::memcpy(out.data(), kMagic, 4);
  std::memcpy(out.data() + 4, &kVersion, 4);
  std::memcpy(out.data() + 8, &n, 8);
  std::memcpy(out.data() + 16, &columns, 8);
  if (!rows.empty()) std::memcpy(out.data() + kHeaderBytes, rows.data(), rows.size() * sizeof(float));
  return base::MakeSharedBytes(std::move(out));
}

base::Result<ImageRows> DecodeImageRows(std::string_view payload, int64_t columns) {
  auto bad = [](const std::string& why) { return base::MakeError(base::ErrorCode::kDataLoss, "image rows: " + why); };
  if (payload.size() < kHeaderBytes || std::memcmp(payload.data(), kMagic, 4) != 0) return bad("not an image payload");
  uint32_t version = 0;
  int64_t n = 0, cols = 0;
  std::memcpy(&version, payload.data() + 4, 4);
  std::memcpy(&n, payload.data() + 8, 8);
  std::memcpy(&cols, payload.data() + 16, 8);
  if (version != kVersion) return bad(fmt::format("unsupported version {}", version));
  if (cols != columns) return bad(fmt::format("{} columns, the model has {}", cols, columns));
  if (n <= 0 || n > (int64_t{1} << 24) || payload.size() - kHeaderBytes != static_cast<size_t>(n * cols) * sizeof(float))
    return bad("size does not match its header");
  std::vector<float> rows(static_cast<size_t>(n * cols));
  std::memcpy(rows.data(), payload.data() + kHeaderBytes, rows.size() * sizeof(float));
  return std::make_shared<const std::vector<float>>(std::move(rows));
}

EncoderCache::EncoderCache(int64_t hidden, int64_t memory_bytes, kvstore::KvStore* store, std::string ttl_class)
    : hidden_(hidden), memory_bytes_(memory_bytes), store_(store), ttl_class_(std::move(ttl_class)) {}

ImageRows EncoderCache::Find(const ImageKey& key, bool outer_tiers) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = rows_.find(key); it != rows_.end()) {
      ++stats_.hits;
      return it->second;
    }
  }
  if (store_ == nullptr) return nullptr;
  base::SharedBytes payload = store_->GetMemory(StoreKey(key), /*count_miss=*/false);
  if (!payload && outer_tiers) {  // also a key the indexes lack: the shared tier is probed for
    std::promise<void> fetched;   // what other workers (an encode worker) wrote since its scan
    store_->Fetch({StoreKey(key)}, [&fetched](std::vector<bool>) { fetched.set_value(); });
    fetched.get_future().wait();
    payload = store_->GetMemory(StoreKey(key), /*count_miss=*/false);
  }
  if (!payload) return nullptr;
  base::Result<ImageRows> rows = DecodeImageRows(*payload, hidden_);
  if (!rows.ok()) return nullptr;  // another model width under the same key: encode afresh
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.hits;
  ++stats_.store_hits;
  Remember(key, *rows);
  return *rows;
}

void EncoderCache::Insert(const ImageKey& key, ImageRows rows, double encode_seconds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
    stats_.encode_seconds += encode_seconds;
    Remember(key, rows);
  }
  Persist(key, rows, nullptr);
}

base::SharedBytes EncoderCache::Export(const ImageKey& key) {
  ImageRows rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = rows_.find(key); it != rows_.end()) rows = it->second;
  }
  if (rows) return EncodeImageRows(*rows, hidden_);
  return store_ != nullptr ? store_->GetMemory(StoreKey(key), /*count_miss=*/false) : nullptr;
}

base::Status EncoderCache::Import(const ImageKey& key, const base::SharedBytes& payload) {
  if (!payload) return base::MakeError(base::ErrorCode::kInvalidArgument, "image rows: empty payload");
  FS_ASSIGN_OR_RETURN(ImageRows rows, DecodeImageRows(*payload, hidden_));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.imported;
    Remember(key, rows);
  }
  Persist(key, rows, payload);
  return base::Status::Ok();
}

EncoderStats EncoderCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void EncoderCache::Remember(const ImageKey& key, ImageRows rows) {
  const int64_t bytes = RowBytes(rows);
  if (bytes > memory_bytes_ || rows_.count(key)) return;  // too large to keep, or kept already
  while (!order_.empty() && stats_.bytes + bytes > memory_bytes_) {
    auto old = rows_.find(order_.front());
    stats_.bytes -= RowBytes(old->second);
    rows_.erase(old);
    order_.pop_front();
  }
  rows_.emplace(key, std::move(rows));
  order_.push_back(key);
  stats_.bytes += bytes;
}

void EncoderCache::Persist(const ImageKey& key, const ImageRows& rows, base::SharedBytes payload) {
  if (store_ == nullptr) return;
  if (!payload) payload = EncodeImageRows(*rows, hidden_);
  store_->Put(StoreKey(key), std::move(payload), static_cast<int64_t>(rows->size()) / hidden_, ttl_class_);
}

}  // namespace flashserve::serve
