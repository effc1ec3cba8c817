"""Checks k3-run --interactive's turns against the reference executor
(test/Runtime/interactive.test): for each turn, k3-ref (f32) on the whole
conversation up to that turn's context must generate the turn's tokens.
usage: interactive_turns.py CHAT_OUTPUT CHECKPOINT K3_REF
"""
import re
import subprocess
import sys

out, ckpt, k3ref = sys.argv[1:4]
text = open(out, encoding="utf-8", errors="replace").read()
turns = [(int(m.group(1)), [int(t) for t in m.group(2).split()])
         for m in re.finditer(r"^turn \d+: .*\(context (\d+)\).*generated((?: \d+)+)$", text, re.M)]
convo = [int(t) for t in re.search(r"^conversation: \d+ tokens held:((?: \d+)*)$", text, re.M).group(1).split()]
assert turns, "no turns"
for i, (context, generated) in enumerate(turns):
    ids = ",".join(str(t) for t in convo[:context])
    ref = subprocess.run([k3ref, ckpt, "--prompt-ids", ids, "--max-new-tokens", str(len(generated)),
                          "--precision", "f32", "--quiet"], capture_output=True, text=True, check=True).stdout
    want = [int(t) for t in re.search(r"generated((?: \d+)+)", ref).group(1).split()]
    # k3-run stops at a stop token; the reference may go on past it.
    assert want[:len(generated)] == generated, (i + 1, generated, want)
    # The conversation holds the turn's answer (all but its last token).
    assert convo[context:context + len(generated) - 1] == generated[:-1], (i + 1, convo[context:])
    print("turn %d: %d context tokens, %d generated, as the reference" % (i + 1, context, len(generated)))
