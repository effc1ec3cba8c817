// libFuzzer target: the artifact manifest's schema (support/Manifest.cpp) on
// arbitrary bytes parsed as JSON. Every input must pass or throw k3c::Error
// (JSON syntax errors are the parser's); nothing else may escape. A manifest
// that passes must survive toJson and fromJson again unchanged.
#include "support/Common.h"
#include "support/Manifest.h"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nlohmann::json m = nlohmann::json::parse(reinterpret_cast<const char *>(data),
                                           reinterpret_cast<const char *>(data) + size, nullptr,
                                           /*allow_exceptions=*/false);
  if (m.is_discarded())
    return 0;
  try {
    k3c::artifact::Manifest parsed = k3c::artifact::Manifest::fromJson(m, "fuzz");
    std::string once = parsed.toJson().dump();
    std::string twice =
        k3c::artifact::Manifest::fromJson(nlohmann::json::parse(once), "fuzz").toJson().dump();
    if (once != twice)
      std::abort(); // the schema's JSON in and out disagree
  } catch (const k3c::Error &) {
  }
  return 0;
}
