// libFuzzer target: the tokenizer (tokenizer/Tokenizer.cpp). The input is
// "<tiktoken.model>\0<tokenizer_config.json>\0<text>": loading must succeed
// or throw k3c::Error; a loaded tokenizer must encode any text, decode its
// ids back to the text read as UTF-8, and stream valid UTF-8.
#include "support/Common.h"
#include "tokenizer/Tokenizer.h"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string in(reinterpret_cast<const char *>(data), size);
  size_t a = in.find('\0');
  size_t b = a == std::string::npos ? std::string::npos : in.find('\0', a + 1);
  if (b == std::string::npos)
    return 0;
  std::string model = in.substr(0, a), config = in.substr(a + 1, b - a - 1), text = in.substr(b + 1);
  std::unique_ptr<k3c::tok::Tokenizer> t;
  try {
    t = k3c::tok::Tokenizer::fromStrings(model, config);
  } catch (const k3c::Error &) {
    return 0;
  }
  try {
    std::vector<int64_t> ids = t->encode(text);
    if (t->decode(ids) != k3c::tok::sanitizeUtf8(text))
      std::abort(); // encode/decode must round-trip
    t->encodeWithSpecial(text);
    k3c::tok::Utf8Stream s;
    std::string out;
    for (int64_t id : ids)
      out += s.push(t->tokenBytes(id));
    out += s.finish();
    if (out != k3c::tok::sanitizeUtf8(out))
      std::abort(); // streamed text must be valid UTF-8
  } catch (const k3c::Error &) {
    // A vocabulary without every byte cannot encode some text: a clear error.
  }
  return 0;
}
