//===- Tokenizer.cpp - Kimi's tiktoken BPE tokenizer ----------------------===//

#include "tokenizer/Tokenizer.h"

#include "support/Common.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <fstream>
#include <limits>
#include <sstream>

namespace k3c::tok {

const char *const kKimiPattern =
    R"([\p{Han}]+|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*)"
    R"([\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+)"
    R"([\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

//===----------------------------------------------------------------------===//
// Pattern translation and UTF-8
//===----------------------------------------------------------------------===//

/// End (index of the closing ']') of the class opened at `p[i] == '['`.
static size_t classEnd(std::string_view p, size_t i) {
  size_t j = i + 1;
  if (j < p.size() && p[j] == '^')
    ++j;
  while (j < p.size()) {
    if (p[j] == '\\') {
      j += 2;
      continue;
    }
    if (p[j] == '[') {
      j = classEnd(p, j) + 1;
      continue;
    }
    if (p[j] == ']')
      return j;
    ++j;
  }
  throw Error("tokenizer pattern: unterminated character class at offset " + std::to_string(i));
}

std::string toPcre2Pattern(std::string_view p) {
  std::string out;
  for (size_t i = 0; i < p.size();) {
    if (p[i] == '\\') {
      out.append(p.substr(i, 2));
      i += 2;
      continue;
    }
    if (p[i] != '[') {
      out += p[i++];
      continue;
    }
    size_t end = classEnd(p, i);
    std::string_view body = p.substr(i + 1, end - i - 1);
    size_t amp = body.find("&&[^");
    if (amp == std::string_view::npos) {
      out.append(p.substr(i, end - i + 1));
    } else {
      std::string_view a = body.substr(0, amp), rest = body.substr(amp + 2);
      if (rest.size() < 3 || rest.back() != ']')
        throw Error("tokenizer pattern: unsupported class intersection '" + std::string(body) + "'");
      std::string_view b = rest.substr(2, rest.size() - 3); // inside [^ ... ]
      out += "(?:(?![" + std::string(b) + "])[" + std::string(a) + "])";
    }
    i = end + 1;
  }
  return out;
}

/// One UTF-8 character at s[i]: its length when valid; when not, the length
/// of the maximal invalid subpart (>= 1) with `valid` false; `incomplete`
/// when the input ends inside an otherwise valid sequence.
static size_t utf8Char(const unsigned char *s, size_t n, size_t i, bool &valid, bool &incomplete) {
  valid = true;
  incomplete = false;
  unsigned char b = s[i];
  if (b < 0x80)
    return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF)
    need = 1;
  else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0)
      lo = 0xA0;
    if (b == 0xED)
      hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0)
      lo = 0x90;
    if (b == 0xF4)
      hi = 0x8F;
  } else {
    valid = false;
    return 1;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= n) {
      valid = false;
      incomplete = true;
      return k;
    }
    unsigned char c = s[i + k];
    if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) {
      valid = false;
      return k;
    }
  }
  return need + 1;
}

static const char kReplacement[] = "\xEF\xBF\xBD";

std::string sanitizeUtf8(std::string_view text) {
  const auto *s = reinterpret_cast<const unsigned char *>(text.data());
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    bool valid, incomplete;
    size_t len = utf8Char(s, text.size(), i, valid, incomplete);
    if (valid)
      out.append(text.substr(i, len));
    else
      out += kReplacement;
    i += len;
  }
  return out;
}

