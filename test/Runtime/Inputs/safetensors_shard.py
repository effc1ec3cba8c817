"""The shard of a safetensors checkpoint directory that holds a tensor, for
the test scripts that edit checkpoints in place (poison-tensor.py,
edit-tensor-header.py)."""
import glob
import json
import struct
import sys


def open_tensor(d, name):
    """(file open r+b, header length, header) of the shard of directory `d`
    holding tensor `name`; exits with a message when no shard does."""
    for path in sorted(glob.glob(d + "/*.safetensors")):
        f = open(path, "r+b")
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        if name in header:
            return f, n, header
        f.close()
    sys.exit("no tensor " + name)
