#!/usr/bin/env python3
"""Instruction mix and warp-stall split of kernels in an Nsight Compute SASS
source export.

Reads NAME-source.csv as bench/ncu-h200.sh writes it (`ncu -i REP --page
source --csv --print-source sass`: one block per kernel, a "Kernel Name"
line, then a header line starting with "Address"; launches of one kernel
are summed). For every kernel whose name matches KERNEL_REGEX (a plain
substring works) it prints the executed warp instructions by opcode (the
opcode without its modifiers and predicate), their share, and the
warp-state samples on them, then the sampled stall reasons; with --loop, the same for the hottest
straight-line region only (the instructions executed exactly as often as
the most executed one: a kernel's main loop body), with its length and its
instructions per HMMA/HGMMA. With --dump, that region's SASS.

usage: ncu_mix.py SOURCE_CSV [KERNEL_REGEX] [--top N] [--loop] [--dump]
"""
import argparse
import collections
import csv
import re
import sys


def kernels(path):
    name, header = None, None
    out = collections.OrderedDict()
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if len(row) >= 2 and row[0] == "Kernel Name":
                name, header = row[1], None
                out.setdefault(name, [])
            elif row and row[0] == "Address":
                header = row
            elif name and header and len(row) == len(header):
                out[name].append(dict(zip(header, row)))
    return out


def opcode(source):
    parts = source.split()
    if not parts:
        return ""
    op = parts[1] if parts[0].startswith("@") and len(parts) > 1 else parts[0]
    return op.split(".")[0]


def count(field):
    try:
        return int(field.replace(",", "") or 0)
    except ValueError:
        return 0


def mix(rows, top):
    ops, samples = collections.Counter(), collections.Counter()
    for r in rows:
        op = opcode(r["Source"])
        ops[op] += count(r["Instructions Executed"])
        samples[op] += count(r["Warp Stall Sampling (All Samples)"])
    total, stotal = sum(ops.values()) or 1, sum(samples.values()) or 1
    print(f"  {'opcode':10s} {'warp insts':>14s} {'share':>6s} {'samples':>7s}")
    for op, n in ops.most_common(top):
        print(f"  {op:10s} {n:14d} {100 * n / total:5.1f}% {100 * samples[op] / stotal:6.1f}%")
    stalls = collections.Counter()
    for r in rows:
        for col, v in r.items():
            if col.startswith("stall_") and "Not" not in col:
                stalls[col[len("stall_"):]] += count(v)
    st = sum(stalls.values()) or 1
    print("  stalls: " + " ".join(f"{k}={100 * n / st:.0f}%" for k, n in stalls.most_common(8)))
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source_csv")
    ap.add_argument("kernel_regex", nargs="?", default=".")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--loop", action="store_true")
    ap.add_argument("--dump", action="store_true")
    a = ap.parse_args()
    found = False
    for name, rows in kernels(a.source_csv).items():
        if not re.search(a.kernel_regex, name):
            continue
        found = True
        total = sum(count(r["Instructions Executed"]) for r in rows)
        print(f"{name}: {len(rows)} SASS instructions, {total} warp instructions executed")
        if not a.loop:
            mix(rows, a.top)
            continue
        hot = max(count(r["Instructions Executed"]) for r in rows)
        body = [r for r in rows if count(r["Instructions Executed"]) == hot]
        print(f" hottest region: {len(body)} instructions, each executed {hot} times "
              f"({100 * hot * len(body) / (total or 1):.1f}% of the kernel's)")
        ops = mix(body, a.top)
        mma = ops["HMMA"] + ops["HGMMA"]
        if mma:
            print(f"  {sum(ops.values()) / mma:.1f} instructions per HMMA/HGMMA")
        if a.dump:
            for r in body:
                print(f"    {count(r['Warp Stall Sampling (All Samples)']):7d}  {r['Source']}")
    if not found:
        sys.exit(f"ncu_mix.py: no kernel matches '{a.kernel_regex}' in {a.source_csv}")


if __name__ == "__main__":
    main()