std::string Utf8Stream::push(std::string_view bytes) {
  pending.append(bytes);
  const auto *s = reinterpret_cast<const unsigned char *>(pending.data());
  std::string out;
  size_t i = 0;
  while (i < pending.size()) {
    bool valid, incomplete;
    size_t len = utf8Char(s, pending.size(), i, valid, incomplete);
    if (incomplete)
      break; // wait for the rest of the character
    if (valid)
      out.append(pending, i, len);
    else
      out += kReplacement;
    i += len;
  }
  pending.erase(0, i);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out = sanitizeUtf8(pending);
  pending.clear();
  return out;
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

struct Tokenizer::Regex {
  pcre2_code *code = nullptr;
  bool jit = false;
  ~Regex() {
    if (code)
      pcre2_code_free(code);
  }
};

Tokenizer::~Tokenizer() = default;

std::string base64Encode(std::string_view t) {
  static const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string enc;
  for (size_t i = 0; i < t.size(); i += 3) {
    unsigned v = static_cast<unsigned char>(t[i]) << 16;
    if (i + 1 < t.size())
      v |= static_cast<unsigned char>(t[i + 1]) << 8;
    if (i + 2 < t.size())
      v |= static_cast<unsigned char>(t[i + 2]);
    enc += a[(v >> 18) & 63];
    enc += a[(v >> 12) & 63];
    enc += i + 1 < t.size() ? a[(v >> 6) & 63] : '=';
    enc += i + 2 < t.size() ? a[v & 63] : '=';
  }
  return enc;
}

bool base64Decode(std::string_view in, std::string &out) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '+')
      return 62;
    if (c == '/')
      return 63;
    return -1;
  };
  out.clear();
  if (in.empty() || in.size() % 4)
    return false;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    for (int k = 0; k < 4; ++k) {
      char c = in[i + k];
      if (c == '=') {
        // Padding only at the end: "xx==" or "xxx=".
        if (i + 4 != in.size() || k < 2 || (k == 2 && in[i + 3] != '='))
          return false;
        v[k] = -2;
      } else if ((v[k] = val(c)) < 0) {
        return false;
      }
    }
    out += static_cast<char>((v[0] << 2) | (v[1] >> 4));
    if (v[2] >= 0)
      out += static_cast<char>(((v[1] & 15) << 4) | (v[2] >> 2));
    if (v[3] >= 0)
      out += static_cast<char>(((v[2] & 3) << 6) | v[3]);
  }
  return !out.empty();
}

static std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("cannot open tokenizer file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string &dir, const std::string &pattern) {
  std::string model = readFile(dir + "/tiktoken.model"); // named first when both are missing
  std::string config = readFile(dir + "/tokenizer_config.json");
  return fromStrings(model, config, pattern, dir);
}

