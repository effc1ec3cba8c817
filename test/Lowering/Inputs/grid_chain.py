"""Checks the grid chain of every kernel in a PTX file (test/Lowering/grid-dependency.test).

Each .entry must execute griddepcontrol.wait before any global memory access
(ld/st.global, cp.async, atomics, reductions, prefetches) and then
griddepcontrol.launch_dependents (with --wait-only: none); prints one line
per kernel that does not, then the counts.

usage: grid_chain.py FILE.ptx [--wait-only]
"""
import re
import sys

text = open(sys.argv[1]).read()
wait_only = "--wait-only" in sys.argv[2:]
entries = re.split(r"\n\.visible \.entry ", text)[1:]
bad = 0
for e in entries:
    name = e.split("(")[0]
    body = e.split("{", 1)[1] if "{" in e else ""
    wait = body.find("griddepcontrol.wait;")
    launch = body.find("griddepcontrol.launch_dependents;")
    mem = re.search(r"\b(ld\.global|ld\.volatile\.global|st\.global|cp\.async|atom\.|red\.|prefetch)", body)
    trigger_ok = launch < 0 if wait_only else launch > wait
    if wait < 0 or not trigger_ok or (mem and mem.start() < wait):
        bad += 1
        print("kernel %s: wait at %d, launch_dependents at %d, first global access %s"
              % (name, wait, launch, mem.group(0) if mem else None))
print("kernels %d, without the chain first %d" % (len(entries), bad))
