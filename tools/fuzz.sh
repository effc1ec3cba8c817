#!/usr/bin/env bash
# Builds the libFuzzer targets in test/fuzz/ with clang-22 (libFuzzer + ASan +
# UBSan) and runs each for SECONDS (default 60) from a seed corpus:
#   fuzz_config        the config reader    (seeds: models/configs/*.json)
#   fuzz_safetensors   the safetensors reader (seeds: small generated files)
#   fuzz_tokenizer     the tokenizer loader, encoder, decoder and UTF-8 stream
#                      (seeds: a generated vocabulary + config + texts)
#   fuzz_manifest      the artifact manifest's schema (support/Manifest.cpp: fromJson,
#                      toJson and fromJson again; seed: a generated minimal valid manifest)
# Prints each fuzzer's executions and exits non-zero on the first crash (the
# reproducer is left in $OUT_DIR). Needs clang-22 and libclang-rt-22-dev.
#   tools/fuzz.sh [SECONDS]       K3C_FUZZ_DIR=dir (default build/fuzz)
#   K3C_FUZZ_TARGETS="manifest config" runs only those (default: all four)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=${K3C_FUZZ_DIR:-build/fuzz}
CXX=${K3C_FUZZ_CXX:-clang++-22}
if ! command -v "$CXX" >/dev/null; then
  echo "k3c fuzz: $CXX not found (apt-get install clang-22 libclang-rt-22-dev)" >&2
  exit 77
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I. -Wno-deprecated-declarations)
pcre=$(pkg-config --cflags --libs libpcre2-8)
echo "k3c fuzz: building with $CXX"
"$CXX" "${flags[@]}" test/fuzz/fuzz_config.cpp models/Config.cpp -o "$out/fuzz_config" &
"$CXX" "${flags[@]}" test/fuzz/fuzz_safetensors.cpp models/Safetensors.cpp -o "$out/fuzz_safetensors" &
wait
"$CXX" "${flags[@]}" test/fuzz/fuzz_tokenizer.cpp tokenizer/Tokenizer.cpp $pcre -o "$out/fuzz_tokenizer" &
"$CXX" "${flags[@]}" test/fuzz/fuzz_manifest.cpp support/Manifest.cpp -o "$out/fuzz_manifest" &
wait

# Seed corpora.
mkdir -p "$out/seed/config" "$out/seed/safetensors" "$out/seed/tokenizer" "$out/seed/manifest"
cp models/configs/*.json "$out/seed/config/"
python3 - "$out/seed" <<'PY'
import json, struct, sys
d = sys.argv[1]
def st(path, tensors, meta=None):
    header, blob = {}, b""
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + blob)
st(d + "/safetensors/a", [("w", "BF16", [2, 3], bytes(12)), ("b", "F32", [3], bytes(12))], {"format": "pt"})
st(d + "/safetensors/b", [("x.weight_packed", "U8", [4, 8], bytes(range(32))), ("x.weight_scale", "U8", [4, 1], b"\x7f\x7e\x80\x00")])
st(d + "/safetensors/c", [])
PY
python3 - "$out/seed" <<'PY'
import base64, json, sys
d = sys.argv[1]
model = "".join("%s %d\n" % (base64.b64encode(bytes([b])).decode(), b) for b in range(256))
model += "%s 256\n%s 257\n" % (base64.b64encode(b"th").decode(), base64.b64encode(b"the").decode())
cfg = json.dumps({"added_tokens_decoder": {"300": {"content": "<|im_end|>"}, "301": {"content": "[EOS]"}},
                  "eos_token": "[EOS]"})
for i, text in enumerate([b"the theme", "你好 🚀 naïve".encode(), b"bad \xff\xc3( <|im_end|>", b""]):
    open("%s/tokenizer/%d" % (d, i), "wb").write(model.encode() + b"\0" + cfg.encode() + b"\0" + text)
PY
python3 - "$out/seed" <<'PY'
import json, sys
d = sys.argv[1]
h = "0" * 64
arg = lambda kind, i, shape, dyn: {"kind": kind, "index": i, "dtype": "f32", "shape": shape, "dynamic_from": dyn}
kernel = {"name": "k3_add_0", "family": "add", "host_symbol": "k3k_k3_add_0", "result_aliases": [-1],
          "args": [arg("input", 0, [-1, 8], [[0, 0]]), arg("output", 0, [-1, 8], [[0, 0]]),
                   arg("scratch", -1, [-1, 8], [[0, 0]])]}
entry = {"values": [{"id": 0, "kind": "input", "name": "x", "dtype": "f32", "shape": [-1, 8], "dims": ["tokens", ""]},
                    {"id": 1, "kind": "state", "name": "layers.0.mla_cache", "dtype": "bf16", "shape": [-1, 64, 8], "dims": ["seqs", "context", ""]},
                    {"id": 2, "dtype": "f32", "shape": [-1, 8], "dims": ["tokens", ""]},
                    {"id": 3, "kind": "weight", "name": "w", "dtype": "bf16", "shape": [8, 8], "dims": ["", ""]}],
         "launches": [{"kernel": "k3_add_0", "inputs": [0], "outputs": [2]}], "returns": [2]}
m = {"format": "k3c-artifact", "format_version": 2, "compiler": "k3c", "target": "host",
     "model": {"model_type": "kimi_linear", "vocab_size": 16, "hidden_size": 8, "num_layers": 1,
               "eos_token_id": 2},
     "capacity": {"max_tokens": 16, "max_seqs": 2, "max_context": 64},
     "checkpoint": {"path": "ckpt", "sha256": {"config.json": h}},
     "files": {"host_library": {"path": "kernels_host.so", "sha256": h}},
     "kernels": [kernel], "entries": {"prefill": entry, "decode": entry},
     "weights": [{"name": "w", "transform": "convert", "dtype": "bf16", "shape": [8, 8],
                  "sources": [{"tensor": "w.weight", "dtypes": ["bf16", "f32"], "shapes": [[8, 8]]}]}]}
json.dump(m, open(d + "/manifest/valid.json", "w"))
PY

status=0
for t in ${K3C_FUZZ_TARGETS:-config safetensors tokenizer manifest}; do
  mkdir -p "$out/corpus/$t"
  log="$out/fuzz_$t.log"
  echo "k3c fuzz: fuzz_$t for $secs s"
  if ! (cd "$out" && "./fuzz_$t" -max_total_time="$secs" -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$out/crash_$t-" "corpus/$t" "seed/$t" > "$log" 2>&1); then
    echo "k3c fuzz: fuzz_$t FOUND A CRASH (log: $log; reproducer: $out/crash_$t-*)" >&2
    tail -n 30 "$log" >&2
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" | sed "s/^/  fuzz_$t /"
done
exit $status
