"""Overwrites element INDEX of tensor NAME in a safetensors checkpoint
directory with VALUE: 'nan' or 'inf' (in the tensor's float dtype) or a byte
in hex (u8 tensors, e.g. an MXFP4 scale 'ff').
usage: poison-tensor.py DIR NAME INDEX VALUE
"""
import struct
import sys

from safetensors_shard import open_tensor

d, name, index, value = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
f, n, header = open_tensor(d, name)
with f:
    t = header[name]
    size = {"BF16": 2, "F16": 2, "F32": 4, "U8": 1, "I8": 1}[t["dtype"]]
    if t["dtype"] == "BF16":
        raw = struct.pack("<f", float(value))[2:]
    elif t["dtype"] == "F32":
        raw = struct.pack("<f", float(value))
    else:
        raw = bytes([int(value, 16)])
    f.seek(8 + n + t["data_offsets"][0] + index * size)
    f.write(raw)
