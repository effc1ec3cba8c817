"""Sets every element of every F32 tensor whose name ends with SUFFIX in a
safetensors checkpoint directory to VALUE (e.g. each KDA layer's dt_bias to
20: the bounded gate lower_bound * sigmoid(exp(A) (z + dt_bias)) then sits at
its bound, g = -5 on every channel of every token).
usage: fill-tensors.py DIR SUFFIX VALUE
"""
import glob
import json
import struct
import sys

d, suffix, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
count = 0
for path in sorted(glob.glob(d + "/*.safetensors")):
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        for name, t in header.items():
            if name == "__metadata__" or not name.endswith(suffix):
                continue
            if t["dtype"] != "F32":
                sys.exit(name + ": only F32 tensors are filled, not " + t["dtype"])
            begin, end = t["data_offsets"]
            f.seek(8 + n + begin)
            f.write(struct.pack("<f", value) * ((end - begin) // 4))
            count += 1
if not count:
    sys.exit("no tensor ends with " + suffix)
print("filled %d tensors" % count)
