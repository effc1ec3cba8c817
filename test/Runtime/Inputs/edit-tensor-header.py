"""Rewrites one tensor's entry in a safetensors checkpoint directory's header
in place (same header length, padded with spaces; the data is unchanged):
'transpose' reverses its shape, 'dtype=X' relabels its dtype (same size).
usage: edit-tensor-header.py DIR NAME EDIT
"""
import json
import sys

from safetensors_shard import open_tensor

d, name, edit = sys.argv[1:4]
f, n, header = open_tensor(d, name)
with f:
    t = header[name]
    if edit == "transpose":
        t["shape"] = t["shape"][::-1]
    elif edit.startswith("dtype="):
        t["dtype"] = edit[len("dtype="):]
    else:
        sys.exit("unknown edit " + edit)
    raw = json.dumps(header, separators=(",", ":")).encode()
    if len(raw) > n:
        sys.exit("the edited header does not fit")
    f.seek(8)
    f.write(raw + b" " * (n - len(raw)))
