"""Checks the grid chain of every kernel in a PTX file (test/Lowering/grid-dependency.test).

Each .entry must execute griddepcontrol.wait before any global memory access
(ld/st.global, cp.async, atomics, reductions, prefetches) and then
griddepcontrol.launch_dependents (with --wait-only: none); prints one line
per kernel that does not, then the counts.

Kernels whose name contains an --own-wait substring may issue loads of
global memory before their wait, pinned ones only (ld.volatile.global: the
weights a kernel reads before KernelBuilder::gridWait) and no other access;
kernels whose name contains an --early substring must trigger their
dependents right after the wait even with --wait-only. Both must occur.
Kernels whose name contains a --trigger substring may trigger their
dependents anywhere after the wait (a conditional trigger: the norms ahead
of a one-token GEMV with K3C_GEMV_EARLY=1); one of them must.

Kernels whose name contains a --tiles substring may copy to shared memory
(cp.async, cp.async.bulk.tensor: the decode cores' cache tiles of positions
cached before the round, K3C_MLA_DECODE_EARLY_TILES; the staged q_abs's
W_UK, K3C_MLA_QABS_EARLY_W) and load (ld.global: the host's seq_lens and
cache_lens) before their wait, and no other access; one of them must copy. Kernels whose name contains an --each
substring must have at least two waits (one a branch), each followed at once
by launch_dependents.

usage: grid_chain.py FILE.ptx [--wait-only] [--own-wait SUB] [--early SUB] [--trigger SUB]
                              [--tiles SUB] [--each SUB]
"""
import re
import sys

args = sys.argv[2:]
wait_only = "--wait-only" in args
own = [args[i + 1] for i, a in enumerate(args) if a == "--own-wait"]
early = [args[i + 1] for i, a in enumerate(args) if a == "--early"]
trigger = [args[i + 1] for i, a in enumerate(args) if a == "--trigger"]
tiles = [args[i + 1] for i, a in enumerate(args) if a == "--tiles"]
each = [args[i + 1] for i, a in enumerate(args) if a == "--each"]
text = open(sys.argv[1]).read()
entries = re.split(r"\n\.visible \.entry ", text)[1:]
bad = seen_own = seen_early = seen_trigger = seen_tiles = seen_each = 0
ACCESS = r"\b(ld\.global|ld\.volatile\.global|st\.global|cp\.async|atom\.|red\.|prefetch)"
for e in entries:
    name = e.split("(")[0]
    body = e.split("{", 1)[1] if "{" in e else ""
    wait = body.find("griddepcontrol.wait;")
    launch = body.find("griddepcontrol.launch_dependents;")
    is_own = any(s in name for s in own)
    is_early = any(s in name for s in early)
    accesses = [m for m in re.finditer(ACCESS, body)]
    before = [m.group(0) for m in accesses if wait >= 0 and m.start() < wait]
    if is_own:
        seen_own += bool(before)
        ok_before = all(a == "ld.volatile.global" for a in before)
    elif any(s in name for s in tiles):
        seen_tiles += "cp.async" in before
        ok_before = all(a in ("cp.async", "ld.global") for a in before)
    else:
        ok_before = not before
    if any(s in name for s in each):
        waits = [m.end() for m in re.finditer(r"griddepcontrol\.wait;", body)]
        nexts = [body[w:].split(";", 1)[0].strip() for w in waits]
        if len(waits) >= 2 and all(n == "griddepcontrol.launch_dependents" for n in nexts):
            seen_each += 1
        else:
            bad += 1
            print("kernel %s: %d waits, followed by %s" % (name, len(waits), nexts))
    if is_early:
        seen_early += 1
        trigger_ok = launch > wait and not re.search(ACCESS, body[wait:launch])
    elif any(s in name for s in trigger) and launch >= 0:
        seen_trigger += 1
        trigger_ok = launch > wait
    else:
        trigger_ok = launch < 0 if wait_only else launch > wait
    if wait < 0 or not trigger_ok or not ok_before:
        bad += 1
        first = accesses[0].group(0) if accesses else None
        print("kernel %s: wait at %d, launch_dependents at %d, first global access %s"
              % (name, wait, launch, first))
if own and not seen_own:
    print("no kernel named by --own-wait loads before its wait")
if early and not seen_early:
    print("no kernel named by --early")
if tiles and not seen_tiles:
    print("no kernel named by --tiles copies before its wait")
if each and not seen_each:
    print("no kernel named by --each triggers after each of its waits")
if trigger and not seen_trigger:
    print("no kernel named by --trigger triggers its dependents")
print("kernels %d, without the chain first %d" % (len(entries), bad))
