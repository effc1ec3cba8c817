"""Shared pieces of the seeded mutation sweeps in test/fuzz/ (ir_mutate.py,
config_mutate.py, artifact_mutate.py, checkpoint_mutate.py): walking a JSON
document's leaves and running a tool under the crash oracle.
"""
import subprocess
import sys

# What a crash leaves on stderr besides a signal or an exit status > 1.
CRASH_TEXT = ("Stack dump", "PLEASE submit", "Assertion")


def leaves(o, p=()):
    """The paths (tuples of keys and indices) of a JSON document's leaves."""
    if isinstance(o, dict):
        for k, v in o.items():
            yield from leaves(v, p + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from leaves(v, p + (i,))
    else:
        yield p


def set_leaf(o, path, value):
    """Sets the leaf at `path` (from leaves()); returns its old value."""
    for k in path[:-1]:
        o = o[k]
    old, o[path[-1]] = o[path[-1]], value
    return old


def run(cmd, **kw):
    """Runs `cmd`; returns (exit status, stderr text, crashed): crashed is a
    signal, an exit status other than 0 (accepted) or 1 (refused with an
    error), or LLVM's crash or assertion text."""
    r = subprocess.run(cmd, capture_output=True, timeout=300, **kw)
    err = r.stderr.decode(errors="replace")
    return r.returncode, err, r.returncode not in (0, 1) or any(s in err for s in CRASH_TEXT)


def run_k3(tool, art, ckpt, counts, keep):
    """One mutant through `k3-run ART --checkpoint CKPT` (three prompt
    tokens, two new ones): counts[0] += 1 when it ran, counts[1] += 1 when
    it was refused with an error; on a crash, keep() saves the mutant and
    returns where, the crash is printed and the sweep exits 1."""
    status, err, crashed = run([tool, art, "--checkpoint", ckpt, "--prompt-ids", "1,2,3",
                                "--max-new-tokens", "2", "--quiet"])
    if crashed:
        print("CRASH (exit %d): %s; %s" % (status, err.strip()[-400:], keep()))
        sys.exit(1)
    counts[0 if status == 0 else 1] += 1
