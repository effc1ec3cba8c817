//===- k3-tok.cpp - encode, decode and time a checkpoint's tokenizer ------===//

#include "tokenizer/Tokenizer.h"
#include "tools/common/Args.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

static const char *kHelp = R"(k3-tok: the tokenizer of a Kimi checkpoint (tiktoken.model + tokenizer_config.json)

usage: k3-tok DIR encode (--text TEXT | --file FILE) [--special]
       k3-tok DIR decode --ids 1,2,3
       k3-tok DIR cases FILE
       k3-tok DIR bench [--file FILE] [--mb N]

  encode   prints the token ids, comma-separated; --special maps special-token strings in
           the text to their ids (otherwise they are ordinary text)
  decode   writes the bytes of the ids to stdout
  cases    FILE holds one base64-encoded byte string per line; prints per case
           "<ordinary ids> | <ids with special tokens> | <base64 of decode(first half)> |
           roundtrip" (decode(encode(x)) equals x read as UTF-8)
           (what test/tools/Inputs/tiktoken-peer.cjs prints with npm's tiktoken)
  bench    encodes FILE (default: generated mixed text) --mb MB (default 16) times over,
           one core, and prints MB/s and tokens/s
  --help   this text
)";

static std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw k3c::Error("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

static std::string join(const std::vector<int64_t> &ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i)
    s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

int main(int argc, char **argv) {
  try {
    k3c::Args args(argc, argv, {"text", "file", "ids", "mb"}, {"special", "help"});
    if (args.has("help") || args.positional.empty()) {
      std::fputs(kHelp, stdout);
      return args.has("help") ? 0 : 1;
    }
    if (args.positional.size() < 2)
      throw k3c::Error("need a tokenizer directory and a command (see --help)");
    auto tok = k3c::tok::Tokenizer::load(args.positional[0]);
    const std::string cmd = args.positional[1];
    if (cmd == "encode") {
      std::string text = args.has("text") ? args.get("text")
                         : args.has("file") ? readAll(args.get("file"))
                                            : throw k3c::Error("encode needs --text or --file");
      auto ids = args.has("special") ? tok->encodeWithSpecial(text) : tok->encode(text);
      std::printf("%s\n", join(ids).c_str());
    } else if (cmd == "decode") {
      std::string bytes = tok->decode(k3c::parseIdList(args.get("ids"), "--ids"));
      std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    } else if (cmd == "cases") {
      if (args.positional.size() != 3)
        throw k3c::Error("cases needs a FILE of base64 lines");
      std::istringstream in(readAll(args.positional[2]));
      std::string line;
      while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r')
          line.pop_back();
        if (line.empty())
          continue;
        std::string text;
        if (!k3c::tok::base64Decode(line, text))
          throw k3c::Error(args.positional[2] + ": '" + line.substr(0, 80) + "' is not base64");
        auto plain = tok->encode(text), special = tok->encodeWithSpecial(text);
        std::vector<int64_t> half(special.begin(), special.begin() + special.size() / 2);
        bool roundTrip = tok->decode(plain) == k3c::tok::sanitizeUtf8(text);
        std::printf("%s | %s | %s | %s\n", join(plain).c_str(), join(special).c_str(),
                    k3c::tok::base64Encode(tok->decode(half)).c_str(), roundTrip ? "roundtrip" : "ROUNDTRIP-FAILED");
      }
    } else if (cmd == "bench") {
      std::string text;
      if (args.has("file"))
        text = readAll(args.get("file"));
      else
        for (int i = 0; i < 64; ++i)
          text += k3c::tok::kTrainingText;
      int64_t mb = args.getInt("mb", 16);
      if (mb < 1)
        throw k3c::Error("--mb must be >= 1");
      size_t target = static_cast<size_t>(mb) << 20, done = 0, tokens = 0;
      tokens += tok->encode(text).size(); // warm-up
      tokens = 0;
      auto t0 = std::chrono::steady_clock::now();
      while (done < target) {
        tokens += tok->encode(text).size();
        done += text.size();
      }
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("encoded %.1f MB in %.3f s: %.1f MB/s, %.2f M tokens/s (%.2f bytes/token), "
                  "one core\n",
                  done / 1e6, s, done / 1e6 / s, tokens / 1e6 / s,
                  tokens ? static_cast<double>(done) / tokens : 0.0);
    } else {
      throw k3c::Error("unknown command '" + cmd + "' (encode, decode, cases, bench)");
    }
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "k3-tok: error: %s\n", e.what());
    return 1;
  }
}
