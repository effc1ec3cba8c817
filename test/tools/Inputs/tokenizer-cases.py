"""Writes the tokenizer test corpus: one base64 byte string per line.

Hand-picked cases (ASCII, code, CJK, Japanese/Korean, emoji with ZWJ and
flags, combining marks, RTL scripts, digits, contractions, whitespace runs,
every special token of the generated vocabulary, invalid UTF-8 of every
kind) and seeded random mixes of the same pools.
usage: tokenizer-cases.py OUT [N_RANDOM]
"""
import base64
import random
import sys

SPECIALS = ["[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>",
            "<|im_middle|>", "[EOT]", "[UNK]", "[PAD]"] + ["<|reserved_token_%d|>" % i for i in range(10, 16)]
CASES = [
    b"Hello, world!", b"The quick brown fox jumps over the lazy dog.",
    "你好，世界！今天天气很好。我们是月之暗面。".encode(), "日本語のテキストとカタカナ、한국어 텍스트".encode(),
    "emoji 🚀😀👩‍👩‍👧 flags 🇯🇵🇫🇷 skin 👍🏽".encode(), "e\u0301 combining a\u0308\u0323, Å, ñ, ﬁ, ǅ title".encode(),
    "Ωμέγα русский текст العربية עברית हिन्दी ไทย".encode(),
    b"It's we've they'll I'M DON'T you'D", b"12345678901234 3.14159 0x1F 1e-5 -42",
    b"def f(x):\n    return x**2  # comment\n\n\tif a && b || c: pass\r\n",
    b"  leading and trailing   \n\n\r\n\t\ttabs  \n  ", b"", b" ", b"\n", b"a", b"\x00\x01\x7f",
    b"invalid \xff\xfe utf8 \xc3( \xe2\x82 mid \xed\xa0\x80 surrogate \xf4\x90\x80\x80 big \xc0\xaf overlong",
    b"truncated at end \xf0\x9f\x98", b"\x80\x80\x80 lone continuations \xbf",
    ("".join(SPECIALS)).encode(), ("x " + " y ".join(SPECIALS) + " z").encode(),
    b"<|im_end|x <|im_end <im_end|> [BOS [EOS]] <|reserved_token_99|>",
    b"<|im_system|>system<|im_middle|>You are Kimi.<|im_end|><|im_user|>user<|im_middle|>hi<|im_end|>",
]
POOLS = ["abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " \t\n\r",
         ".,;:!?'\"()[]{}<>|&*+-=/\\_#@$%^~`", "你好世界我们是月之暗面天气很好中文字", "カタカナひらがな한국어",
         "🚀😀👍🏽🇯🇵", "\u0301\u0308\u0323", "éàüñçø", "αβγδεжзий"]

def main():
    out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 300
    rng = random.Random(20261130)
    cases = list(CASES)
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.08:
                parts.append(rng.choice(SPECIALS).encode())
            elif r < 0.13:
                parts.append(bytes(rng.randrange(128, 256) for _ in range(rng.randint(1, 3))))
            else:
                pool = rng.choice(POOLS)
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 10))).encode())
        cases.append(b"".join(parts))
    with open(out, "w") as f:
        for c in cases:
            if c:
                f.write(base64.b64encode(c).decode() + "\n")

main()
