#!/usr/bin/env python3
"""Seeded mutations of k3 IR through k3-opt: a crash oracle for the dialect's
verifiers, the passes and the kernel lowering on malformed but parseable IR.

Takes the k3 functions of the given .mlir test inputs (split at `// -----`,
comment lines dropped), applies 1-3 mutations inside lines that hold a k3 op
(an integer or float literal replaced by an edge value, an element type
swapped, a tensor dimension changed, an attribute dropped, an enum attribute
swapped for another's), runs `k3-opt` with one of the passes or pipelines on
each mutant and fails if any run crashes: a signal, an exit status other
than 0 or 1, or LLVM's crash or assertion text. A rejected mutant (a
diagnostic, exit 1) is the expected outcome. Prints how many mutants were
accepted, rejected by the parser, and rejected after parsing.

usage: ir_mutate.py K3OPT N SEED FILE|DIR...   (exit 1 on the first crash; the
mutant is written to $TMPDIR/k3c-ir-mutant.crash.mlir)
"""
import os
import random
import re
import sys
import tempfile

from mutate_common import run

EDGE = ["0", "1", "-1", "2", "3", "7", "16", "17", "64", "65", "128", "4096", "-5",
        "1000000", "2147483648", "9223372036854775807", "0.0", "-0.0", "1.0e308"]
TYPES = ["bf16", "f32", "f16", "i32", "i8", "f64", "i64", "i1", "index"]
PIPES = [["--k3-pipeline"], ["--k3-decompose-layers"], ["--k3-kda-tiling-legality"],
         ["--k3-mxfp4-layout"], ["--k3-decompose-layers", "--k3-fuse-kernels"],
         ["--k3-split-l2norms"], ["--k3-pipeline", "--k3-lower-kernels=target=host"],
         ["--k3-lower-kernels=target=host"], ["--k3-lower-kernels=target=sm_90a"], []]


def chunks(paths):
    files = []
    for p in paths:  # a directory: its .mlir files
        files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".mlir")) \
            if os.path.isdir(p) else [p]
    out = []
    for f in files:
        for c in open(f).read().split("// -----"):
            lines = [l for l in c.splitlines() if not l.strip().startswith("//")]
            if any("k3." in l for l in lines):
                out.append("\n".join(lines))
    return out


def mutate(rng, text):
    lines = text.split("\n")
    ops = [i for i, l in enumerate(lines) if "k3." in l]
    for _ in range(rng.randint(1, 3)):
        i = rng.choice(ops)
        l = lines[i]
        r = rng.random()
        if r < 0.35:
            m = list(re.finditer(r"(?<![A-Za-z_%#\d])-?\d+(\.\d+)?(e[+-]?\d+)?", l))
            if m:
                m = rng.choice(m)
                l = l[:m.start()] + rng.choice(EDGE) + l[m.end():]
        elif r < 0.55:
            m = list(re.finditer(r"\b(bf16|f32|f16|i32|i8|i64)\b", l))
            if m:
                m = rng.choice(m)
                l = l[:m.start()] + rng.choice(TYPES) + l[m.end():]
        elif r < 0.75:
            m = list(re.finditer(r"(?<=[<x])(\?|\d+)(?=x)", l))
            if m:
                m = rng.choice(m)
                l = l[:m.start()] + rng.choice(["?", "0", "1", "3", "7", "128"]) + l[m.end():]
        elif r < 0.9:
            m = list(re.finditer(r"\b[a-z_]+ = [^,}]+,? ?", l))
            if m:
                m = rng.choice(m)
                l = l[:m.start()] + l[m.end():]
        else:
            m = list(re.finditer(r"#k3\.[a-z_]+<[a-z_]+>", text))
            here = list(re.finditer(r"#k3\.[a-z_]+<[a-z_]+>", l))
            if m and here:
                h = rng.choice(here)
                l = l[:h.start()] + rng.choice(m).group(0) + l[h.end():]
        lines[i] = l
    return "\n".join(lines)


def main():
    if len(sys.argv) < 5 or not all(a.lstrip("-").isdigit() for a in sys.argv[2:4]):
        sys.exit(__doc__[__doc__.index("usage:"):].splitlines()[0])
    k3opt, n, seed, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    rng = random.Random(seed)
    pool = chunks(files)
    counts = {"accepted": 0, "parser": 0, "after parsing": 0}
    for _ in range(n):
        mutant = mutate(rng, rng.choice(pool))
        pipe = rng.choice(PIPES)
        status, err, crashed = run([k3opt, "-", "-o", os.devnull] + pipe, input=mutant.encode())
        if crashed:
            path = os.path.join(tempfile.gettempdir(), "k3c-ir-mutant.crash.mlir")
            open(path, "w").write("// k3-opt - %s\n%s\n" % (" ".join(pipe), mutant))
            print("CRASH (exit %d) with %s: %s; mutant in %s"
                  % (status, " ".join(pipe) or "no pass", err.strip()[:400], path))
            sys.exit(1)
        if status == 0:
            counts["accepted"] += 1
        elif re.search(r"error: (expected|unexpected|custom op|invalid|use of undeclared|"
                       r"undefined|operation being parsed|integer constant out of range)", err):
            counts["parser"] += 1
        else:
            counts["after parsing"] += 1
    print("%d mutants, no crash: %d accepted, %d rejected by the parser, %d rejected after "
          "parsing (verifiers, passes, lowering)"
          % (n, counts["accepted"], counts["parser"], counts["after parsing"]))


if __name__ == "__main__":
    main()
