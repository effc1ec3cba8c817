#!/usr/bin/env python3
"""Summarizes a device call's kbench.csv (bench/device-common.sh's `kbench`
appends each run's `k3-bench --csv` rows under a `# NAME` line) as the table
a decision needs: for each run with decode rows, the step at the smallest and
the largest batch (graph replay where there is one, else wall time), their
ratio (#13's bound: 1.5 at 128 against 1), the largest batch's step against
the base build's in the same round, and that batch's time by kernel family
(ms, launches of a family summed) for the families named. Runs with
`k3-bench --ablate` rows add a table per batch: each family's event-timed
time, its cost to the step (the step without it) and GB/s of its counted
bytes by both.

Run names are PREFIX-BUILD-ROUND (s65-slice-C2-1); the base build's run of
the same PREFIX and ROUND is the comparison. Prefill runs (a `ttft` row)
print their time to first token and their families at the prompt size.

usage: kbench_table.py KBENCH_CSV [--base slice-bf16]
                       [--families lm_head,mlp_in,...]
"""
import argparse
import collections
import sys

FAMILIES = "lm_head,mlp_in,mlp_down,kda_in,kda_chunk,kda_conv_gate,kda_out,mla_in,mla_attn,mla_out"


def parse(path):
    """{run name: [(phase, size, kernel, family, ms, gbs)]} in file order."""
    runs = collections.OrderedDict()
    name = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("# "):
                name = line[2:].strip()
                runs.setdefault(name, [])
                continue
            if name is None or line.startswith("phase,"):
                continue
            cols = line.split(",")
            if len(cols) < 6:
                continue
            try:
                gbs = float(cols[7]) if len(cols) > 7 else 0.0
                runs[name].append((cols[0], int(cols[1]), cols[2], cols[3], float(cols[5]), gbs))
            except ValueError:
                continue
    return runs


def split_name(name):
    """(prefix, build, round) of PREFIX-BUILD-ROUND, the build containing
    dashes; None where the name has no -ROUND."""
    head, _, rnd = name.rpartition("-")
    if not head:
        return None
    prefix, _, build = head.partition("-")
    return prefix, build, rnd


def base_key(parts, base):
    """(prefix, round, shape) of a run, and whether its build is `base`: a
    build's name past the base's number of dash-separated parts is its shape
    (s68-slice-CW-8k-1: shape 8k), compared with the base build of the same
    shape (s68-slice-bf16-8k-1)."""
    prefix, build, rnd = parts
    n = len(base.split("-"))
    comps = build.split("-")
    return (prefix, rnd, "-".join(comps[n:])), "-".join(comps[:n]) == base


def step_ms(rows, size):
    """The step at `size`: the graph replay's where measured, else wall."""
    got = {fam: ms for ph, s, kern, fam, ms, *_ in rows
           if ph == "decode" and s == size and kern == "TOTAL"}
    return got.get("graph") or got.get("step")


def families(rows, phase, size):
    out = collections.defaultdict(float)
    for ph, s, kern, fam, ms, *_ in rows:
        if ph == phase and s == size and kern != "TOTAL":
            out[fam] += ms
    return out


def ablation(name, rows):
    """The --ablate rows of a run, a table per batch size."""
    sizes = sorted({s for ph, s, *_ in rows if ph == "ablate"})
    for size in sizes:
        ev = families(rows, "decode", size)
        ev_bytes = collections.defaultdict(float)  # GB/s x ms = MB
        for ph, s, kern, fam, ms, gbs in rows:
            if ph == "decode" and s == size and kern != "TOTAL":
                ev_bytes[fam] += gbs * ms * 1e-3  # GB
        total = [ms for ph, s, kern, fam, ms, _ in rows
                 if ph == "ablate" and s == size and kern == "TOTAL"]
        print(f"{name}: ablation at {size} sequences, the step "
              f"{total[0]:.4f} ms" if total else f"{name}: ablation at {size} sequences")
        print("| family | event ms | cost ms | cost / event | GB/s (event) | GB/s (cost) |")
        print("|---|---|---|---|---|---|")
        for ph, s, kern, fam, ms, gbs in rows:
            if ph != "ablate" or s != size or kern == "TOTAL":
                continue
            e = ev.get(fam, 0.0)
            ge = ev_bytes[fam] / (e * 1e-3) if e > 0 else 0.0
            print(f"| {fam} | {e:.4f} | {ms:.4f} | {ms / e if e > 0 else 0:.2f} | "
                  f"{ge:.0f} | {gbs:.0f} |" if ms > 0 else
                  f"| {fam} | {e:.4f} | {ms:.4f} | - | {ge:.0f} | - |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--base", default="slice-bf16")
    ap.add_argument("--families", default=FAMILIES)
    a = ap.parse_args()
    fams = [f for f in a.families.split(",") if f]
    runs = parse(a.csv)
    if not runs:
        print(f"kbench_table: no runs in {a.csv}", file=sys.stderr)
        return 1
    decode, prefill = [], []
    for name, rows in runs.items():
        sizes = sorted({s for ph, s, kern, fam, ms, *_ in rows if ph == "decode" and kern == "TOTAL"})
        if sizes:
            decode.append((name, rows, sizes))
        if any(ph == "prefill" and fam == "ttft" for ph, s, kern, fam, ms, *_ in rows):
            prefill.append((name, rows))
    base_step = {}
    for name, rows, sizes in decode:
        parts = split_name(name)
        if parts:
            key, is_base = base_key(parts, a.base)
            if is_base:
                base_step[key] = (sizes[-1], step_ms(rows, sizes[-1]))
    if decode:
        hdr = ["run", "small", "step ms", "large", "step ms", "ratio", "vs base"] + fams
        print("| " + " | ".join(hdr) + " |")
        print("|" + "---|" * len(hdr))
        for name, rows, sizes in decode:
            lo, hi = sizes[0], sizes[-1]
            s_lo, s_hi = step_ms(rows, lo), step_ms(rows, hi)
            ratio = f"{s_hi / s_lo:.3f}" if s_lo and s_hi and hi != lo else "-"
            vs = "-"
            parts = split_name(name)
            key = base_key(parts, a.base)[0] if parts else None
            if key in base_step:
                bsize, bms = base_step[key]
                if bsize == hi and bms and s_hi:
                    vs = f"{(s_hi / bms - 1) * 100:+.2f} %"
            fam = families(rows, "decode", hi)
            cells = [name, str(lo), f"{s_lo:.4f}" if s_lo else "-", str(hi),
                     f"{s_hi:.4f}" if s_hi else "-", ratio, vs]
            cells += [f"{fam[f]:.4f}" if f in fam else "-" for f in fams]
            print("| " + " | ".join(cells) + " |")
    for name, rows in runs.items():
        if any(r[0] == "ablate" for r in rows):
            ablation(name, rows)
    for name, rows in prefill:
        for ph, s, kern, fam, ms, *_ in rows:
            if ph == "prefill" and fam == "ttft":
                f = families(rows, "prefill", s)
                top = ", ".join(f"{k} {v:.3f}" for k, v in sorted(f.items(), key=lambda kv: -kv[1])[:6])
                print(f"{name}: prefill {s} tokens, ttft {ms:.3f} ms; {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
