"""Rewrites rows of the lm_head weight of a safetensors checkpoint directory
so that the logits tie or hold NaNs (greedy-argmax.test):
  tie     every row equals row 0: all logits of a position equal;
  tie2    every row equals row 0, rows 3 and 7 twice it: the maximum is a
          tie of 3 and 7 (x . w0 > 0) or of all the others (< 0);
  tiefar  as tie2 with the doubled rows far apart (rows // 2 + 1,
          rows - 7000 and rows - 1, for the GPU kernel's vector loads
          and the columns it reads one at a time past them);
  nan0    row 0 NaN: logit 0 is NaN everywhere;
  nanmid  rows 5 and 9 NaN, the others as they are.
usage: lm-head-rows.py DIR MODE
"""
import struct
import sys

from safetensors_shard import open_tensor

d, mode = sys.argv[1], sys.argv[2]
name = "lm_head.weight"
f, n, header = open_tensor(d, name)
with f:
    t = header[name]
    rows, cols = t["shape"]
    size = {"BF16": 2, "F16": 2, "F32": 4}[t["dtype"]]
    start = 8 + n + t["data_offsets"][0]
    f.seek(start)
    data = bytearray(f.read(rows * cols * size))
    row = lambda r: data[r * cols * size:(r + 1) * cols * size]

    def put(r, b):
        data[r * cols * size:(r + 1) * cols * size] = b

    def scaled(b, s):
        out = bytearray()
        for i in range(0, len(b), size):
            if size == 4:
                out += struct.pack("<f", struct.unpack("<f", b[i:i + 4])[0] * s)
            else:  # bf16: exact doubling through fp32
                v = struct.unpack("<f", b"\0\0" + b[i:i + 2])[0] * s
                out += struct.pack("<f", v)[2:]
        return bytes(out)

    nan = (struct.pack("<f", float("nan"))[2:] if size == 2 else struct.pack("<f", float("nan")))
    if mode in ("tie", "tie2", "tiefar"):
        r0 = bytes(row(0))
        for r in range(rows):
            put(r, r0)
        if mode == "tie2":
            for r in (3, 7):
                put(r, scaled(r0, 2.0))
        if mode == "tiefar":
            for r in (rows // 2 + 1, rows - 7000, rows - 1):
                put(r, scaled(r0, 2.0))
    elif mode == "nan0":
        put(0, nan * cols)
    elif mode == "nanmid":
        for r in (5, 9):
            put(r, nan * cols)
    else:
        sys.exit("unknown mode " + mode)
    f.seek(start)
    f.write(data)
