//===- TextPrompts.h - text prompts for k3-run and k3-ref ------*- C++ -*-===//
//
// --prompt TEXT, --prompt-file FILE, --batch FILE.jsonl (one {"prompt": ...}
// or {"messages": [{"role", "content"}, ...]} object a line), --chat,
// --system, --tokenizer: encoded with the checkpoint's tokenizer.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_TOOLS_COMMON_TEXTPROMPTS_H
#define K3C_TOOLS_COMMON_TEXTPROMPTS_H

#include "tokenizer/Tokenizer.h"
#include "tools/common/Args.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace k3c {

/// Whether --batch names a JSONL file (its first non-blank character is '{').
inline bool batchIsJsonl(const Args &args) {
  if (!args.has("batch"))
    return false;
  std::ifstream in(args.get("batch"));
  char c;
  while (in.get(c))
    if (!std::isspace(static_cast<unsigned char>(c)))
      return c == '{';
  return false;
}

/// Whether the prompts are text (and checks the text options' combinations).
inline bool textPrompts(const Args &args) {
  bool jsonl = batchIsJsonl(args);
  if (args.has("interactive") && (args.has("batch") || args.has("prompt-ids")))
    throw Error("--interactive reads its turns from stdin (the first may come from --prompt or "
                "--prompt-file): not with --batch or --prompt-ids");
  bool text = args.has("prompt") || args.has("prompt-file") || jsonl || args.has("interactive");
  int sources = args.has("prompt") + args.has("prompt-file") + args.has("batch") +
                args.has("prompt-ids");
  if (text && sources > 1)
    throw Error("give one of --prompt, --prompt-file, --batch or --prompt-ids");
  if (!text && (args.has("chat") || args.has("system") || args.has("tokenizer")))
    throw Error("--chat, --system and --tokenizer need --prompt, --prompt-file or a JSONL --batch");
  if (args.has("system") && !args.has("chat") && !args.has("interactive"))
    throw Error("--system needs --chat (or --interactive)");
  return text;
}

/// The prompts of the text options as ids.
inline std::vector<std::vector<int64_t>> encodeTextPrompts(const Args &args,
                                                           const tok::Tokenizer &tok) {
  auto encodeOne = [&](const std::string &body, std::vector<tok::Message> messages) {
    if (messages.empty() && !args.has("chat"))
      return tok.encode(body);
    if (messages.empty()) {
      if (args.has("system"))
        messages.push_back({"system", args.get("system")});
      messages.push_back({"user", body});
    }
    return tok.encodeChat(messages);
  };
  std::vector<std::vector<int64_t>> prompts;
  if (args.has("batch")) {
    std::ifstream in(args.get("batch"));
    if (!in)
      throw Error("cannot open --batch file '" + args.get("batch") + "'");
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      std::string where = args.get("batch") + ":" + std::to_string(n);
      if (line.find_first_not_of(" \t\r") == std::string::npos)
        continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const std::exception &e) {
        throw Error(where + ": not a JSON object: " + e.what());
      }
      if (j.is_object() && j.contains("prompt") && j["prompt"].is_string()) {
        prompts.push_back(encodeOne(j["prompt"].get<std::string>(), {}));
      } else if (j.is_object() && j.contains("messages") && j["messages"].is_array()) {
        std::vector<tok::Message> msgs;
        for (const auto &m : j["messages"]) {
          if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
              !m.contains("content") || !m["content"].is_string())
            throw Error(where + ": each message needs string 'role' and 'content'");
          msgs.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
        }
        if (msgs.empty())
          throw Error(where + ": 'messages' is empty");
        prompts.push_back(encodeOne("", msgs));
      } else {
        throw Error(where + ": expected {\"prompt\": \"...\"} or {\"messages\": [...]}");
      }
    }
  } else {
    std::string body = args.get("prompt");
    if (args.has("prompt-file")) {
      std::ifstream in(args.get("prompt-file"), std::ios::binary);
      if (!in)
        throw Error("cannot open --prompt-file '" + args.get("prompt-file") + "'");
      std::ostringstream ss;
      ss << in.rdbuf();
      body = ss.str();
    }
    prompts.push_back(encodeOne(body, {}));
  }
  if (prompts.empty())
    throw Error("no prompt in --batch file '" + args.get("batch") + "'");
  for (size_t i = 0; i < prompts.size(); ++i)
    if (prompts[i].empty())
      throw Error("prompt " + std::to_string(i) + " encodes to no tokens");
  return prompts;
}

/// The text of generated ids up to (not including) the first stop token,
/// as valid UTF-8.
inline std::string generatedText(const tok::Tokenizer &tok, const std::vector<int64_t> &ids) {
  std::vector<int64_t> stops = tok.stopIds();
  tok::Utf8Stream s;
  std::string out;
  for (int64_t id : ids) {
    if (std::find(stops.begin(), stops.end(), id) != stops.end())
      break;
    try {
      out += s.push(tok.tokenBytes(id));
    } catch (const Error &) {
      out += s.push("\xEF\xBF\xBD");
    }
  }
  return out + s.finish();
}

} // namespace k3c

#endif // K3C_TOOLS_COMMON_TEXTPROMPTS_H
