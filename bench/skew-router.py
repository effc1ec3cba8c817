#!/usr/bin/env python3
"""Skews the routing of a generated checkpoint in place, as
`k3-mkcheckpoint --router-skew S` would have (without regenerating the
experts): every `*e_score_correction_bias` tensor (F32 [E]) gets
S * ln(1 + e) / ln(E + 1) subtracted from expert e's entry, in float32.
Used by bench/ep-gpus.sh to make the skewed copy of a large checkpoint.

usage: python3 bench/skew-router.py DIR S
"""
import json
import math
import os
import struct
import sys
from array import array


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d, skew = sys.argv[1], float(sys.argv[2])
    if not 0 <= skew <= 10:
        sys.exit(f"skew-router: S must be in [0, 10], got {skew}")
    shards = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    patched = 0
    for name in shards:
        path = os.path.join(d, name)
        with open(path, "r+b") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            for tname, info in header.items():
                if tname == "__metadata__" or not tname.endswith("e_score_correction_bias"):
                    continue
                if info["dtype"] != "F32" or len(info["shape"]) != 1:
                    sys.exit(f"skew-router: {tname} is {info['dtype']} {info['shape']}, expected F32 [E]")
                begin, end = info["data_offsets"]
                E = info["shape"][0]
                f.seek(8 + n + begin)
                v = array("f")
                v.frombytes(f.read(end - begin))
                if len(v) != E:
                    sys.exit(f"skew-router: {tname} holds {len(v)} values, expected {E}")
                for e in range(E):
                    delta = array("f", [skew * math.log1p(e) / math.log(E + 1.0)])[0]
                    v[e] = array("f", [v[e] - delta])[0]
                f.seek(8 + n + begin)
                f.write(v.tobytes())
                patched += 1
    if patched == 0:
        sys.exit(f"skew-router: no e_score_correction_bias tensor in {d}")
    print(f"skew-router: skewed {patched} router biases in {d} by {skew}")


if __name__ == "__main__":
    main()
