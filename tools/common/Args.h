//===- Args.h - a small command-line parser for the LLVM-free tools -*- C++ -*-===//
//
// `--name value`, `--name=value` and `--flag`; positional arguments in order.
// Unknown options and missing values are errors that name the option.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_TOOLS_COMMON_ARGS_H
#define K3C_TOOLS_COMMON_ARGS_H

#include "support/Common.h"

#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace k3c {

class Args {
public:
  /// `valued` lists options taking a value, `flags` options without one.
  Args(int argc, char **argv, std::set<std::string> valued, std::set<std::string> flags) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
        std::string name = a.substr(2), value;
        bool inlineValue = false;
        if (size_t eq = name.find('='); eq != std::string::npos) {
          value = name.substr(eq + 1);
          name = name.substr(0, eq);
          inlineValue = true;
        }
        if (flags.count(name)) {
          if (inlineValue)
            throw Error("option --" + name + " takes no value");
          opts[name] = "1";
        } else if (valued.count(name)) {
          if (!inlineValue) {
            if (i + 1 >= argc)
              throw Error("option --" + name + " needs a value");
            value = argv[++i];
          }
          opts[name] = value;
        } else {
          throw Error("unknown option '" + a + "' (see --help)");
        }
      } else if (a == "-o") {
        if (i + 1 >= argc)
          throw Error("option -o needs a value");
        opts["o"] = argv[++i];
      } else if (a == "-h") {
        opts["help"] = "1";
      } else {
        positional.push_back(a);
      }
    }
  }

  bool has(const std::string &n) const { return opts.count(n) != 0; }
  std::string get(const std::string &n, const std::string &dflt = "") const {
    auto it = opts.find(n);
    return it == opts.end() ? dflt : it->second;
  }
  int64_t getInt(const std::string &n, int64_t dflt) const {
    if (!has(n))
      return dflt;
    std::string v = get(n);
    try {
      size_t pos = 0;
      long long x = std::stoll(v, &pos);
      if (pos != v.size())
        throw 0;
      return x;
    } catch (...) {
      throw Error("option --" + n + " expects an integer, got '" + v + "'");
    }
  }
  double getDouble(const std::string &n, double dflt) const {
    if (!has(n))
      return dflt;
    std::string v = get(n);
    try {
      size_t pos = 0;
      double x = std::stod(v, &pos);
      if (pos != v.size())
        throw 0;
      return x;
    } catch (...) {
      throw Error("option --" + n + " expects a number, got '" + v + "'");
    }
  }

  std::vector<std::string> positional;

private:
  std::map<std::string, std::string> opts;
};

/// Parses "1,2,3" into integers (`noun`: what each is, for the error, which
/// names the offending entry).
inline std::vector<int64_t> parseIdList(const std::string &s, const std::string &what,
                                        const std::string &noun = "token id") {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t pos = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &pos);
    } catch (...) {
      pos = std::string::npos;
    }
    if (item.empty() || pos != item.size())
      throw Error(what + ": '" + item + "' is not an integer " + noun);
    out.push_back(v);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return out;
}

/// --max-seqs N (k3-run, k3-bench): the sequence slots to load the artifact
/// with, 0 (all of them) when absent; the runtime takes at most the
/// artifact's capacity.
inline int64_t maxSeqsOption(const Args &args) {
  if (!args.has("max-seqs"))
    return 0;
  const int64_t n = args.getInt("max-seqs", 0);
  if (n < 1 || n > (int64_t(1) << 24))
    throw Error("--max-seqs must be in [1, 2^24], got " + std::to_string(n));
  return n;
}

/// The prompts of --prompt-ids and/or --batch FILE (one comma-separated
/// line per prompt; blank lines skipped). Errors name the file and line.
inline std::vector<std::vector<int64_t>> readPrompts(const Args &args) {
  std::vector<std::vector<int64_t>> prompts;
  if (args.has("prompt-ids"))
    prompts.push_back(parseIdList(args.get("prompt-ids"), "--prompt-ids"));
  if (args.has("batch")) {
    std::ifstream in(args.get("batch"));
    if (!in)
      throw Error("cannot open --batch file '" + args.get("batch") + "'");
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
        line.pop_back(); // CRLF files, trailing blanks
      if (line.find_first_not_of(" \t\r") != std::string::npos)
        prompts.push_back(parseIdList(line, args.get("batch") + ":" + std::to_string(n)));
    }
  }
  if (prompts.empty())
    throw Error("no prompt: give --prompt-ids or --batch (see --help)");
  return prompts;
}

} // namespace k3c

#endif // K3C_TOOLS_COMMON_ARGS_H
