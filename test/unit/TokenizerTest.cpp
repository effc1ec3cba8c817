//===- TokenizerTest.cpp - tokenizer pieces against hand-computed results -===//

#include "support/Common.h"
#include "tokenizer/Tokenizer.h"

#include <gtest/gtest.h>

using namespace k3c::tok;

// A vocabulary of the 256 bytes plus the merges "ab" (256), "abc" (257),
// "bc" (258): tiktoken merges the lowest-ranked pair first.
static std::unique_ptr<Tokenizer> small() {
  std::string model;
  static const char *b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (unsigned b = 0; b < 256; ++b)
    model += std::string{b64[b >> 2], b64[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
  model += "YWI= 256\nYWJj 257\nYmM= 258\n"; // ab, abc, bc
  return Tokenizer::fromStrings(
      model, R"({"added_tokens_decoder": {"300": {"content": "<|im_end|>"}}, "eos_token": "<|im_end|>"})");
}

TEST(Tokenizer, PatternIntersectionRewrite) {
  EXPECT_EQ(toPcre2Pattern(R"([\p{Lu}\p{M}&&[^\p{Han}]]+|\s+)"),
            R"((?:(?![\p{Han}])[\p{Lu}\p{M}])+|\s+)");
  EXPECT_EQ(toPcre2Pattern(R"([^\r\n\p{L}]?x\[y])"), R"([^\r\n\p{L}]?x\[y])"); // unchanged
  EXPECT_THROW(toPcre2Pattern("[abc"), k3c::Error);
}

TEST(Tokenizer, Utf8Repair) {
  // Maximal subparts: E2 82 is one replacement, C0 and AF are two, a lone
  // continuation is one, a truncated 4-byte sequence at the end is one.
  EXPECT_EQ(sanitizeUtf8("a\xE2\x82z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(sanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(sanitizeUtf8("\x80"), "\xEF\xBF\xBD");
  EXPECT_EQ(sanitizeUtf8("\xF0\x9F\x98"), "\xEF\xBF\xBD");
  EXPECT_EQ(sanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); // surrogate
  EXPECT_EQ(sanitizeUtf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

TEST(Tokenizer, StreamHoldsSplitCharacters) {
  Utf8Stream s;
  EXPECT_EQ(s.push("a\xE4"), "a");         // 你 = E4 BD A0, cut after its first byte
  EXPECT_EQ(s.push("\xBD"), "");
  EXPECT_EQ(s.push("\xA0!"), "\xE4\xBD\xA0!");
  EXPECT_EQ(s.push("\xFF"), "\xEF\xBF\xBD"); // never valid: replaced at once
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.finish(), "\xEF\xBF\xBD");     // incomplete at the end
}

TEST(Tokenizer, BytePairMergeOrder) {
  auto t = small();
  // "abc": pairs ab (256) and bc (258); ab merges first, then "ab"+"c" = abc (257).
  EXPECT_EQ(t->encode("abc"), (std::vector<int64_t>{257}));
  // "bcab" is one piece: bc (258) and ab (256); ab first, then bc; "bcab" has no rank.
  EXPECT_EQ(t->encode("bcab"), (std::vector<int64_t>{258, 256}));
  EXPECT_EQ(t->encode("a"), (std::vector<int64_t>{'a'}));
  EXPECT_EQ(t->decode(t->encode("xabcx abc")), "xabcx abc");
}

TEST(Tokenizer, SpecialTokens) {
  auto t = small();
  EXPECT_EQ(t->eosId(), 300);
  EXPECT_EQ(t->encodeWithSpecial("a<|im_end|>"), (std::vector<int64_t>{'a', 300}));
  std::vector<int64_t> plain = t->encode("a<|im_end|>");
  EXPECT_TRUE(std::find(plain.begin(), plain.end(), 300) == plain.end());
  EXPECT_EQ(t->decode({'a', 300}), "a<|im_end|>");
  EXPECT_THROW(t->decode({299}), k3c::Error);
  EXPECT_EQ(t->stopIds(), (std::vector<int64_t>{300}));
  // The chat format needs Kimi's role tokens.
  EXPECT_THROW(t->encodeChat({{"user", "hi"}}), k3c::Error);
}

TEST(Tokenizer, GeneratedVocabularyRoundTrips) {
  std::string model = trainTiktokenModel(kTrainingText, 400);
  auto t = Tokenizer::fromStrings(model, kimiTokenizerConfig(496, 512));
  EXPECT_EQ(t->ordinaryCount(), 400u);
  EXPECT_EQ(t->vocabSize(), 512);
  EXPECT_EQ(t->specialId("[BOS]"), 496);
  EXPECT_EQ(t->specialId("<|im_middle|>"), 502);
  std::string text = "The quick brown fox, 你好 \xF0\x9F\x9A\x80 naïve\n";
  std::vector<int64_t> ids = t->encode(text);
  EXPECT_LT(ids.size(), text.size()); // merges were learned
  EXPECT_EQ(t->decode(ids), text);
  std::vector<int64_t> chat = t->encodeChat({{"user", "hi"}});
  EXPECT_EQ(chat.front(), t->specialId("<|im_system|>"));
  EXPECT_EQ(chat.back(), t->specialId("<|im_middle|>"));
}
