#!/usr/bin/env python3
"""Seeded mutations of model configs through k3-compile: a crash oracle for
the config checks, the model builder, the pass pipeline and the deployment
plan on inconsistent or odd configs.

Each mutant sets 1-2 fields (at any depth) of one of the given config.json
files to an edge value (0, 1, odd and power-of-two sizes, -1, fractions,
null, booleans, strings, empty lists / objects) and runs
`k3-compile CONFIG --emit=fused` (builder + passes) and `k3-compile CONFIG
--plan --ep 2`. An accepted config or an error with exit 1 is expected; a
signal, another exit status or LLVM's crash text fails (the mutant is left
in $TMPDIR/k3c-config-mutant.crash.json). Prints the counts.

usage: config_mutate.py K3COMPILE N SEED CONFIG...
"""
import copy
import json
import os
import random
import sys
import tempfile

from mutate_common import leaves, run, set_leaf

EDGE = [0, 1, 2, 3, 7, 8, 16, 17, 31, 33, 64, 96, 100, 128, 255, 257, 4096, -1, 1.5, 0.0,
        1e-30, None, True, "x", [], {}]


def main():
    if len(sys.argv) < 5 or not all(a.lstrip("-").isdigit() for a in sys.argv[2:4]):
        sys.exit(__doc__[__doc__.index("usage:"):].splitlines()[0])
    tool, n, seed, configs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    rng = random.Random(seed)
    base = [json.load(open(c)) for c in configs]
    tmp = tempfile.mkdtemp(prefix="k3c-config-mutants-")
    path = os.path.join(tmp, "config.json")
    accepted = refused = 0
    for _ in range(n):
        c = copy.deepcopy(rng.choice(base))
        where = list(leaves(c))
        for _ in range(rng.randint(1, 2)):
            set_leaf(c, rng.choice(where), rng.choice(EDGE))
        json.dump(c, open(path, "w"))
        for args in (["--emit=fused", "-o", os.devnull], ["--plan", "--ep", "2"]):
            status, err, crashed = run([tool, path, "--quiet"] + args)
            if crashed:
                out = os.path.join(tempfile.gettempdir(), "k3c-config-mutant.crash.json")
                json.dump(c, open(out, "w"), indent=1)
                print("CRASH (exit %d) with %s: %s; mutant in %s"
                      % (status, " ".join(args), err.strip()[:400], out))
                sys.exit(1)
            if status == 0:
                accepted += 1
            else:
                refused += 1
    print("%d mutants, no crash: %d runs accepted, %d refused with an error" % (n, accepted, refused))


if __name__ == "__main__":
    main()
