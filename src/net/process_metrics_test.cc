#include "net/process_metrics.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <string>

namespace flashserve::net {
namespace {

// The rendered families, led by a newline so that every line, the first too, follows one.
std::string Text(const MetricsRegistry& registry) {
  std::string text = "\n";
  text += registry.Render();
  return text;
}

double Read(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

TEST(ProcessMetrics, CountDescriptorsAndMemory) {
  MetricsRegistry registry;
  ExportProcessMetrics(registry);
  const std::string before = Text(registry);
  const int fd = ::open("/proc/self/status", O_RDONLY);
  ASSERT_GE(fd, 0);
  ExportProcessMetrics(registry);
  const std::string during = Text(registry);
  ::close(fd);
  ExportProcessMetrics(registry);
  const std::string after = Text(registry);

  EXPECT_EQ(Read(during, "process_open_fds"), Read(before, "process_open_fds") + 1);
  EXPECT_EQ(Read(after, "process_open_fds"), Read(before, "process_open_fds"));
  EXPECT_GE(Read(before, "process_open_fds"), 3);  // at least stdin, stdout, stderr
  EXPECT_GT(Read(before, "process_max_fds"), Read(before, "process_open_fds"));
  const double rss = Read(after, "process_resident_memory_bytes");
  EXPECT_GT(rss, 1 << 20);
  EXPECT_GE(Read(after, "process_peak_resident_memory_bytes"), rss);
  EXPECT_GE(Read(after, "process_virtual_memory_bytes"), rss);
  EXPECT_GE(Read(after, "process_threads"), 1);
  EXPECT_GE(Read(after, "process_cpu_seconds_total"), 0);
  const double started = Read(after, "process_start_time_seconds");
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(started, now + 1);
  EXPECT_GT(started, now - 3600);
}

TEST(ProcessMetrics, PeakFollowsAGrowth) {
  MetricsRegistry registry;
  ExportProcessMetrics(registry);
  const double peak_before = Read(Text(registry), "process_peak_resident_memory_bytes");
  {
    std::string big(64 << 20, 'x');  // written: resident
    volatile char* touch = big.data();
    for (size_t i = 0; i < big.size(); i += 4096) touch[i] = static_cast<char>(i);
    ExportProcessMetrics(registry);
    EXPECT_GT(Read(Text(registry), "process_resident_memory_bytes"), 60 << 20);
  }
  ExportProcessMetrics(registry);
  // At least the 64 MiB, unless an earlier peak was higher still.
  EXPECT_GE(Read(Text(registry), "process_peak_resident_memory_bytes"), std::max(peak_before, double{60 << 20}));
}

}  // namespace
}  // namespace flashserve::net