std::unique_ptr<Tokenizer> Tokenizer::fromStrings(const std::string &model,
                                                  const std::string &configJson,
                                                  const std::string &pattern,
                                                  const std::string &origin) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  const std::string where = origin + "/tiktoken.model";
  std::unordered_map<uint32_t, size_t> rankLine;
  std::unordered_map<std::string, size_t> tokenLine;
  size_t lineNo = 0, start = 0;
  std::string bytes;
  while (start < model.size()) {
    size_t nl = model.find('\n', start);
    std::string_view line(model.data() + start,
                          (nl == std::string::npos ? model.size() : nl) - start);
    start = nl == std::string::npos ? model.size() : nl + 1;
    ++lineNo;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty())
      continue;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos)
      throw Error(where + " line " + std::to_string(lineNo) +
                  ": expected '<base64 token> <rank>', got '" + std::string(line.substr(0, 80)) + "'");
    std::string_view b64 = line.substr(0, sp), rankText = line.substr(sp + 1);
    if (!base64Decode(b64, bytes))
      throw Error(where + " line " + std::to_string(lineNo) + ": '" +
                  std::string(b64.substr(0, 80)) + "' is not base64");
    // Ranks are token ids: bounded so that a hostile file cannot make the
    // table allocate gigabytes (the published vocabulary ends at 163583).
    constexpr uint64_t kMaxRank = 1u << 24;
    uint64_t rank = 0;
    if (rankText.empty() || rankText.size() > 9)
      throw Error(where + " line " + std::to_string(lineNo) + ": rank '" + std::string(rankText) +
                  "' is not an integer in [0, 10^9)");
    for (char c : rankText) {
      if (c < '0' || c > '9')
        throw Error(where + " line " + std::to_string(lineNo) + ": rank '" +
                    std::string(rankText) + "' is not an integer in [0, 10^9)");
      rank = rank * 10 + static_cast<uint64_t>(c - '0');
    }
    if (rank >= kMaxRank)
      throw Error(where + " line " + std::to_string(lineNo) + ": rank " + std::to_string(rank) +
                  " exceeds the largest supported token id " + std::to_string(kMaxRank - 1));
    if (auto it = rankLine.find(static_cast<uint32_t>(rank)); it != rankLine.end())
      throw Error(where + " line " + std::to_string(lineNo) + ": rank " + std::to_string(rank) +
                  " is already used on line " + std::to_string(it->second));
    if (auto it = tokenLine.find(bytes); it != tokenLine.end())
      throw Error(where + " line " + std::to_string(lineNo) + ": token '" + std::string(b64) +
                  "' already has a rank on line " + std::to_string(it->second));
    rankLine[static_cast<uint32_t>(rank)] = lineNo;
    tokenLine[bytes] = lineNo;
    if (rank >= t->tokens.size())
      t->tokens.resize(rank + 1);
    t->tokens[rank] = bytes;
  }
  if (rankLine.empty())
    throw Error(where + " holds no tokens");
  std::vector<bool> present(t->tokens.size(), false);
  for (size_t r = 0; r < t->tokens.size(); ++r)
    present[r] = rankLine.count(static_cast<uint32_t>(r)) != 0;
  t->ranks.build(t->tokens, present);
  t->vocab = static_cast<int64_t>(t->tokens.size());

  // Special tokens.
  const std::string cwhere = origin + "/tokenizer_config.json";
  nlohmann::json cfg;
  try {
    cfg = nlohmann::json::parse(configJson);
  } catch (const std::exception &e) {
    throw Error(cwhere + " is not valid JSON: " + e.what());
  }
  if (!cfg.is_object())
    throw Error(cwhere + ": expected a JSON object");
  if (cfg.contains("added_tokens_decoder")) {
    const auto &added = cfg["added_tokens_decoder"];
    if (!added.is_object())
      throw Error(cwhere + ": added_tokens_decoder must be an object of id -> {content}");
    for (auto it = added.begin(); it != added.end(); ++it) {
      int64_t id;
      try {
        size_t pos = 0;
        id = std::stoll(it.key(), &pos);
        if (pos != it.key().size() || id < 0 || id >= (int64_t(1) << 31))
          throw 0;
      } catch (...) {
        throw Error(cwhere + ": added_tokens_decoder key '" + it.key() + "' is not a token id");
      }
      const auto &v = it.value();
      if (!v.is_object() || !v.contains("content") || !v["content"].is_string())
        throw Error(cwhere + ": added token " + it.key() + " has no string 'content'");
      std::string content = v["content"].get<std::string>();
      if (content.empty())
        throw Error(cwhere + ": added token " + it.key() + " is empty");
      if (id < static_cast<int64_t>(t->tokens.size()) && rankLine.count(static_cast<uint32_t>(id)))
        throw Error(cwhere + ": special token '" + content + "' id " + it.key() +
                    " is also an ordinary token's rank in tiktoken.model");
      if (t->specialByContent.count(content))
        throw Error(cwhere + ": special token '" + content + "' is listed twice");
      t->specialByContent[content] = id;
      t->specialById[id] = content;
      t->vocab = std::max(t->vocab, id + 1);
    }
  }
  auto named = [&](const char *key) -> int64_t {
    if (!cfg.contains(key) || cfg[key].is_null())
      return -1;
    const auto &v = cfg[key];
    std::string content = v.is_string() ? v.get<std::string>()
                          : v.is_object() && v.contains("content") && v["content"].is_string()
                              ? v["content"].get<std::string>()
                              : throw Error(cwhere + ": '" + key + "' must be a string");
    int64_t id = t->specialId(content);
    if (id < 0)
      throw Error(cwhere + ": " + key + " '" + content + "' is not among the special tokens");
    return id;
  };
  t->bos = named("bos_token");
  t->eos = named("eos_token");

  // The pre-tokenization pattern.
  std::string pcre = toPcre2Pattern(pattern);
  int err = 0;
  PCRE2_SIZE off = 0;
  t->regex = std::make_unique<Regex>();
  t->regex->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre.c_str()), pcre.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &off, nullptr);
  if (!t->regex->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw Error("tokenizer pattern does not compile at offset " + std::to_string(off) + ": " +
                reinterpret_cast<char *>(msg));
  }
  t->regex->jit = pcre2_jit_compile(t->regex->code, PCRE2_JIT_COMPLETE) == 0;
  return t;
}

int64_t Tokenizer::specialId(const std::string &content) const {
  auto it = specialByContent.find(content);
  return it == specialByContent.end() ? -1 : it->second;
}

