// Random checkpoint generation (model/random_checkpoint.h).
#include "model/random_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "model/layer_plan.h"
#include "model/number_formats.h"
#include "model/checkpoint_specs.h"
#include "model/safetensors.h"

namespace flashserve::model {

using base::Error;
using base::ErrorCode;
using base::Status;

namespace {

// Deterministic per-tensor normal stream (SplitMix64 + Box-Muller).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
  float Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = std::max(Uniform(), 1e-300), u2 = Uniform();
    double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = static_cast<float>(r * std::sin(2 * M_PI * u2));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(2 * M_PI * u2));
  }

 private:
  uint64_t state_;
  bool has_spare_ = false;
  float spare_ = 0;
};

uint64_t NameSeed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

float Pow2Ceil(float v) {
  int e;
  float m = std::frexp(v, &e);
  return m == 0.5f ? std::ldexp(1.0f, e - 1) : std::ldexp(1.0f, e);
}

uint8_t ScaleByte(float scale) {
  int e;
  std::frexp(scale, &e);  // scale = 0.5 * 2^e exactly
  return static_cast<uint8_t>(e - 1 + 127);
}

std::string Bf16Bytes(const std::vector<float>& v) {
  std::string out(v.size() * 2, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t b = FloatToBf16(v[i]);
    std::memcpy(&out[i * 2], &b, 2);
  }
  return out;
}

std::string F32Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

// FP8 e4m3 weight + ue8m0 tile scales (tiles br x bc).
void QuantizeFp8(const std::vector<float>& w, int64_t rows, int64_t cols, int br, int bc, std::string* q,
                 std::string* s) {
  const int64_t sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
  q->assign(static_cast<size_t>(rows * cols), '\0');
  s->assign(static_cast<size_t>(sr * sc), '\0');
  for (int64_t tr = 0; tr < sr; ++tr) {
    for (int64_t tc = 0; tc < sc; ++tc) {
      float amax = 0;
      for (int64_t r = tr * br; r < std::min(rows, (tr + 1) * br); ++r)
        for (int64_t c = tc * bc; c < std::min(cols, (tc + 1) * bc); ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      float scale = Pow2Ceil(std::max(amax, 1e-30f) / 448.0f);
      (*s)[tr * sc + tc] = static_cast<char>(ScaleByte(scale));
      for (int64_t r = tr * br; r < std::min(rows, (tr + 1) * br); ++r)
        for (int64_t c = tc * bc; c < std::min(cols, (tc + 1) * bc); ++c)
          (*q)[r * cols + c] = static_cast<char>(FloatToE4m3(w[r * cols + c] / scale));
    }
  }
}

// Packed FP4 e2m1 (low nibble = even column) + one ue8m0 scale per 32 columns.
void QuantizeFp4(const std::vector<float>& w, int64_t rows, int64_t cols, std::string* q, std::string* s) {
  q->assign(static_cast<size_t>(rows * cols / 2), '\0');
  s->assign(static_cast<size_t>(rows * cols / 32), '\0');
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const float* blk = w.data() + r * cols + b * 32;
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(blk[i]));
      float scale = Pow2Ceil(std::max(amax, 1e-30f) / 6.0f);
      (*s)[r * (cols / 32) + b] = static_cast<char>(ScaleByte(scale));
      for (int i = 0; i < 32; i += 2) {
        uint8_t lo = FloatToE2m1(blk[i] / scale), hi = FloatToE2m1(blk[i + 1] / scale);
        (*q)[(r * cols + b * 32 + i) / 2] = static_cast<char>(lo | (hi << 4));
      }
    }
  }
}

