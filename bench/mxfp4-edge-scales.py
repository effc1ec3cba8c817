#!/usr/bin/env python3
"""Copies a k3c/K3 checkpoint with edge-case E8M0 scales in one MoE layer.

In every routed expert of layer LAYER, every 5th scale byte of w1, w3 and w2
(checkpoint layout, [N, K/32] uint8) is replaced, cycling through 0x00
(2^-127), 0x01, 0x7F (2^0), 0x80 (2^1), 0x81 and 0x88 (2^9): bytes >= 0x80
force the expert kernel's exact two-multiply path for the warp's block,
bytes < 0x80 the folded path; with --nan, the first scale of expert 0's w1
becomes 0xFF (NaN: hidden unit 0 of expert 0, so every output of its pairs;
run k3-run with --allow-nonfinite). A K3C_DUMP_KERNEL dump of that layer's
moe_experts launch then checks both decode paths and NaN propagation against
bench/moe_check.py's fp64 decode.

usage: mxfp4-edge-scales.py SRC_DIR DST_DIR [--layer 1] [--nan]
"""
import argparse
import json
import os
import shutil
import struct


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--layer", type=int, default=1)
    ap.add_argument("--nan", action="store_true")
    a = ap.parse_args()
    if os.path.exists(a.dst):
        shutil.rmtree(a.dst)
    shutil.copytree(a.src, a.dst)
    cycle = [0x00, 0x01, 0x7F, 0x80, 0x81, 0x88]
    index = json.load(open(os.path.join(a.dst, "model.safetensors.index.json")))["weight_map"]
    prefix = "model.layers.%d.block_sparse_moe.experts." % a.layer
    names = sorted(k for k in index if k.startswith(prefix) and k.endswith("weight_scale"))
    if not names:
        raise SystemExit("no routed-expert scales under '%s'" % prefix)
    by_file = {}
    for n in names:
        by_file.setdefault(index[n], []).append(n)
    changed = 0
    for fname, tensors in by_file.items():
        path = os.path.join(a.dst, fname)
        with open(path, "r+b") as f:
            hlen = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(hlen))
            for n in tensors:
                t = header[n]
                assert t["dtype"] == "U8", n
                lo, hi = t["data_offsets"]
                f.seek(8 + hlen + lo)
                buf = bytearray(f.read(hi - lo))
                for i in range(0, len(buf), 5):
                    buf[i] = cycle[(i // 5) % len(cycle)]
                    changed += 1
                if a.nan and n == prefix + "0.w1.weight_scale":
                    buf[0] = 0xFF
                f.seek(8 + hlen + lo)
                f.write(buf)
    print("%s: %d scale bytes of %d tensors (layer %d) set to %s%s"
          % (a.dst, changed, len(names), a.layer, " ".join("%02x" % c for c in cycle),
             ", expert 0 w1 scale 0 to ff" if a.nan else ""))


if __name__ == "__main__":
    main()
