// Tokenizer throughput, single thread: Encode on English prose, source code and CJK text, per
// document (one call per sample) and on a 1 MB document (the sample repeated), plus Decode.
// Prints MB/s (10^6 bytes per second) of wall time and of this thread's CPU time; asserts nothing. The texts: bench/data/tokenizer_*.txt and
// this room's own sources (src/tokenizer/*.h, *.cc) as the code sample.
//
//   tokenizer_bench [--tokenizer PATH] [--seconds S] [--dump DIR]
// --dump writes the exact texts measured to DIR (for tools/tokenizer_bench_hf.js).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <ctime>
#include <vector>

#include "base/clock.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using flashserve::tokenizer::Tokenizer;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string CodeSample(const fs::path& root) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(root / "src" / "tokenizer")) {
    const std::string ext = entry.path().extension().string();
    if (ext == ".h" || ext == ".cc") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::string out;
  for (const auto& f : files) out += ReadAll(f);
  return out;
}

std::string Repeat(const std::string& text, size_t min_bytes) {
  std::string out;
  while (out.size() < min_bytes) out += text + "\n\n";
  return out;
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Rate {
  double wall;  // calls per wall-clock second
  double cpu;   // calls per second of this thread's CPU time (robust on a busy machine)
};

// Runs fn until `seconds` of wall time have passed.
template <typename Fn>
Rate CallsPerSecond(double seconds, Fn&& fn) {
  fn();  // warm-up
  const double start = flashserve::base::MonotonicSeconds(), cpu_start = ThreadCpuSeconds();
  size_t calls = 0;
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = flashserve::base::MonotonicSeconds() - start;
  } while (elapsed < seconds);
  return {static_cast<double>(calls) / elapsed, static_cast<double>(calls) / (ThreadCpuSeconds() - cpu_start)};
}

void Measure(const Tokenizer& tok, const char* name, const std::string& text, double seconds) {
  size_t num_ids = 0;
  const Rate encode = CallsPerSecond(seconds, [&] { num_ids = tok.Encode(text).size(); });
  const std::vector<int32_t> ids = tok.Encode(text);
  const Rate decode = CallsPerSecond(seconds, [&] { return tok.Decode(ids).size(); });
  const Rate stream = CallsPerSecond(seconds, [&] {
    flashserve::tokenizer::IncrementalDetokenizer detok(tok);
    size_t n = 0;
    for (int32_t id : ids) n += detok.Push(id).size();
    return n + detok.Flush().size();
  });
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("%-10s %8zu bytes %7zu ids | encode %6.1f MB/s (cpu %6.1f) | decode %6.0f (cpu %6.0f) | "
              "stream %5.0f (cpu %5.0f)\n",
              name, text.size(), num_ids, encode.wall * mb, encode.cpu * mb, decode.wall * mb, decode.cpu * mb,
              stream.wall * mb, stream.cpu * mb);
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path root = fs::path(__FILE__).parent_path().parent_path();
  std::string tokenizer_path = (root / "third_party/tokenizer/deepseek_v3/tokenizer.json").string();
  std::string dump_dir;
  double seconds = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokenizer")) tokenizer_path = argv[i + 1];
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dump")) dump_dir = argv[i + 1];
  }
  const double load_start = flashserve::base::MonotonicSeconds();
  auto tok = Tokenizer::Load(tokenizer_path);
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", tok.error().ToString().c_str());
    return 1;
  }
  std::printf("tokenizer %s loaded in %.3f s\n", tokenizer_path.c_str(),
              flashserve::base::MonotonicSeconds() - load_start);
  const std::vector<std::pair<std::string, std::string>> samples = {
      {"prose", ReadAll(root / "bench/data/tokenizer_prose_en.txt")},
      {"code", CodeSample(root)},
      {"cjk", ReadAll(root / "bench/data/tokenizer_cjk.txt")},
  };
  for (const auto& [name, text] : samples) {
    if (text.empty()) {
      std::fprintf(stderr, "tokenizer_bench: empty sample %s (run from a full checkout)\n", name.c_str());
      return 1;
    }
    const std::string big = Repeat(text, 1000000);
    if (!dump_dir.empty()) {
      std::ofstream(fs::path(dump_dir) / (name + ".txt"), std::ios::binary) << text;
      std::ofstream(fs::path(dump_dir) / (name + "_1mb.txt"), std::ios::binary) << big;
    }
    Measure(**tok, name.c_str(), text, seconds);
    Measure(**tok, (name + " 1MB").c_str(), big, seconds);
  }
  return 0;
}
