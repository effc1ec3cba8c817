// The independent side of test/tools/tokenizer.test: OpenAI's tiktoken (Rust,
// compiled to WASM, from npm) on a tokenizer directory (tiktoken.model +
// tokenizer_config.json) with Kimi's pattern, over a file of base64 cases.
// Prints what `k3-tok DIR cases FILE` prints:
//   <encode_ordinary ids> | <encode(allowed_special="all") ids> | <base64 of decode(first half)> | roundtrip
// Case bytes are read as text the way TextDecoder does (invalid UTF-8 -> U+FFFD).
// usage: node tiktoken-peer.cjs NODE_MODULES_DIR TOKENIZER_DIR CASES
const path = require("path");
const fs = require("fs");
const { Tiktoken } = require(path.join(process.argv[2], "tiktoken"));
const dir = process.argv[3];
const pattern = [
  String.raw`[\p{Han}]+`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`\p{N}{1,3}`,
  String.raw` ?[^\s\p{L}\p{N}]+[\r\n]*`,
  String.raw`\s*[\r\n]+`,
  String.raw`\s+(?!\S)`,
  String.raw`\s+`,
].join("|");
const config = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
const specials = {};
for (const [id, tok] of Object.entries(config.added_tokens_decoder || {})) specials[tok.content] = Number(id);
const enc = new Tiktoken(fs.readFileSync(path.join(dir, "tiktoken.model"), "utf8"), specials, pattern);
const decoder = new TextDecoder("utf-8");
const out = [];
for (const line of fs.readFileSync(process.argv[4], "utf8").split("\n")) {
  const b64 = line.trim();
  if (!b64) continue;
  const text = decoder.decode(Buffer.from(b64, "base64"));
  const plain = Array.from(enc.encode_ordinary(text));
  const special = Array.from(enc.encode(text, "all"));
  const half = Buffer.from(enc.decode(new Uint32Array(special.slice(0, Math.floor(special.length / 2)))));
  const round = Buffer.from(enc.decode(new Uint32Array(plain))).equals(Buffer.from(text, "utf8"));
  out.push(`${plain.join(",")} | ${special.join(",")} | ${half.toString("base64")} | ${round ? "roundtrip" : "ROUNDTRIP-FAILED"}`);
}
enc.free();
process.stdout.write(out.join("\n") + "\n");
