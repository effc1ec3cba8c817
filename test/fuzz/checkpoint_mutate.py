#!/usr/bin/env python3
"""Seeded mutations of a checkpoint's safetensors headers through k3-run: a
crash oracle for the safetensors reader, the weight binding and the runtime
behind them.

Each mutant copies the checkpoint and rewrites one shard's JSON header (the
data stays): 1-2 tensors get another dtype (known or not), a dimension or
the whole shape set to an edge value, a data offset moved, or their entries
exchanged with another tensor's. k3-run then runs ARTIFACT (compiled from
the config alone, so no checkpoint hashes stand in front) with the mutant as
--checkpoint on a 3-token prompt. A run or an error with exit 1 is expected;
a signal, another exit status or LLVM's crash text fails (the checkpoint is
left in $TMPDIR/k3c-checkpoint-mutant.crash). Prints the counts.

usage: checkpoint_mutate.py K3RUN ARTIFACT CHECKPOINT N SEED
"""
import copy
import json
import os
import random
import shutil
import struct
import sys
import tempfile

from mutate_common import run_k3

EDGE = [0, 1, 2, 3, -1, 7, 8, 16, 64, 127, 128, 129, 512, 4096, 2**31, 2**32, 2**62, None,
        "F32", "BF16", "U8", "F16", "I32", "F8_E4M3", "x", [], [1], [0, 0], {}]


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def main():
    if len(sys.argv) < 6 or not all(a.lstrip("-").isdigit() for a in sys.argv[4:6]):
        sys.exit(__doc__[__doc__.index("usage:"):].splitlines()[0])
    tool, art, src, n, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    rng = random.Random(seed)
    shards = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
    heads = {s: read(os.path.join(src, s)) for s in shards}
    work = tempfile.mkdtemp(prefix="k3c-checkpoint-mutants-")
    dst = os.path.join(work, "ckpt")
    counts = [0, 0]  # ran, refused
    for _ in range(n):
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
        s = rng.choice(shards)
        h, data = copy.deepcopy(heads[s][0]), heads[s][1]
        names = [k for k in h if k != "__metadata__"]
        for _ in range(rng.randint(1, 2)):
            t = rng.choice(names)
            e = h[t]
            r = rng.random()
            if r < 0.3:
                e["dtype"] = rng.choice(EDGE)
            elif r < 0.6:
                if e["shape"] and rng.random() < 0.7:
                    e["shape"][rng.randrange(len(e["shape"]))] = rng.choice(EDGE)
                else:
                    e["shape"] = rng.choice(EDGE)
            elif r < 0.85:
                e["data_offsets"][rng.randrange(2)] += rng.choice([-1, 1, -2, 2, 64, -64, 4096])
            else:
                o = rng.choice(names)
                h[t], h[o] = h[o], h[t]
        hb = json.dumps(h).encode()
        hb += b" " * (-len(hb) % 8)
        open(os.path.join(dst, s), "wb").write(struct.pack("<Q", len(hb)) + hb + data)
        def keep():
            out = os.path.join(tempfile.gettempdir(), "k3c-checkpoint-mutant.crash")
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(dst, out)
            return "checkpoint in " + out

        run_k3(tool, art, dst, counts, keep)
    shutil.rmtree(work, ignore_errors=True)
    print("%d mutants, no crash: %d ran, %d refused with an error" % (n, counts[0], counts[1]))


if __name__ == "__main__":
    main()