std::vector<int64_t> Tokenizer::stopIds() const {
  std::vector<int64_t> out;
  if (eos >= 0)
    out.push_back(eos);
  int64_t end = specialId("<|im_end|>");
  if (end >= 0 && end != eos)
    out.push_back(end);
  return out;
}

//===----------------------------------------------------------------------===//
// Encoding and decoding
//===----------------------------------------------------------------------===//

uint64_t Tokenizer::RankTable::hash(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, s.data() + i, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  uint64_t v = 0;
  std::memcpy(&v, s.data() + i, s.size() - i);
  h = (h ^ v) * 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

void Tokenizer::RankTable::build(const std::vector<std::string> &tokens,
                                 const std::vector<bool> &present) {
  size_t n = 0;
  for (bool p : present)
    n += p;
  size_t size = 16;
  while (size < 2 * n)
    size *= 2;
  slots.assign(size, Slot{});
  mask = size - 1;
  for (size_t r = 0; r < tokens.size(); ++r) {
    if (!present[r])
      continue;
    uint64_t h = hash(tokens[r]);
    for (uint64_t i = h & mask;; i = (i + 1) & mask)
      if (!slots[i].data) {
        slots[i] = Slot{h, tokens[r].data(), static_cast<uint32_t>(tokens[r].size()),
                        static_cast<uint32_t>(r)};
        break;
      }
  }
}

uint32_t Tokenizer::RankTable::find(std::string_view s) const {
  uint64_t h = hash(s);
  for (uint64_t i = h & mask;; i = (i + 1) & mask) {
    const Slot &slot = slots[i];
    if (!slot.data)
      return std::numeric_limits<uint32_t>::max();
    if (slot.hash == h && slot.len == s.size() && std::memcmp(slot.data, s.data(), s.size()) == 0)
      return slot.rank;
  }
}

void Tokenizer::bytePairEncode(std::string_view piece, std::vector<int64_t> &out) const {
  constexpr uint32_t kMax = std::numeric_limits<uint32_t>::max();
  auto rankOf = [&](std::string_view s) -> uint32_t { return ranks.find(s); };
  if (uint32_t r = rankOf(piece); r != kMax) {
    out.push_back(r);
    return;
  }
  // tiktoken's byte_pair_merge: parts[i] = (start, rank of merging parts i
  // and i + 1); repeatedly merge the lowest rank, leftmost first.
  thread_local std::vector<std::pair<size_t, uint32_t>> parts; // reused: no allocation a piece
  parts.clear();
  for (size_t i = 0; i + 1 < piece.size(); ++i)
    parts.emplace_back(i, rankOf(piece.substr(i, 2)));
  parts.emplace_back(piece.size() - 1, kMax);
  parts.emplace_back(piece.size(), kMax);
  auto rankAt = [&](size_t i) -> uint32_t {
    if (i + 3 < parts.size())
      return rankOf(piece.substr(parts[i].first, parts[i + 3].first - parts[i].first));
    return kMax;
  };
  while (true) {
    uint32_t best = kMax;
    size_t bi = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i)
      if (parts[i].second < best) {
        best = parts[i].second;
        bi = i;
      }
    if (best == kMax)
      break;
    if (bi > 0)
      parts[bi - 1].second = rankAt(bi - 1);
    parts[bi].second = rankAt(bi);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(bi) + 1);
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    std::string_view s = piece.substr(parts[i].first, parts[i + 1].first - parts[i].first);
    uint32_t r = rankOf(s);
    if (r == kMax) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", static_cast<unsigned char>(s[0]));
      throw Error(std::string("tokenizer: byte ") + hex + " has no token in tiktoken.model");
    }
    out.push_back(r);
  }
}

void Tokenizer::encodeOrdinary(std::string_view text, std::vector<int64_t> &out) const {
  if (text.empty())
    return;
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(regex->code, nullptr);
  struct Free {
    pcre2_match_data *m;
    ~Free() { pcre2_match_data_free(m); }
  } guard{md};
  const auto *subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  PCRE2_SIZE offset = 0;
  while (offset < text.size()) {
    int rc = regex->jit ? pcre2_jit_match(regex->code, subject, text.size(), offset, 0, md, nullptr)
                        : pcre2_match(regex->code, subject, text.size(), offset,
                                      PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH)
      break;
    if (rc < 0)
      throw Error("tokenizer: pattern match failed (PCRE2 error " + std::to_string(rc) + ")");
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    if (ov[1] == ov[0]) { // empty match: step over one character
      offset = ov[1] + 1;
      while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80)
        ++offset;
      continue;
    }
    bytePairEncode(text.substr(ov[0], ov[1] - ov[0]), out);
    offset = ov[1];
  }
}

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  std::string clean = sanitizeUtf8(text);
  std::vector<int64_t> out;
  out.reserve(clean.size() / 3 + 1);
  encodeOrdinary(clean, out);
  return out;
}

