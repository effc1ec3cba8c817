#!/usr/bin/env python3
"""Instruction mix and warp-stall split of one kernel from an Nsight Compute
source page (`ncu -i R.ncu-rep --page source --csv --print-source sass`, as
bench/ncu-h200.sh and bench/moe-ab-h200.sh write them).

usage: ncu_mix.py SOURCE_CSV KERNEL_SUBSTRING
Prints the executed instructions by opcode (share of all) and the sampled
stall reasons (share of all samples), summed over the profiled kernels whose names contain
KERNEL_SUBSTRING.
"""
import csv,collections,sys
fn, want = sys.argv[1], sys.argv[2]
rows=[];kern=None;hdr=None
for r in csv.reader(open(fn)):
    if r and r[0]=='Kernel Name': kern=r[1]; continue
    if r and r[0]=='Address': hdr=r; continue
    if kern and want in kern and len(r)>5: rows.append(dict(zip(hdr,r)))
tot=collections.Counter(); stall=collections.Counter()
stallcols=[h for h in hdr if h.startswith('stall_') and 'Not' not in h]
for d in rows:
    src=d['Source'].strip().split()
    if not src: continue
    op=src[1] if src[0].startswith('@') else src[0]
    op=op.split('.')[0]
    n=int(d['Instructions Executed'] or 0)
    tot[op]+=n
    for s in stallcols: stall[s]+=int(d[s] or 0)
T=sum(tot.values())
print(want, 'total', T)
for op,n in tot.most_common(22): print(f"{op:10s} {n:12d} {100*n/T:5.1f}%")
S=sum(stall.values())
print(' '.join(f"{s[6:]}={100*n/S:.0f}%" for s,n in stall.most_common(8)))
