// `flashserve bench-forward`: prefill and batched-decode throughput of the engine next to each
// configuration's floor, max(bytes read / measured bandwidth, FLOPs / measured FMA peak), with
// bytes and FLOPs counted by the engine for the very steps that were timed, and the ceilings
// measured before and after the runs (the better of the two).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "app/cli_util.h"
#include "app/commands.h"
#include "engine/engine.h"
#include "kernels/gemm/matmul.h"
#include "kernels/roofline.h"

namespace flashserve::app {

namespace {
struct BenchFlags {
  std::string model;
  int prompt = 512, context = 256, steps = 8, repeats = 2;
  std::string batches = "1,8,32";
  bool no_qat = false, no_bf16_dot = false;
  std::string bf16_dot = "auto";
  engine::EngineOptions options;
};

struct Ceilings {
  double gbps = 0, gflops = 0;
  double tile_gflops = 0;  // AMX BF16 products (0: AMX off)
};

struct Row {
  std::string name;
  double steps = 1;  // forward calls the totals below cover (decode: the timed steps)
  double tokens = 0, tokens_per_s = 0, floor_tokens_per_s = 0, bytes = 0, flops = 0;
  double tiled_flops = 0, tile_flops = 0;  // of flops, those on AMX tiles; the tiles' work for them
  double tile_floor_tokens_per_s = 0;      // the floor with the tile peak
  bool compute_bound = false;
  engine::OpStats stats;
};

// The machine's ceilings. RunBench measures them before and after the runs and keeps the better
// of each, since a probe of ~0.1-1 s can fall on a moment when the host gives the cores or the
// memory to others (a single probe has read half the FMA peak on a shared VM). The read probe
// reads the model's repacked weights where they are large enough (its own 512 MiB buffer would
// add to the peak memory the benchmark reports), else a buffer of its own.
Ceilings MeasureCeilings(base::ThreadPool& pool, const engine::Model& model) {
  const std::span<const uint8_t> weights = model.packed_region();
  const double gbps = weights.size() >= (size_t{512} << 20) ? kernels::MeasureReadBandwidth(pool, weights)
                                                            : kernels::MeasureMemoryBandwidth(pool);
  return {gbps, kernels::MeasureFmaPeak(pool), kernels::MeasureAmxPeak(pool)};
}

const char* PackingName(engine::PackedFrom p) {
  switch (p) {
    case engine::PackedFrom::kNone: return "none";
    case engine::PackedFrom::kMemory: return "repacked in memory";
    case engine::PackedFrom::kFile: return "mapped from the packed weights file";
    case engine::PackedFrom::kFileCopied: return "read from the packed weights file into 2 MiB pages";
  }
  return "?";
}

Row Finish(std::string name, double steps, double tokens, double secs, const engine::OpStats& st) {
  Row r;
  r.name = std::move(name);
  r.steps = steps;
  r.tokens = tokens;
  r.bytes = st.weight_bytes + st.state_bytes;
  r.flops = st.flops;
  r.tiled_flops = st.tiled_flops;
  r.tile_flops = st.tile_flops;
  r.tokens_per_s = tokens / secs;
  r.stats = st;
  return r;
}

// The row's floor: max(bytes / bandwidth, FLOPs / FMA peak). With AMX on, the products it takes
// run against the tile peak instead, which the FMA floor does not know: the tile floor counts
// those FLOPs at the tile peak and the others at the FMA peak, one after the other.
void ApplyFloor(const Ceilings& c, Row* r) {
  const double t_mem = r->bytes / (c.gbps * 1e9), t_fma = r->flops / (c.gflops * 1e9);
  r->compute_bound = t_fma > t_mem;
  r->floor_tokens_per_s = r->tokens / std::max(t_mem, t_fma);
  if (c.tile_gflops > 0) {
    const double t_tiles = (r->flops - r->tiled_flops) / (c.gflops * 1e9) + r->tile_flops / (c.tile_gflops * 1e9);
    r->tile_floor_tokens_per_s = r->tokens / std::max(t_mem, t_tiles);
  }
}

double Seconds(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

Row BenchPrefill(engine::Engine& engine, const BenchFlags& f) {
  const int64_t vocab = engine.model().config().vocab_size;
  std::vector<int32_t> tokens = RandomTokenIds(f.prompt, vocab, 1);
  double best = 1e30;
  engine::OpStats stats;
  for (int rep = 0; rep <= f.repeats; ++rep) {  // the first run warms up
    auto state = engine.NewSequence();
    engine::ForwardRequest req{state.get(), tokens, engine::LogitsMode::kLast};
    auto t0 = std::chrono::steady_clock::now();
    FS_CHECK(engine.Forward({&req, 1}).ok(), "prefill failed");
    double secs = Seconds(t0);
    if (rep > 0 && secs < best) best = secs;
    stats = engine.last_stats();
  }
  return Finish("prefill " + std::to_string(f.prompt), 1, f.prompt, best, stats);
}

Row BenchDecode(engine::Engine& engine, const BenchFlags& f, int batch) {
  const int64_t vocab = engine.model().config().vocab_size;
  std::vector<std::unique_ptr<engine::SequenceState>> states;
  for (int i = 0; i < batch; ++i) {
    states.push_back(engine.NewSequence());
    std::vector<int32_t> ctx = RandomTokenIds(f.context, vocab, 100 + i);
    engine::ForwardRequest req{states.back().get(), ctx, engine::LogitsMode::kNone};
    FS_CHECK(engine.Forward({&req, 1}).ok(), "context prefill failed");
  }
  std::vector<int32_t> next = RandomTokenIds(batch * (f.steps + 2), vocab, 7);
  engine::OpStats total;
  double secs = 0;
  for (int step = 0; step < f.steps + 2; ++step) {
    std::vector<engine::ForwardRequest> reqs;
    for (int i = 0; i < batch; ++i)
      reqs.push_back({states[i].get(), std::span<const int32_t>(&next[step * batch + i], 1), engine::LogitsMode::kLast});
    auto t0 = std::chrono::steady_clock::now();
    auto result = engine.Forward(reqs);
    FS_CHECK(result.ok(), "decode failed");
    engine.Recycle(std::move(*result));  // as a serving loop does
    if (step < 2) continue;  // warm-up steps
    secs += Seconds(t0);
    total.flops += engine.last_stats().flops;
    total.tiled_flops += engine.last_stats().tiled_flops;
    total.tile_flops += engine.last_stats().tile_flops;
    total.weight_bytes += engine.last_stats().weight_bytes;
    total.state_bytes += engine.last_stats().state_bytes;
    const engine::OpStats& last = engine.last_stats();
    for (size_t p = 0; p < total.phase_seconds.size(); ++p) total.phase_seconds[p] += last.phase_seconds[p];
    for (size_t p = 0; p < total.phase_flops.size(); ++p) {
      total.phase_flops[p] += last.phase_flops[p];
      total.phase_bytes[p] += last.phase_bytes[p];
    }
  }
  return Finish("decode batch " + std::to_string(batch), f.steps, static_cast<double>(batch) * f.steps, secs, total);
}

// With --profile: ms per step by phase, then each phase's own floor, max(its bytes / bandwidth,
// its FLOPs / FMA peak) (work outside every phase as "other"). The phases run one after another,
// so their floors add up: a tighter bound than the whole step's floor, which assumes that the
// memory-bound phases (routed experts at small batches) overlap the compute-bound ones.
void PrintPhases(const std::vector<Row>& rows, const Ceilings& c) {
  constexpr size_t kPhases = engine::OpStats::kPhases;
  auto header = [](const char* title) {
    std::printf("\n%s\n%-18s", title, "config");
    for (size_t p = 0; p < kPhases; ++p) std::printf(" %8s", engine::PhaseName(static_cast<engine::Phase>(p)));
  };
  header("ms per step by phase (decode: mean over timed steps)");
  std::printf("\n");
  for (const Row& r : rows) {
    std::printf("%-18s", r.name.c_str());
    for (double secs : r.stats.phase_seconds) std::printf(" %8.2f", secs * 1e3 / r.steps);
    std::printf("\n");
  }
  header("floor ms per step by phase: max(bytes / bandwidth, FLOPs / FMA peak)");
  std::printf(" %8s %14s %8s\n", "other", "sum: tok/s", "% of it");
  for (const Row& r : rows) {
    double total = 0;
    std::printf("%-18s", r.name.c_str());
    for (size_t p = 0; p <= kPhases; ++p) {
      const double secs = std::max(r.stats.phase_bytes[p] / (c.gbps * 1e9), r.stats.phase_flops[p] / (c.gflops * 1e9));
      total += secs;
      std::printf(" %8.2f", secs * 1e3 / r.steps);
    }
    std::printf(" %14.1f %7.1f%%\n", r.tokens / total, 100.0 * r.tokens_per_s * total / r.tokens);
  }
}

int RunBench(BenchFlags f) {
  auto model = LoadModelOrPrint(f.model, f.options);
  if (!model) return 1;
  auto batches = ParseTokenList(f.batches);
  if (!batches.ok()) return PrintError(batches.error());
  f.options.qat = !f.no_qat;
  Ceilings before, after;
  int threads = 0;
  {
    base::ThreadPool pool(f.options.num_threads);
    threads = pool.num_threads();
    before = MeasureCeilings(pool, *model);
  }
  if (f.bf16_dot == "on") kernels::SetBf16Dots(kernels::Bf16Dots::kOn);
  if (f.bf16_dot == "off" || f.no_bf16_dot) kernels::SetBf16Dots(kernels::Bf16Dots::kOff);
  std::vector<Row> rows;
  {
    engine::Engine engine(*model, f.options);
    rows.push_back(BenchPrefill(engine, f));
    for (int32_t b : *batches) rows.push_back(BenchDecode(engine, f, b));
  }
  {
    base::ThreadPool pool(f.options.num_threads);
    after = MeasureCeilings(pool, *model);
  }
  const Ceilings c{std::max(before.gbps, after.gbps), std::max(before.gflops, after.gflops),
                   std::max(before.tile_gflops, after.tile_gflops)};
  for (Row& r : rows) ApplyFloor(c, &r);
  std::printf("machine: %d threads, ISA %s (BF16 dot products %s; VDPBF16PS per FMA: %.2f; AMX %s), measured read bandwidth "
              "%.1f GB/s, FMA peak %.1f GFLOP/s (the better of before / after the runs: %.1f / %.1f GB/s, %.1f / %.1f "
              "GFLOP/s)\n",
              threads, kernels::MatMulIsa(), kernels::Bf16PairsAvailable() ? "on" : "off", kernels::Bf16DotRateVsFma(),
              kernels::AmxOn() ? "on" : "off", c.gbps, c.gflops, before.gbps, after.gbps, before.gflops, after.gflops);
  const bool tiles = c.tile_gflops > 0;
  if (tiles)
    std::printf("AMX tiles: BF16 peak %.1f GFLOP/s; the tile floor counts the tiles' FLOPs (BF16 weights: three "
                "passes per product) at it and the rest at the FMA peak\n",
                c.tile_gflops);
  std::printf("model: %s (QAT %s)\n", f.model.c_str(), f.no_qat ? "off" : "on");
  const int64_t ckpt = model->checkpoint().file_bytes(), peak = base::ProcessResidentBytes().peak;
  std::printf("memory: peak resident %.1f MB, %.2fx the checkpoint's %.1f MB (repacked matrices: %s)\n", peak / 1e6,
              static_cast<double>(peak) / static_cast<double>(ckpt), ckpt / 1e6, PackingName(model->packing()));
  std::printf("%-18s %12s %12s %8s %9s %12s %12s%s\n", "config", "tokens/s", "floor tok/s", "% floor", "bound",
              "MB/step", "GFLOP/step", tiles ? "  tile GFLOP  tile floor  % of it" : "");
  for (const Row& r : rows) {
    std::printf("%-18s %12.1f %12.1f %7.1f%% %9s %12.1f %12.2f", r.name.c_str(), r.tokens_per_s, r.floor_tokens_per_s,
                100.0 * r.tokens_per_s / r.floor_tokens_per_s, r.compute_bound ? "compute" : "memory",
                r.bytes / r.steps / 1e6, r.flops / r.steps / 1e9);
    if (tiles)
      std::printf("  %10.2f %11.1f %7.1f%%", r.tile_flops / r.steps / 1e9, r.tile_floor_tokens_per_s,
                  100.0 * r.tokens_per_s / r.tile_floor_tokens_per_s);
    std::printf("\n");
  }
  if (f.options.profile) PrintPhases(rows, c);
  return 0;
}
}  // namespace

void RegisterBenchForwardCommand(CLI::App& app, CommandFn* run) {
  auto f = std::make_shared<BenchFlags>();
  auto* cmd = app.add_subcommand("bench-forward", "Prefill/decode throughput of the engine against its roofline floor");
  cmd->add_option("--model", f->model, "Checkpoint directory")->required();
  cmd->add_option("--prompt", f->prompt, "Prefill prompt length")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--batches", f->batches, "Decode batch sizes, e.g. 1,8,32");
  cmd->add_option("--context", f->context, "Tokens already in each decoding sequence")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--steps", f->steps, "Timed decode steps per batch size")->check(CLI::Range(1, 100000));
  cmd->add_option("--repeats", f->repeats, "Timed prefill repeats (best kept)")->check(CLI::Range(1, 100));
  cmd->add_flag("--profile", f->options.profile,
                "Also print wall time per forward phase and each phase's own floor (their sum: a tighter floor)");
  cmd->add_option("--bf16-dot", f->bf16_dot,
                  "AVX512-BF16 dot products for FP4/FP8 products (same bits as the f32 FMAs): auto (where the CPU runs "
                  "at least 0.4 of them per FMA), on (wherever it has them), off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_flag("--no-bf16-dot", f->no_bf16_dot, "Same as --bf16-dot off");
  AddEngineFlags(cmd, &f->options, &f->no_qat);
  cmd->callback([f, run] { *run = [f] { return RunBench(*f); }; });
}

}  // namespace flashserve::app