std::vector<int64_t> Tokenizer::encodeWithSpecial(std::string_view text) const {
  std::string clean = sanitizeUtf8(text);
  std::string_view s(clean);
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    // The earliest special token from pos (the longest one on a tie).
    size_t at = std::string_view::npos, len = 0;
    int64_t id = -1;
    for (const auto &[content, sid] : specialByContent) {
      size_t f = s.find(content, pos);
      if (f != std::string_view::npos && (f < at || (f == at && content.size() > len))) {
        at = f;
        len = content.size();
        id = sid;
      }
    }
    if (at == std::string_view::npos) {
      encodeOrdinary(s.substr(pos), out);
      break;
    }
    encodeOrdinary(s.substr(pos, at - pos), out);
    out.push_back(id);
    pos = at + len;
  }
  return out;
}

std::string Tokenizer::tokenBytes(int64_t id) const {
  if (id >= 0 && id < static_cast<int64_t>(tokens.size()) && !tokens[id].empty())
    return tokens[id];
  if (auto it = specialById.find(id); it != specialById.end())
    return it->second;
  throw Error("tokenizer: token id " + std::to_string(id) + " is not in the vocabulary");
}

std::string Tokenizer::decode(const std::vector<int64_t> &ids) const {
  std::string out;
  for (int64_t id : ids)
    out += tokenBytes(id);
  return out;
}

std::vector<int64_t> Tokenizer::encodeChat(const std::vector<Message> &messages) const {
  return encodeChatTurns(messages, /*defaultSystem=*/true);
}

std::vector<int64_t>
Tokenizer::encodeChatContinuation(const std::vector<Message> &messages) const {
  return encodeChatTurns(messages, /*defaultSystem=*/false);
}

std::vector<int64_t> Tokenizer::encodeChatTurns(const std::vector<Message> &messages,
                                                bool defaultSystem) const {
  auto special = [&](const std::string &content) {
    int64_t id = specialId(content);
    if (id < 0)
      throw Error("tokenizer: the chat format needs special token '" + content +
                  "', which tokenizer_config.json does not list");
    return id;
  };
  std::vector<int64_t> out;
  auto turn = [&](const std::string &role, const std::string &content) {
    out.push_back(special("<|im_" + role + "|>"));
    encodeOrdinary(role, out);
    out.push_back(special("<|im_middle|>"));
    std::vector<int64_t> body = encode(content);
    out.insert(out.end(), body.begin(), body.end());
    out.push_back(special("<|im_end|>"));
  };
  bool hasSystem = !messages.empty() && messages.front().role == "system";
  if (!hasSystem && defaultSystem)
    turn("system", "You are Kimi, an AI assistant created by Moonshot AI.");
  for (const Message &m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw Error("chat message role '" + m.role + "' is not system, user or assistant");
    turn(m.role, m.content);
  }
  out.push_back(special("<|im_assistant|>"));
  encodeOrdinary("assistant", out);
  out.push_back(special("<|im_middle|>"));
  return out;
}

//===----------------------------------------------------------------------===//
// Generated vocabularies
//===----------------------------------------------------------------------===//

const char *const kTrainingText =
    "The quick brown fox jumps over the lazy dog. The model reads the prompt, "
    "then it writes the answer one token at a time. Kimi is a large language "
    "model; it can read long documents and write code.\n"
    "def attention(query, key, value):\n    scores = query @ key.T\n"
    "    return softmax(scores) @ value\n\n"
    "for (int i = 0; i < n; ++i) { sum += x[i] * w[i]; }\n"
    "The compiler turns the model into kernels; the runtime runs them on the "
    "GPU or on the CPU. It's fast, and it's exact: we've checked every layer.\n"
    "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81 "
    "\xe6\x88\x91\xe4\xbb\xac\xe6\x98\xaf\xe6\x9c\x88\xe4\xb9\x8b\xe6\x9a\x97"
    "\xe9\x9d\xa2\xe3\x80\x82 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae"
    "\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 \xf0\x9f\x9a\x80\xf0\x9f\x98\x80 "
    "Numbers: 1234567890, 3.14159, 2026-11-30. Caf\xc3\xa9, na\xc3\xafve, r\xc3\xa9sum\xc3\xa9.\n"
    "The quick brown fox jumps over the lazy dog again, and the dog sleeps.\n";

