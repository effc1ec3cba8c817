//===- Tokenizer.h - Kimi's tiktoken BPE tokenizer (no LLVM/MLIR) -*- C++ -*-===//
//
// The tokenizer of a Kimi checkpoint directory: `tiktoken.model` (one
// base64 token and its rank per line; a token's id is its rank) and
// `tokenizer_config.json` (special tokens in `added_tokens_decoder`, the
// BOS/EOS tokens). Encoding follows tiktoken exactly: the text is split by
// the model's pre-tokenization pattern (PCRE2, Unicode properties, JIT), each
// piece is byte-pair merged by lowest rank; special tokens are ids of their
// own and are never produced from ordinary text unless asked for. Invalid
// UTF-8 input is read as a WHATWG/TextDecoder does (each maximal invalid
// subpart becomes U+FFFD) before splitting. Decoding gives raw bytes; a
// Utf8Stream cuts them into valid UTF-8 for streaming.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_TOKENIZER_TOKENIZER_H
#define K3C_TOKENIZER_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace k3c::tok {

/// Kimi's pre-tokenization pattern (tokenization_kimi.py), in the regex
/// syntax of tiktoken (class intersection `&&`).
extern const char *const kKimiPattern;

/// `pattern` with each `[A&&[^B]]` class intersection rewritten for PCRE2 as
/// `(?:(?![B])[A])`; other text unchanged.
std::string toPcre2Pattern(std::string_view pattern);

/// Base64 (standard alphabet, '=' padding) of `bytes`, as tiktoken.model
/// writes tokens.
std::string base64Encode(std::string_view bytes);
/// Strict decoding (alphabet, length a multiple of 4, padding only at the
/// end); false on anything else or an empty result.
bool base64Decode(std::string_view text, std::string &out);

/// `text` with every maximal invalid UTF-8 subpart replaced by U+FFFD (the
/// WHATWG decoder's rule, as TextDecoder and Python's "replace" apply it).
std::string sanitizeUtf8(std::string_view text);

struct Message {
  std::string role; ///< system, user or assistant
  std::string content;
};

/// A byte-level BPE vocabulary in tiktoken.model format: the 256 single
/// bytes (ranks 0..255), then merges learned from `corpus` (split by
/// `pattern`; the most frequent adjacent pair, ties by byte order) until
/// `ordinary` tokens exist or every piece is one token. Deterministic.
std::string trainTiktokenModel(std::string_view corpus, size_t ordinary,
                               const std::string &pattern = kKimiPattern);
/// tokenizer_config.json for a vocabulary of `vocab` ids whose special tokens
/// take ids [firstSpecial, vocab): Kimi's names ([BOS], [EOS], <|im_end|>,
/// <|im_user|>, <|im_assistant|>, <|im_system|>, <|im_middle|>, ...) and
/// <|reserved_token_N|> for the rest; bos_token [BOS], eos_token [EOS].
std::string kimiTokenizerConfig(int64_t firstSpecial, int64_t vocab);
/// A few kilobytes of mixed English, code, CJK and emoji text to train
/// generated vocabularies on.
extern const char *const kTrainingText;

class Tokenizer {
public:
  /// Loads `dir`/tiktoken.model and `dir`/tokenizer_config.json. Errors
  /// (k3c::Error) name the file, the line and what is wrong.
  static std::unique_ptr<Tokenizer> load(const std::string &dir,
                                         const std::string &pattern = kKimiPattern);
  /// From the file contents (tests, tools).
  static std::unique_ptr<Tokenizer> fromStrings(const std::string &tiktokenModel,
                                                const std::string &configJson,
                                                const std::string &pattern = kKimiPattern,
                                                const std::string &origin = "tokenizer");
  ~Tokenizer();

  /// Ordinary text: special-token strings are encoded as text.
  std::vector<int64_t> encode(std::string_view text) const;
  /// Special-token strings in `text` become their ids (tiktoken's
  /// allowed_special="all"); the text between them is encoded as ordinary.
  std::vector<int64_t> encodeWithSpecial(std::string_view text) const;
  /// The bytes of `ids` (special tokens as their strings); an unknown id is
  /// an error naming it.
  std::string decode(const std::vector<int64_t> &ids) const;
  std::string tokenBytes(int64_t id) const;

  /// Kimi's chat format: per message `<|im_{role}|>{role}<|im_middle|>`
  /// content `<|im_end|>`, then `<|im_assistant|>assistant<|im_middle|>`.
  std::vector<int64_t> encodeChat(const std::vector<Message> &messages) const;
  /// The same turns and assistant header without the default system turn:
  /// what a conversation adds after an assistant turn closed by <|im_end|>
  /// (k3-run --interactive).
  std::vector<int64_t> encodeChatContinuation(const std::vector<Message> &messages) const;

  /// The id of special token `content`, or -1.
  int64_t specialId(const std::string &content) const;
  bool isSpecial(int64_t id) const { return specialById.count(id) != 0; }
  int64_t bosId() const { return bos; }
  int64_t eosId() const { return eos; }
  /// Ids at which generation stops: EOS and <|im_end|> when present.
  std::vector<int64_t> stopIds() const;
  /// One past the largest id (ordinary or special).
  int64_t vocabSize() const { return vocab; }
  size_t ordinaryCount() const { return tokens.size(); }

private:
  friend std::string trainTiktokenModel(std::string_view, size_t, const std::string &);
  Tokenizer() = default;
  void bytePairEncode(std::string_view piece, std::vector<int64_t> &out) const;
  void encodeOrdinary(std::string_view text, std::vector<int64_t> &out) const;
  std::vector<int64_t> encodeChatTurns(const std::vector<Message> &messages,
                                       bool defaultSystem) const;

  /// Open-addressing table bytes -> rank (linear probing, power-of-two
  /// size, keys viewing `tokens`): the BPE's hot lookup.
  struct RankTable {
    struct Slot {
      uint64_t hash = 0;
      const char *data = nullptr; ///< null: empty
      uint32_t len = 0, rank = 0;
    };
    std::vector<Slot> slots;
    uint64_t mask = 0;
    static uint64_t hash(std::string_view s);
    void build(const std::vector<std::string> &tokens, const std::vector<bool> &present);
    /// The rank of `s`, or UINT32_MAX.
    uint32_t find(std::string_view s) const;
  };
  std::vector<std::string> tokens; // by rank (empty: no token)
  RankTable ranks;
  std::unordered_map<std::string, int64_t> specialByContent;
  std::unordered_map<int64_t, std::string> specialById;
  int64_t bos = -1, eos = -1, vocab = 0;
  struct Regex;
  std::unique_ptr<Regex> regex;
};

/// Streams decoded bytes as valid UTF-8: push() returns the longest prefix
/// of everything pushed so far that ends on a character boundary (invalid
/// bytes become U+FFFD as soon as they cannot start or continue a
/// character); finish() returns the rest, an incomplete tail as U+FFFD.
class Utf8Stream {
public:
  std::string push(std::string_view bytes);
  std::string finish();

private:
  std::string pending;
};

} // namespace k3c::tok

#endif // K3C_TOKENIZER_TOKENIZER_H
