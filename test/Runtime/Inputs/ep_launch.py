"""Starts N processes of one command the way a launcher would, on loopback.

usage: ep_launch.py --ranks N --family torchrun|slurm|ompi|k3c-file
                    [--set R:VAR=VALUE ...] [--unset R:VAR ...] [--rank0-delay S]
                    [--only R] [--dir DIR] -- COMMAND...

Every rank gets its family's rank/world/local-rank variables and, except for
k3c-file (K3C_EP_ID_FILE=DIR/id), MASTER_ADDR=127.0.0.1 and a free
MASTER_PORT. Launcher variables inherited from the environment are removed
first (the test must not depend on running inside Slurm or torchrun).
--set/--unset change one rank's variables (R = all: every rank's); --rank0-delay starts rank 0 last,
after S seconds (the others must retry); --only R starts rank R alone.
Prints each rank's output, prefixed "[rank R] ", in rank order, then
"[rank R] exit CODE"; exits 1 when any rank failed.
"""
import argparse
import os
import socket
import subprocess
import sys
import time

FAMILIES = {
    "torchrun": ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
    "slurm": ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    "ompi": ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    "k3c-file": ("K3C_EP_RANK", "K3C_EP_WORLD", None),
}
SCRUB = [v for f in FAMILIES.values() for v in f if v] + [
    "MASTER_ADDR", "MASTER_PORT", "K3C_EP_ID_FILE", "K3C_EP_ADDR", "K3C_EP_PORT",
    "TORCHELASTIC_USE_AGENT_STORE", "CUDA_VISIBLE_DEVICES"]


def free_port():
    """A free port whose successor is free too (torchrun's agent-store case)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            if port >= 65535:
                continue
            try:
                with socket.socket() as t:
                    t.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    sys.exit("ep_launch.py: no two free consecutive ports")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--family", choices=sorted(FAMILIES), required=True)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--unset", action="append", default=[])
    ap.add_argument("--rank0-delay", type=float, default=0.0)
    ap.add_argument("--only", type=int, default=None)
    ap.add_argument("--dir", default=".")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    base = {k: v for k, v in os.environ.items() if k not in SCRUB}
    port = free_port()
    rank_var, world_var, local_var = FAMILIES[a.family]
    envs = []
    for r in range(a.ranks):
        env = dict(base)
        env[rank_var] = str(r)
        env[world_var] = str(a.ranks)
        if local_var:
            env[local_var] = str(r)
        if a.family == "k3c-file":
            env["K3C_EP_ID_FILE"] = os.path.join(a.dir, "id")
        else:
            env["MASTER_ADDR"] = "127.0.0.1"
            env["MASTER_PORT"] = str(port)
        envs.append(env)
    for s in a.set:
        r, kv = s.split(":", 1)
        k, v = kv.split("=", 1)
        for e in (envs if r == "all" else [envs[int(r)]]):
            e[k] = v
    for s in a.unset:
        r, k = s.split(":", 1)
        envs[int(r)].pop(k, None)
    ranks = [a.only] if a.only is not None else list(range(a.ranks))
    order = [r for r in ranks if r != 0] + [r for r in ranks if r == 0]
    procs = {}
    for r in order:
        if r == 0 and a.rank0_delay and len(order) > 1:
            time.sleep(a.rank0_delay)
        procs[r] = subprocess.Popen(cmd, env=envs[r], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
    failed = False
    for r in ranks:
        out, _ = procs[r].communicate(timeout=120)
        for line in out.splitlines():
            print("[rank %d] %s" % (r, line))
        print("[rank %d] exit %d" % (r, procs[r].returncode))
        failed |= procs[r].returncode != 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
