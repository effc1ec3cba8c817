"""Copies an artifact and applies one named hostile edit to its manifest.json
(test/Runtime/manifest.test; greedy-argmax.test's no-argmax is a valid one).
usage: edit_manifest.py SRC_ARTIFACT DST_DIR EDIT
"""
import hashlib
import json
import shutil
import sys

src, dst, edit = sys.argv[1:4]
shutil.copytree(src, dst)
path = dst + "/manifest.json"
m = json.load(open(path))
pre = m["entries"]["prefill"]
kda = next(k for k in m["kernels"] if k["family"] == "kda_chunk")
if edit == "version-float":
    m["format_version"] = 1.5
elif edit == "lib-outside":
    m["files"]["host_library"]["path"] = "../../kernels_host.so"
elif edit == "lib-absolute":
    m["files"]["host_library"]["path"] = "/etc/passwd"
elif edit == "ckpt-outside":
    m["checkpoint"]["sha256"]["../../etc/passwd"] = "0" * 64
elif edit == "input-index":
    pre["launches"][3]["inputs"][0] = 99999
elif edit == "no-returns":
    pre["returns"] = []
elif edit == "huge-capacity":
    m["capacity"]["max_tokens"] = 2 ** 61
elif edit == "reversed-launches":
    pre["launches"].reverse()
elif edit == "context":
    m["capacity"]["max_context"] *= 16
elif edit == "dynamic-from":
    kda["args"][0]["dynamic_from"] = []
elif edit == "alias":
    kda["result_aliases"][-1] = 99
elif edit == "duplicate-kernel":
    m["kernels"].append(dict(kda))
elif edit == "value-id":
    pre["values"][2]["id"] = 7
elif edit == "transposed":
    v = next(v for v in pre["values"] if v.get("kind") == "weight" and len(v["shape"]) == 2
             and v["shape"][0] != v["shape"][1] and v["dtype"] != "mxfp4")
    v["shape"] = v["shape"][::-1]
elif edit == "symbol":
    kda["host_symbol"] = "system"
elif edit == "swapped-symbol":
    other = next(k for k in m["kernels"] if k["family"] == "mlp_in")
    kda["host_symbol"], other["host_symbol"] = other["host_symbol"], kda["host_symbol"]
elif edit == "scratch-shape":
    mla = next(k for k in m["kernels"] if k["family"] == "mla_attn")
    a = next(a for a in mla["args"] if a["kind"] == "scratch" and -1 not in a["shape"])
    a["shape"][0] //= 2
elif edit == "device-only":
    mla = next(k for k in m["kernels"] if k["family"] == "mla_attn")
    for a in mla["args"]:
        a.pop("device_only", None)
elif edit == "stale-hash":
    m["capacity"]["max_seqs"] += 1
elif edit == "dtype":
    kda["args"][0]["dtype"] = "f128"
elif edit == "binding-transform":
    m["weights"][0]["transform"] = "transpose"
elif edit == "binding-shape":
    b = next(b for b in m["weights"] if b["transform"] == "convert" and len(b["shape"]) == 2
             and b["shape"][0] != b["shape"][1])
    b["sources"][0]["shapes"][0] = b["shape"][::-1]
elif edit == "binding-missing":
    b = next(b for b in m["weights"] if b["transform"] == "convert")
    m["weights"].remove(b)
elif edit == "binding-expert":
    b = next(b for b in m["weights"] if b["transform"] == "mxfp4_stack")
    b["sources"][0]["tensor"] = b["sources"][0]["tensor"].replace("{expert}", "0")
elif edit == "no-argmax":  # an artifact of a k3c before the argmax kernel (valid)
    m["kernels"] = [k for k in m["kernels"] if k["family"] != "argmax"]
elif edit == "pages-no-page":  # a paged artifact without its page size
    del m["capacity"]["cache_page"]
    del m["capacity"]["cache_pages"]
elif edit == "pages-table-width":  # a block table narrower than the context
    t = next(v for v in pre["values"] if v.get("name") == "block_table")
    t["shape"][1] -= 1
elif edit == "pages-pool-page":  # a pool whose pages differ from cache_page
    v = next(v for v in pre["values"] if v.get("dims", [""])[0] == "pages")
    v["shape"][1] *= 2
elif edit == "static-rows":  # an activation's token dimension made a static 0
    v = next(v for v in pre["values"] if v["kind"] == "activation" and v["shape"][0] == -1)
    v["shape"][0] = 0
elif edit == "ids-seqs":  # the token ids sized by sequences, not tokens
    for e in m["entries"].values():
        next(v for v in e["values"] if v.get("name") == "token_ids")["dims"] = ["seqs"]
elif edit == "rows-seqs":  # every activation's rows sized by sequences
    for e in m["entries"].values():
        for v in e["values"]:
            if v["kind"] == "activation" and v["shape"] and v["shape"][0] == -1:
                v["dims"] = ["seqs"] + [""] * (len(v["shape"]) - 1)
elif edit == "pages-huge":
    m["capacity"]["cache_pages"] = 2 ** 40
else:
    sys.exit("unknown edit " + edit)
json.dump(m, open(path, "w"))
# Schema edits get a matching manifest.sha256 (what a hostile user could
# write too), so the checks behind the hash are what each edit meets.
if edit != "stale-hash":
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    open(dst + "/manifest.sha256", "w").write(digest + "  manifest.json\n")
