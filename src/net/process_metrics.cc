// Process metrics from /proc/self (net/process_metrics.h).
#include "net/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

namespace flashserve::net {

namespace {

// A "Name:   123 kB" line of /proc/self/status, in bytes (kB lines) or as is; -1 when absent.
double StatusField(const std::string& status, const std::string& name) {
  const size_t at = status.find("\n" + name + ":");
  if (at == std::string::npos) return -1;
  std::istringstream line(status.substr(at + name.size() + 2));
  double value = -1;
  std::string unit;
  line >> value >> unit;
  return unit == "kB" ? value * 1024 : value;
}

double OpenDescriptors() {
  std::error_code ec;
  double n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return ec ? -1 : n - 1;  // the listing's own descriptor
}

// utime + stime (clock ticks) and the start time (ticks after boot) of /proc/self/stat.
bool CpuAndStartTicks(double* cpu_ticks, double* start_ticks) {
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return false;
  std::istringstream fields(stat.substr(close + 2));
  std::string f[20];
  for (std::string& s : f) fields >> s;  // fields 3..22: state is f[0], utime f[11], stime f[12], starttime f[19]
  if (!fields) return false;
  *cpu_ticks = std::stod(f[11]) + std::stod(f[12]);
  *start_ticks = std::stod(f[19]);
  return true;
}

double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) return std::stod(line.substr(6));
  }
  return -1;
}

}  // namespace

void ExportProcessMetrics(MetricsRegistry& registry) {
  auto set = [&](const char* name, const char* help, double value) {
    if (value >= 0) registry.Gauge(name, help).Set(value);
  };
  std::string status = "\n";  // so that every field, the first too, follows a newline
  {
    std::ifstream in("/proc/self/status");  // closed before the descriptors are counted
    status.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  set("process_resident_memory_bytes", "Resident memory size in bytes", StatusField(status, "VmRSS"));
  set("process_peak_resident_memory_bytes", "Largest resident memory size since start, in bytes",
      StatusField(status, "VmHWM"));
  set("process_virtual_memory_bytes", "Virtual memory size in bytes", StatusField(status, "VmSize"));
  set("process_threads", "Threads of the process", StatusField(status, "Threads"));
  set("process_open_fds", "Open file descriptors", OpenDescriptors());
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    set("process_max_fds", "Limit of open file descriptors", static_cast<double>(files.rlim_cur));
  }
  double cpu_ticks = 0, start_ticks = 0;
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double boot = BootTimeSeconds();
  if (hz > 0 && CpuAndStartTicks(&cpu_ticks, &start_ticks)) {
    registry.Counter("process_cpu_seconds_total", "User and system CPU time spent, in seconds").Set(cpu_ticks / hz);
    if (boot >= 0) set("process_start_time_seconds", "Start time since the Unix epoch, in seconds", boot + start_ticks / hz);
  }
}

}  // namespace flashserve::net
