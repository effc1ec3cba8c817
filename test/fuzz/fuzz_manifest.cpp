// libFuzzer target: the artifact manifest's schema check (runtime/Manifest.cpp)
// on arbitrary bytes parsed as JSON. Every input must pass or throw
// k3c::Error (JSON syntax errors are the parser's); nothing else may escape.
#include "support/Common.h"
#include "runtime/Manifest.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nlohmann::json m = nlohmann::json::parse(reinterpret_cast<const char *>(data),
                                           reinterpret_cast<const char *>(data) + size, nullptr,
                                           /*allow_exceptions=*/false);
  if (m.is_discarded())
    return 0;
  try {
    k3c::rt::validateManifest(m, "fuzz");
  } catch (const k3c::Error &) {
  }
  return 0;
}
