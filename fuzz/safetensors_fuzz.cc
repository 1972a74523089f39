// Safetensors shard bytes (a malformed checkpoint) through SafetensorsFile::Open: a shard that
// opens has every tensor inside the file, its byte count matching its dtype and shape.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("shard", 0);
  if (fd < 0) return 0;
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  if (written == size) {
    auto file = flashserve::model::SafetensorsFile::Open("/proc/self/fd/" + std::to_string(fd));
    if (file.ok()) {
      const uint8_t* begin = file.value()->file().data();
      const uint8_t* end = begin + file.value()->file().size();
      for (const auto& [name, t] : file.value()->tensors()) {
        if (t.num_bytes > 0 && (t.data < begin || t.data + t.num_bytes > end)) __builtin_trap();
        if (t.NumElements() < 0) __builtin_trap();
      }
    }
  }
  close(fd);
  return 0;
}