std::string trainTiktokenModel(std::string_view corpus, size_t ordinary,
                               const std::string &pattern) {
  // Pieces of the corpus (the pattern's split) with their counts, as
  // sequences of token strings.
  std::unique_ptr<Tokenizer> bytesOnly;
  {
    std::string model;
    for (int b = 0; b < 256; ++b)
      model += base64Encode(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
    bytesOnly = Tokenizer::fromStrings(model, "{}", pattern, "generated");
  }
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b)
    vocab.push_back(std::string(1, static_cast<char>(b)));
  std::map<std::string, int64_t> pieceCount;
  {
    std::string clean = sanitizeUtf8(corpus);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(bytesOnly->regex->code, nullptr);
    PCRE2_SIZE off = 0;
    while (off < clean.size() &&
           pcre2_match(bytesOnly->regex->code, reinterpret_cast<PCRE2_SPTR>(clean.data()),
                       clean.size(), off, PCRE2_NO_UTF_CHECK, md, nullptr) >= 0) {
      PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
      if (ov[1] == ov[0])
        break;
      ++pieceCount[clean.substr(ov[0], ov[1] - ov[0])];
      off = ov[1];
    }
    pcre2_match_data_free(md);
  }
  std::vector<std::pair<std::vector<std::string>, int64_t>> words;
  for (auto &[piece, n] : pieceCount) {
    std::vector<std::string> w;
    for (char c : piece)
      w.push_back(std::string(1, c));
    words.emplace_back(std::move(w), n);
  }
  while (vocab.size() < ordinary) {
    std::map<std::pair<std::string, std::string>, int64_t> pairs;
    for (auto &[w, n] : words)
      for (size_t i = 0; i + 1 < w.size(); ++i)
        pairs[{w[i], w[i + 1]}] += n;
    const std::pair<std::string, std::string> *best = nullptr;
    int64_t bestN = 0;
    for (auto &[pr, n] : pairs)
      if (n > bestN) { // strictly more: ties keep the smallest bytes (map order)
        best = &pr;
        bestN = n;
      }
    if (!best)
      break;
    std::string merged = best->first + best->second;
    auto [a, b] = *best;
    vocab.push_back(merged);
    for (auto &[w, n] : words) {
      std::vector<std::string> next;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
          next.push_back(merged);
          ++i;
        } else {
          next.push_back(w[i]);
        }
      }
      w = std::move(next);
    }
  }
  std::string out;
  for (size_t r = 0; r < vocab.size(); ++r)
    out += base64Encode(vocab[r]) + " " + std::to_string(r) + "\n";
  return out;
}

std::string kimiTokenizerConfig(int64_t firstSpecial, int64_t vocab) {
  static const char *names[] = {"[BOS]",         "[EOS]",          "<|im_end|>",
                                "<|im_user|>",   "<|im_assistant|>", "<|im_system|>",
                                "<|im_middle|>", "[EOT]",          "[UNK]",
                                "[PAD]"};
  nlohmann::json added = nlohmann::json::object();
  for (int64_t id = firstSpecial; id < vocab; ++id) {
    size_t k = static_cast<size_t>(id - firstSpecial);
    std::string content = k < std::size(names) ? names[k]
                                               : "<|reserved_token_" + std::to_string(k) + "|>";
    added[std::to_string(id)] = {{"content", content}, {"special", true}};
  }
  nlohmann::json cfg = {{"added_tokens_decoder", added},
                        {"bos_token", "[BOS]"},
                        {"eos_token", "[EOS]"},
                        {"tokenizer_class", "TikTokenTokenizer"},
                        {"model_max_length", 1048576}};
  return cfg.dump(1) + "\n";
}

} // namespace k3c::tok
