// libFuzzer target: the config reader (models/Config.cpp) on arbitrary bytes.
// Every input must parse or throw k3c::Error; nothing else may escape.
#include "support/Common.h"
#include "models/Config.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    k3c::ModelConfig c = k3c::parseConfig(std::string(reinterpret_cast<const char *>(data), size),
                                          "fuzz.json");
    (void)k3c::parameterCount(c);
  } catch (const k3c::Error &) {
  }
  return 0;
}
