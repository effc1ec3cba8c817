#!/usr/bin/env python3
"""Seeded mutations of an artifact's manifest.json through k3-run: a crash
oracle for the runtime's manifest checks and everything behind them.

Each mutant copies the artifact, sets 1-2 leaves of manifest.json (at any
depth) to an edge value (0, ±1, sizes around powers of two, 2^31, 2^32, 2^40,
2^62, a fraction, null, a boolean, strings, empty lists / objects) or moves
an integer by a small step, rewrites manifest.sha256 to match (as a hostile
editor could), and runs `k3-run ARTIFACT --checkpoint CKPT --prompt-ids 1,2,3
--max-new-tokens 2` on the CPU. A run or an error with exit 1 is expected;
a signal, another exit status or LLVM's crash text fails (the manifest is
left in $TMPDIR/k3c-artifact-mutant.crash.json). Prints the counts.

usage: artifact_mutate.py K3RUN ARTIFACT CHECKPOINT N SEED
"""
import copy
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile

from mutate_common import leaves, run_k3, set_leaf

EDGE = [0, 1, 2, 3, -1, 7, 16, 17, 63, 64, 65, 127, 128, 129, 255, 4096, 65536, 2**31 - 1,
        2**31, 2**32, 2**40, 2**62, -2**31, 1.5, None, True, "", "x", "f32", "bf16", "i32",
        "seqs", "tokens", "context", "pages", [], {}]


def main():
    if len(sys.argv) < 6 or not all(a.lstrip("-").isdigit() for a in sys.argv[4:6]):
        sys.exit(__doc__[__doc__.index("usage:"):].splitlines()[0])
    tool, art, ckpt, n, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    rng = random.Random(seed)
    base = json.load(open(os.path.join(art, "manifest.json")))
    where = list(leaves(base))
    work = tempfile.mkdtemp(prefix="k3c-artifact-mutants-")
    dst = os.path.join(work, "art")
    counts = [0, 0]  # ran, refused
    for _ in range(n):
        m = copy.deepcopy(base)
        for _ in range(rng.randint(1, 2)):
            p = rng.choice(where)
            v = set_leaf(m, p, None)
            if isinstance(v, int) and not isinstance(v, bool) and rng.random() < 0.5:
                set_leaf(m, p, v + rng.choice([-1, 1, -2, 2, 64, -64]))
            else:
                set_leaf(m, p, rng.choice(EDGE))
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(art, dst)
        path = os.path.join(dst, "manifest.json")
        json.dump(m, open(path, "w"))
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        open(os.path.join(dst, "manifest.sha256"), "w").write(digest + "  manifest.json\n")
        def keep():
            out = os.path.join(tempfile.gettempdir(), "k3c-artifact-mutant.crash.json")
            json.dump(m, open(out, "w"), indent=1)
            return "manifest in " + out

        run_k3(tool, dst, ckpt, counts, keep)
    shutil.rmtree(work, ignore_errors=True)
    print("%d mutants, no crash: %d ran, %d refused with an error" % (n, counts[0], counts[1]))


if __name__ == "__main__":
    main()
