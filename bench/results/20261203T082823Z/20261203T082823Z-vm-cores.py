import time,sys
def read():
    d={}
    for l in open('/proc/stat'):
        if l.startswith('cpu') and l[3]!=' ':
            f=l.split(); v=list(map(int,f[1:])); d[f[0]]=(sum(v), v[3]+v[4], v[4])
    return d
prev=read(); t0=time.time()
out=open(sys.argv[1],'w')
while time.time()-t0 < float(sys.argv[2]):
    time.sleep(5); cur=read()
    row=[f"{time.time()-t0:.0f}"]
    for c in sorted(cur):
        tot=cur[c][0]-prev[c][0]; idle=cur[c][1]-prev[c][1]; iow=cur[c][2]-prev[c][2]
        row.append(f"{c} busy {100*(tot-idle)/tot:.0f}% iowait {100*iow/tot:.0f}%")
    out.write("  ".join(row)+"\n"); out.flush(); prev=cur
