// libFuzzer target: the safetensors reader (models/Safetensors.cpp) on an
// arbitrary file (held in a memfd): it must validate or throw k3c::Error, and
// every tensor it accepts must lie inside the mapping (each is read whole).
#include "support/Common.h"
#include "models/Safetensors.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("fuzz.safetensors", 0);
  if (fd < 0)
    return 0;
  if (size && write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  try {
    auto f = k3c::SafetensorsFile::open("/proc/self/fd/" + std::to_string(fd));
    volatile uint64_t sum = 0;
    for (const auto &t : f->tensors()) {
      const uint8_t *p = f->data(t);
      for (int64_t i = 0; i < t.numel() * k3c::dtypeSize(t.dtype); ++i)
        sum += p[i];
    }
  } catch (const k3c::Error &) {
  }
  close(fd);
  return 0;
}
