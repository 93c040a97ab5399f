#!/usr/bin/env python3
"""Replay the Kestrel benchmark's memory accesses through a model of one Zen 5 core's L1d.

perf/results/kestrel.md, round 10: how many D1 misses a packet the bench's 900 keys (and
8 UEs, 72 keys) cost with 64-byte hot buckets, 32-byte ones, and the plain CMS's 4-byte
counters. The samples, seeds and bucket indices are perf/benches/kestrel.rs's and
dataplane/src/telemetry/kestrel/layout.rs's (splitmix64, d = 3, w = 512, 16 sketches); the
cache is 48 KiB, 12-way, 64-byte lines, LRU, as valgrind's `--D1=49152,12,64`. Each packet
reads its 40-byte sample, then one bucket per row; small hot state (bin tables, PM
counters, the index array) is left out. It reproduces callgrind's counts within 3 %
(CMS 2.19 against 2.20, Kestrel 3.20 against 3.30).

Run: python3 perf/scripts/kestrel_cache_sim.py
"""

M=(1<<64)-1
def mix(x):
    z=(x+0x9e3779b97f4a7c15)&M
    z=((z^(z>>30))*0xbf58476d1ce4e5b9)&M
    z=((z^(z>>27))*0x94d049bb133111eb)&M
    return z^(z>>31)
seeds=[mix(q^0x6b657374_72656c00) for q in range(8)]
def samples(ues):
    x=42; out=[]
    for _ in range(4096):
        x=mix(x); ue=x%ues; qfi=(x>>8)%9+1; d=(x>>24)&1; qid=qfi%8
        out.append((d,qid,0x1000+ue,qfi))
    return out
class Cache:
    def __init__(s,size=49152,ways=12,line=64):
        s.sets=size//line//ways; s.ways=ways; s.c=[[] for _ in range(s.sets)]; s.miss=0; s.acc=0
    def access(s,addr):
        l=addr>>6; st=s.c[l%s.sets]; s.acc+=1
        if l in st: st.remove(l); st.append(l)
        else:
            s.miss+=1; st.append(l)
            if len(st)>s.ways: st.pop(0)
def run(bsize,ues,cms=False):
    ss=samples(ues); c=Cache()
    SBASE=1<<32; HBASE=1<<40
    for it in range(4):
        if it==2: c.miss=0; c.acc=0
        for k,(d,qid,teid,qfi) in enumerate(ss):
            a=SBASE+k*40
            c.access(a); c.access(a+39)
            h=mix(seeds[qid]^((teid<<8)|qfi)); base=(d*8+qid)*1536
            for r in range(3):
                i=base+r*512+((h>>(9*r))&511)
                c.access(HBASE+i*bsize)
    return c.miss/(2*4096)
for name,b in [('cms 4B',4),('kestrel 64B',64),('kestrel 32B',32)]:
    print(name, '900 keys D1 misses/packet %.3f'%run(b,100), ' 72 keys %.3f'%run(b,8))
