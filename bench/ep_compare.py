#!/usr/bin/env python3
"""Rank logits of an EP run (FILE.rank<r>.npy: each rank's contiguous group of
sequences, [steps, count, vocab]) joined along the batch against a run without
EP: max relative error and greedy tokens. usage: ep_compare.py PLAIN RANK0 RANK1|- LABEL"""
import sys

import numpy as np

plain, r0, r1, label = sys.argv[1:5]
a = np.load(plain)
parts = [np.load(r0)] + ([np.load(r1)] if r1 != "-" else [])
b = np.concatenate([p for p in parts if p.shape[1] > 0], axis=1)
if b.shape != a.shape:
    sys.exit("%s: shape %s vs %s FAIL" % (label, b.shape, a.shape))
e = np.abs(a - b).max() / np.abs(a).max()
same = bool((a.argmax(-1) == b.argmax(-1)).all())
print("%s: max rel %.3g vs the run without EP, greedy tokens equal %s -> %s"
      % (label, e, same, "PASS" if e < 1e-5 and same else "FAIL"))