struct Generated {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::vector<Generated> Generate(const TensorSpec& spec, const ModelConfig& c, const RandomCheckpointOptions& opt) {
  Rng rng(NameSeed(opt.seed, spec.name));
  int64_t n = 1;
  for (int64_t d : spec.shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  switch (spec.role) {
    case TensorRole::kNormWeight:
      for (auto& x : v) x = 1.0f + spec.init_std * rng.Normal();
      return {{spec.name, DType::kBF16, spec.shape, Bf16Bytes(v)}};
    case TensorRole::kF32:
      for (auto& x : v) x = spec.init_std < 0 ? static_cast<float>(0.5 + rng.Uniform()) : spec.init_std * rng.Normal();
      return {{spec.name, DType::kF32, spec.shape, F32Bytes(v)}};
    case TensorRole::kTid2eid: {
      const int64_t k = spec.shape[1];
      std::vector<int64_t> ids(static_cast<size_t>(n));
      std::vector<int64_t> pool(static_cast<size_t>(c.num_routed_experts));
      for (int64_t row = 0; row < spec.shape[0]; ++row) {
        for (size_t e = 0; e < pool.size(); ++e) pool[e] = static_cast<int64_t>(e);
        for (int64_t j = 0; j < k; ++j) {  // partial Fisher-Yates: k distinct experts
          size_t pick = static_cast<size_t>(j) + rng.Next() % (pool.size() - static_cast<size_t>(j));
          std::swap(pool[static_cast<size_t>(j)], pool[pick]);
          ids[static_cast<size_t>(row * k + j)] = pool[static_cast<size_t>(j)];
        }
      }
      return {{spec.name, DType::kI64, spec.shape,
               std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8)}};
    }
    default:
      break;
  }
  for (auto& x : v) x = spec.init_std * rng.Normal();
  const int64_t rows = spec.shape[0], cols = spec.shape[1];
  const std::string w = spec.name + ".weight", sc = spec.name + ".scale";
  const bool quant = !opt.bf16 && c.weight_format == WeightFormat::kFp8;
  if (spec.role == TensorRole::kExpertLinear && quant && c.expert_format == ExpertFormat::kFp4) {
    std::string q, s;
    QuantizeFp4(v, rows, cols, &q, &s);
    return {{w, DType::kI8, {rows, cols / 2}, std::move(q)}, {sc, DType::kF8E8M0, {rows, cols / 32}, std::move(s)}};
  }
  if (spec.role == TensorRole::kEngramTable && quant) {
    std::string q, s;
    QuantizeFp8(v, rows, cols, 1, 32, &q, &s);
    return {{w, DType::kF8E4M3, {rows, cols}, std::move(q)}, {sc, DType::kF8E8M0, {rows, cols / 32}, std::move(s)}};
  }
  if (spec.role != TensorRole::kFloatLinear && spec.role != TensorRole::kEngramTable && quant) {
    const int b = c.weight_block;
    std::string q, s;
    QuantizeFp8(v, rows, cols, b, b, &q, &s);
    return {{w, DType::kF8E4M3, {rows, cols}, std::move(q)},
            {sc, DType::kF8E8M0, {(rows + b - 1) / b, (cols + b - 1) / b}, std::move(s)}};
  }
  return {{w, DType::kBF16, {rows, cols}, Bf16Bytes(v)}};
}

std::string ShardName(int index, int count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", index, count);
  return buf;
}

Status WriteJson(const std::string& path, const nlohmann::ordered_json& j) {
  return base::WriteFileAtomic(path, j.dump(2) + "\n");
}

}  // namespace

Status WriteRandomCheckpoint(ModelConfig config, const std::string& dir, const RandomCheckpointOptions& opt,
                             base::ThreadPool& pool) {
  if (opt.bf16) {
    config.weight_format = WeightFormat::kBf16;
    config.expert_format = ExpertFormat::kBf16;
  }
  FS_RETURN_IF_ERROR(ValidateModelConfig(config));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error(ErrorCode::kIoError, "cannot create " + dir + ": " + ec.message());
  std::vector<TensorSpec> specs = CheckpointTensorSpecs(config, opt.sharp);
  // Generate in parallel (each tensor has its own stream), then assign shards in spec order.
  std::vector<std::vector<Generated>> generated(specs.size());
  pool.ParallelFor(static_cast<int64_t>(specs.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) generated[i] = Generate(specs[i], config, opt);
  });
  std::vector<SafetensorsWriter> shards(1);
  for (auto& group : generated) {
    size_t bytes = 0;
    for (const auto& g : group) bytes += g.bytes.size();
    if (!shards.back().empty() && shards.back().num_bytes() + bytes > opt.shard_bytes) shards.emplace_back();
    for (auto& g : group) shards.back().Add(g.name, g.dtype, g.shape, std::move(g.bytes));
  }
  generated.clear();
  if (shards.size() == 1) {
    FS_RETURN_IF_ERROR(shards[0].Write(dir + "/model.safetensors"));
  } else {
    nlohmann::ordered_json index;
    uint64_t total = 0;
    const int count = static_cast<int>(shards.size());
    for (int i = 0; i < count; ++i) {
      std::string name = ShardName(i + 1, count);
      FS_RETURN_IF_ERROR(shards[i].Write(dir + "/" + name));
      total += shards[i].num_bytes();
      for (const auto& t : shards[i].Names()) index["weight_map"][t] = name;
    }
    index["metadata"] = {{"total_size", total}};
    FS_RETURN_IF_ERROR(WriteJson(dir + "/model.safetensors.index.json", index));
  }
  FS_RETURN_IF_ERROR(base::WriteFileAtomic(dir + "/config.json", ModelConfigToJson(config)));
  nlohmann::ordered_json gen = {{"bos_token_id", config.bos_token_id}, {"eos_token_id", config.eos_token_id}};
  return WriteJson(dir + "/generation_config.json", gen);
}

}  // namespace flashserve::model
