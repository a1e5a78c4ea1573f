#!/usr/bin/env python3
"""loadgen against wrk: loader efficiency, agreement on a server-bound target, and loadgen's memory.

Three questions, each loader pinned to --loader-cores (default core 1) and the server to
--server-cores (default core 0), as DESIGN.md's "Measurement rules" ask:

  A. Efficiency. flight-rs bare (FLIGHT_MIDDLEWARE=bare, one worker) serves GET /api/hello; wrk and
     loadgen run alternately (interleaved rounds, order rotated) with the same threads, connections
     and duration, and no warmup of their own. Each loader's CPU time is its own process's
     ru_utime + ru_stime from os.wait4 (counted the same way for both tools); the figure is
     completed requests per loader CPU-second. Target: loadgen >= 1.3 x wrk.
  B. Agreement. The Node 22 peer (one process, pinned to the server core) is the bottleneck; wrk
     and loadgen alternate at the same -c and their req/s should agree within 5%.
  C. Memory. One long loadgen run at full rate against flight-rs bare, VmRSS sampled every second:
     first/last/max and the least-squares slope (flat means histograms, not stored samples).

Every run gets a fresh server, warmed by a separate (discarded) run of the same loader, so the
measured loader process always starts cold against a warm server. A run with any non-2xx response,
socket error or failed connection is void (with the reason recorded).

Run it through bench/loadgen-vs-wrk.sh (which runs bench/setup.sh first), or directly:

    python3 bench/loadgen_vs_wrk.py --rounds 5 --duration 10s --connections 100

Python 3.11 standard library only. Shares the process, /proc and wrk helpers of flight_hello.py.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import select
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.dont_write_bytecode = True  # no bench/__pycache__ from importing the sibling module
import flight_hello as fh  # noqa: E402  (same directory; its main() only runs as a script)

REPO = fh.REPO
HELLO_PATH = fh.HELLO_PATH
EXPECTED_BODY = fh.EXPECTED_BODY

LOADERS = ["wrk", "loadgen"]
LOADER_SLACK_S = 30.0  # on top of a loader's own -d: connect, report, exit
KILL_WAIT_S = 5.0  # after SIGKILL, how long we wait for the kernel to let a loader go
SETTLE_S = 0.5
EFFICIENCY_TARGET = 1.3  # loadgen requests per CPU-second over wrk's (the target)
AGREEMENT_TARGET_PCT = 5.0  # |loadgen - wrk| / wrk on a server-bound target
WRK_EARLIER_PER_CPU_S = 197_000  # wrk at -t1 -c100 measured earlier on this machine (for the report only)
FLAT_KIB_PER_MIN = 1024.0  # steady RSS slope below this counts as flat (stored samples grow ~MiB/s)


def default_loadgen_bin() -> Path:
    return fh.default_flight_bin().with_name("loadgen")


# --------------------------------------------------------------------------------------
# Running one loader: pinned, output to files, CPU from wait4, every wait bounded
# --------------------------------------------------------------------------------------


class Loader:
    """One loader process. Reaped with os.wait4 so its rusage is the loader's own CPU time."""

    live: list["Loader"] = []  # started and not yet reaped, for cleanup on Ctrl-C and errors

    def __init__(self, argv: list[str], out_path: Path, err_path: Path):
        self.argv = argv
        self.out = open(out_path, "wb")
        self.err = open(err_path, "wb")
        self.t0 = time.perf_counter()
        # taskset execs the loader, so proc.pid is the loader itself. A new session keeps a terminal
        # Ctrl-C away from it; we stop it ourselves.
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
                                     cwd=REPO, start_new_session=True)
        Loader.live.append(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _reap(self, block: bool):
        """wait4 the loader; None while it still runs. Records the exit code on the Popen object so
        subprocess never waits for it again."""
        pid, status, ru = os.wait4(self.pid, 0 if block else os.WNOHANG)
        if pid == 0:
            return None
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.wall_s = time.perf_counter() - self.t0
        self.out.close()
        self.err.close()
        if self in Loader.live:
            Loader.live.remove(self)
        return ru

    def wait(self, timeout: float, tick=None, tick_s: float = 1.0) -> dict:
        """Wait for exit (at most timeout s, then SIGKILL); call tick(self, seconds since start) every
        tick_s meanwhile. Sleeps in poll() on a pidfd, so the harness takes no CPU from the loader's core."""
        deadline = time.perf_counter() + timeout
        next_tick = self.t0 + tick_s
        ru = None
        try:
            fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            fd = None  # no pidfd (old kernel): poll wait4 every 20 ms instead
        try:
            poller = select.poll() if fd is not None else None
            if poller is not None:
                poller.register(fd, select.POLLIN)
            while ru is None:
                now = time.perf_counter()
                if now >= deadline:
                    break
                wake = min(deadline, next_tick) if tick else deadline
                if poller is not None:
                    if poller.poll(max(0.0, wake - now) * 1000):
                        ru = self._reap(block=True)  # readable pidfd: exited, returns at once
                        break
                else:
                    ru = self._reap(block=False)
                    if ru is None:
                        time.sleep(min(0.02, max(0.0, wake - now)))
                if ru is None and tick and time.perf_counter() >= next_tick:
                    tick(self, time.perf_counter() - self.t0)
                    next_tick += tick_s
        finally:
            if fd is not None:
                os.close(fd)
        timed_out = ru is None
        if timed_out:
            ru = self.kill()
        return {
            "returncode": self.proc.returncode,
            "timed_out": timed_out,
            "wall_s": getattr(self, "wall_s", time.perf_counter() - self.t0),
            "cpu_user_s": ru.ru_utime if ru else None,
            "cpu_sys_s": ru.ru_stime if ru else None,
            "cpu_s": ru.ru_utime + ru.ru_stime if ru else None,
        }

    def kill(self):
        """SIGKILL our loader (not yet reaped, so the pid is still ours) and reap it, bounded; its rusage."""
        if self.proc.returncode is not None:
            return None
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.perf_counter() + KILL_WAIT_S
        while time.perf_counter() < deadline:
            ru = self._reap(block=False)
            if ru is not None:
                return ru
            time.sleep(0.01)
        print(f"warning: loader pid {self.pid} survived SIGKILL", file=sys.stderr)
        return None

    @classmethod
    def kill_all(cls) -> None:
        for ld in list(cls.live):
            try:
                ld.kill()
            except Exception as e:  # keep cleaning up the rest
                print(f"warning: stopping loader pid {ld.pid}: {e}", file=sys.stderr)


def loader_argv(tool: str, args, port: int, duration: str, json_path: Path, check: bool = False) -> list[str]:
    url = f"http://127.0.0.1:{port}{HELLO_PATH}"
    common = ["-t", str(args.threads), "-c", str(args.connections), "-d", duration, "--timeout", "2s"]
    if tool == "wrk":
        return ["taskset", "-c", args.loader_cores, "wrk", *common, "--latency", url]
    argv = ["taskset", "-c", args.loader_cores, str(args.loadgen_bin), *common, "--warmup", "0s",
            "--pin", args.loader_cores, "--no-progress", "--json", str(json_path)]
    if check:
        # Only in the check: every response must be the hello contract (assertions cost CPU, so the
        # timed runs leave them out and rely on status counts and errors, as wrk does).
        argv += ["--expect-status", "200", "--expect-body", EXPECTED_BODY.decode()]
    return [*argv, url]


def strip_histograms(obj):
    """The report without its base64 histograms (they are large and we keep the percentiles)."""
    obj = copy.deepcopy(obj)

    def walk(o):
        if isinstance(o, dict):
            o.pop("histogram", None)
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(obj)
    return obj


def run_loader(tool: str, args, port: int, duration: str, logdir: Path, tag: str, check: bool = False) -> dict:
    """One loader process; its figures, its own CPU time, its RSS once a second and why it is void (if it is)."""
    json_path = logdir / f"{tag}-{tool}.json"
    json_path.unlink(missing_ok=True)
    argv = loader_argv(tool, args, port, duration, json_path, check)
    samples: list[dict] = []

    def sample_rss(loader: Loader, t: float) -> None:
        # One /proc read a second from the loader core: the same tiny cost for both tools.
        v = rss_kib(loader.pid)
        if v is not None:
            samples.append({"t_s": round(t, 3), "rss_kib": v[0], "hwm_kib": v[1]})

    ld = Loader(argv, logdir / f"{tag}-{tool}.out", logdir / f"{tag}-{tool}.err")
    proc = ld.wait(fh.parse_duration(duration) + LOADER_SLACK_S, tick=sample_rss)
    # Not wait4's ru_maxrss: that peak carries over from the forked Python harness (about 20 MiB).
    proc["rss_samples"] = samples
    proc["peak_rss_kib"] = max((x["hwm_kib"] for x in samples), default=None)
    stdout = (logdir / f"{tag}-{tool}.out").read_text(errors="replace")
    stderr = (logdir / f"{tag}-{tool}.err").read_text(errors="replace")
    res: dict = {"tool": tool, "command": shlex.join(argv), **proc, "stdout": stdout}
    if stderr.strip():
        res["stderr"] = stderr[-4000:]
    reasons = []
    if proc["timed_out"]:
        reasons.append(f"{tool} still running after -d + {LOADER_SLACK_S:.0f}s; killed")
    elif proc["returncode"] != 0:
        reasons.append(f"{tool} exited {proc['returncode']}: {(stderr.strip() or stdout.strip())[-300:]}")
    try:
        if tool == "wrk":
            w = fh.parse_wrk(stdout)
            res.update(requests=w["requests"], req_per_s=w["req_per_s"], p50_us=w["p50_us"], p99_us=w["p99_us"],
                       measured_s=w["wrk_duration_s"], socket_errors=w["socket_errors"],
                       non_2xx_3xx=w["non_2xx_3xx"])
            if w["non_2xx_3xx"]:
                reasons.append(f"{w['non_2xx_3xx']} non-2xx/3xx responses")
            errs = {k: v for k, v in w["socket_errors"].items() if v}
            if errs:
                reasons.append("socket errors " + ", ".join(f"{k} {v}" for k, v in errs.items()))
        else:
            rep = json.loads(json_path.read_text())
            res["report"] = strip_histograms(rep)
            lat = rep["latency"]
            res.update(requests=int(rep["responses"]), req_per_s=float(rep["req_per_s"]),
                       p50_us=lat["p50_us"], p99_us=lat["p99_us"], max_us=lat.get("max_us"),
                       measured_s=rep.get("duration_s"), socket_errors=rep["errors"],
                       non_2xx_3xx=int(rep["non_2xx_3xx"]),
                       self_cpu_us=rep.get("cpu", {}).get("total_us"),
                       self_responses_per_cpu_s=rep.get("cpu", {}).get("responses_per_cpu_s"),
                       self_saturated=rep.get("cpu", {}).get("saturated"))
            if res["non_2xx_3xx"]:
                reasons.append(f"{res['non_2xx_3xx']} non-2xx/3xx responses")
            other = {c: n for c, n in (rep.get("status") or {}).items() if not 200 <= int(c) < 300 and n}
            if other:
                reasons.append("non-2xx statuses " + ", ".join(f"{c}: {n}" for c, n in other.items()))
            errs = {k: v for k, v in rep["errors"].items() if v}
            if errs:
                reasons.append("errors " + ", ".join(f"{k} {v}" for k, v in errs.items()))
            conns = rep["connections"]
            if conns.get("failed") or conns.get("established", 0) < conns.get("asked", 0):
                reasons.append(f"connections asked {conns.get('asked')}, established {conns.get('established')}, "
                               f"failed {conns.get('failed')}")
        if not res["requests"]:
            reasons.append("no requests completed")
        res["requests_per_cpu_s"] = res["requests"] / proc["cpu_s"] if proc["cpu_s"] > 0 else None
    except (OSError, ValueError, KeyError, TypeError) as e:  # missing report, missing line or field
        reasons.append(f"unreadable {tool} output: {type(e).__name__}: {e}")
    res["void"] = bool(reasons)
    res["void_reason"] = "; ".join(reasons) or None
    return res


# --------------------------------------------------------------------------------------
# Phases
# --------------------------------------------------------------------------------------


def start_server(rt: fh.Runtime, args, logdir: Path) -> fh.Server:
    if not rt.binary().exists():
        raise fh.Abort(f"{rt.name}: {rt.binary()} not found; run bench/setup.sh")
    srv = fh.Server(rt, args.server_cores, logdir)
    try:
        srv.wait_ready()
        time.sleep(SETTLE_S)
    except BaseException:
        srv.stop()
        raise
    return srv


def check(rt: fh.Runtime, loaders: list[str], args, logdir: Path) -> dict:
    """The server answers the hello contract, and every loader sees only 2xx and no errors against it
    (loadgen also asserts status and body on every response). Raises Abort otherwise."""
    srv = start_server(rt, args, logdir)
    try:
        status, headers, body = fh.http_get(srv.port, HELLO_PATH, timeout=5.0)
        if status != 200 or body != EXPECTED_BODY:
            raise fh.Abort(f"{rt.name}: GET {HELLO_PATH} gave {status} {body!r} (want 200 {EXPECTED_BODY!r})")
        out = {"status": status, "body": body.decode(), "content_type": headers.get("content-type"), "loaders": {}}
        for tool in loaders:
            r = run_loader(tool, args, srv.port, args.check_duration, logdir, f"check-{rt.name}", check=True)
            out["loaders"][tool] = {k: r.get(k) for k in ("command", "requests", "non_2xx_3xx", "socket_errors",
                                                          "void_reason")}
            if r["void"]:
                raise fh.Abort(f"check {tool} against {rt.name}: {r['void_reason']}")
        if srv.proc.poll() is not None:
            raise fh.Abort(f"{rt.name}: exited with code {srv.proc.returncode} during the check")
        return out
    except (OSError, ValueError) as e:
        raise fh.Abort(f"{rt.name}: GET {HELLO_PATH} failed: {e}") from e
    finally:
        srv.stop()


def measure(part: str, rt: fh.Runtime, tool: str, args, logdir: Path, duration: str, tag: str) -> dict:
    """Fresh server; a discarded warmup by the same loader (separate process); then one measured run of
    the loader with the server's and both cores' CPU around it."""
    run: dict = {"part": part, "server": rt.name, "tool": tool}
    try:
        srv = start_server(rt, args, logdir)
    except fh.Abort as e:
        return {**run, "void": True, "void_reason": str(e)}
    try:
        if fh.parse_duration(args.server_warmup) > 0:
            warm = run_loader(tool, args, srv.port, args.server_warmup, logdir, f"{tag}-warm")
            run["server_warmup"] = {k: warm.get(k) for k in ("requests", "req_per_s", "non_2xx_3xx",
                                                             "socket_errors", "void_reason")}
        server_cores, loader_cores = fh.parse_cores(args.server_cores), fh.parse_cores(args.loader_cores)
        s0, l0 = fh.cores_ticks(server_cores), fh.cores_ticks(loader_cores)
        u0, k0, _ = fh.tree_cpu_us(srv.pid)
        res = run_loader(tool, args, srv.port, duration, logdir, tag)
        u1, k1, _ = fh.tree_cpu_us(srv.pid)
        s1, l1 = fh.cores_ticks(server_cores), fh.cores_ticks(loader_cores)
        run.update(res)
        wall = res["wall_s"]
        run["server_cpu_s"] = ((u1 + k1) - (u0 + k0)) / 1e6
        run["server_busy_pct"] = 100.0 * run["server_cpu_s"] / wall / len(server_cores)
        run["loader_busy_pct"] = 100.0 * (res["cpu_s"] or 0.0) / wall / len(loader_cores)

        def idle_pct(a, b):
            return 100.0 * (b["idle"] - a["idle"]) / max(1, b["total"] - a["total"])
        run["server_cores_idle_pct"] = idle_pct(s0, s1)
        run["loader_cores_idle_pct"] = idle_pct(l0, l1)
        # Busy time on those cores that was neither ours nor idle: other processes, steal.
        run["server_cores_other_pct"] = max(0.0, 100.0 - run["server_cores_idle_pct"] - run["server_busy_pct"])
        run["loader_cores_other_pct"] = max(0.0, 100.0 - run["loader_cores_idle_pct"] - run["loader_busy_pct"])
        run["contended"] = run["server_cores_other_pct"] >= 10.0 or run["loader_cores_other_pct"] >= 10.0
        reasons = [res["void_reason"]] if res["void_reason"] else []
        if srv.proc.poll() is not None:
            reasons.append(f"server exited with code {srv.proc.returncode} during the run")
        run["void"], run["void_reason"] = bool(reasons), "; ".join(reasons) or None
    except OSError as e:  # the loader could not be started at all
        run["void"], run["void_reason"] = True, f"{type(e).__name__}: {e}"
    finally:
        srv.stop()
    return run


def rss_kib(pid: int) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) in KiB: now, and the peak since exec. None once gone or a zombie."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if line.startswith(("VmRSS:", "VmHWM:")))
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
    except (FileNotFoundError, ProcessLookupError, KeyError, ValueError):
        return None


def slope_per_min(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, KiB) points, in KiB per minute."""
    if len(points) < 2:
        return None
    mt = statistics.fmean(t for t, _ in points)
    mv = statistics.fmean(v for _, v in points)
    den = sum((t - mt) ** 2 for t, _ in points)
    if den == 0:
        return None
    return 60.0 * sum((t - mt) * (v - mv) for t, v in points) / den


def measure_memory(rt: fh.Runtime, args, logdir: Path) -> dict:
    """One long loadgen run; its VmRSS once a second, first/last/max and the least-squares slope."""
    run = measure("C", rt, "loadgen", args, logdir, args.memory_duration, "memory")
    samples = [(x["t_s"], x["rss_kib"]) for x in run.get("rss_samples") or []]
    if samples:
        vals = [v for _, v in samples]
        duration = fh.parse_duration(args.memory_duration)
        # Steady state: skip the first quarter (at most 5 s) of connect and first-touch allocation.
        skip = min(5.0, duration / 4)
        steady = [(t, v) for t, v in samples if t >= skip]
        steady_slope = slope_per_min(steady)
        run["rss"] = {
            "first_kib": vals[0], "last_kib": vals[-1], "max_kib": max(vals), "min_kib": min(vals),
            "n": len(vals), "slope_kib_per_min": slope_per_min(samples),
            "steady_from_s": skip, "steady_slope_kib_per_min": steady_slope,
            "flat": steady_slope is not None and abs(steady_slope) < FLAT_KIB_PER_MIN,
        }
    else:
        run["rss"] = None
    return run


# --------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------


def spread(values) -> dict | None:
    return fh.spread([v for v in values if v is not None])


def summarize_part(runs: list[dict], part: str, loaders: list[str]) -> dict:
    out = {}
    for tool in loaders:
        ok = [r for r in runs if r["part"] == part and r["tool"] == tool and not r["void"]]
        out[tool] = {
            "valid_runs": len(ok),
            "void_runs": sum(1 for r in runs if r["part"] == part and r["tool"] == tool and r["void"]),
            "requests_per_cpu_s": spread(r.get("requests_per_cpu_s") for r in ok),
            "req_per_s": spread(r.get("req_per_s") for r in ok),
            "loader_cpu_s": spread(r.get("cpu_s") for r in ok),
            "loader_busy_pct": spread(r.get("loader_busy_pct") for r in ok),
            "server_busy_pct": spread(r.get("server_busy_pct") for r in ok),
            "p50_us": spread(r.get("p50_us") for r in ok),
            "p99_us": spread(r.get("p99_us") for r in ok),
            "peak_rss_kib": spread(r.get("peak_rss_kib") for r in ok),
            "server_cores_idle_pct": spread(r.get("server_cores_idle_pct") for r in ok),
            "server_cores_other_pct": spread(r.get("server_cores_other_pct") for r in ok),
            "loader_cores_other_pct": spread(r.get("loader_cores_other_pct") for r in ok),
            "self_responses_per_cpu_s": spread(r.get("self_responses_per_cpu_s") for r in ok),
            "contended": sum(r["contended"] for r in ok) * 2 > len(ok) > 0,
        }
    return out


def per_round(runs: list[dict], part: str, metric: str, f) -> list[float]:
    vals = []
    for rd in sorted({r["round"] for r in runs if r["part"] == part}):
        a = [r for r in runs if r["part"] == part and r["round"] == rd and r["tool"] == "loadgen" and not r["void"]]
        b = [r for r in runs if r["part"] == part and r["round"] == rd and r["tool"] == "wrk" and not r["void"]]
        if a and b and a[0].get(metric) and b[0].get(metric):
            vals.append(f(a[0][metric], b[0][metric]))
    return vals


def comparisons(runs: list[dict], summary: dict) -> dict:
    out: dict = {}
    a, b = summary.get("A", {}), summary.get("B", {})

    def of_medians(part_summary, metric, f):
        x, y = part_summary.get("loadgen", {}).get(metric), part_summary.get("wrk", {}).get(metric)
        return f(x["median"], y["median"]) if x and y and y["median"] else None

    ratio = lambda x, y: x / y  # noqa: E731
    rel_pct = lambda x, y: 100.0 * (x - y) / y  # noqa: E731
    eff = per_round(runs, "A", "requests_per_cpu_s", ratio)
    if eff:
        s = spread(eff)
        out["A_requests_per_cpu_s_loadgen_over_wrk"] = {
            "per_round": eff, **s, "of_medians": of_medians(a, "requests_per_cpu_s", ratio),
            "target": EFFICIENCY_TARGET, "target_met": s["median"] >= EFFICIENCY_TARGET}
    thr = per_round(runs, "A", "req_per_s", ratio)
    if thr:
        out["A_req_per_s_loadgen_over_wrk"] = {"per_round": thr, **spread(thr),
                                               "of_medians": of_medians(a, "req_per_s", ratio)}
    agree = per_round(runs, "B", "req_per_s", rel_pct)
    if agree:
        s = spread(agree)
        out["B_req_per_s_loadgen_minus_wrk_pct"] = {
            "per_round": agree, **s, "of_medians": of_medians(b, "req_per_s", rel_pct),
            "target_abs_pct": AGREEMENT_TARGET_PCT, "target_met": abs(s["median"]) <= AGREEMENT_TARGET_PCT}
    return out


# --------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------


def fmt(v, digits: int = 1) -> str:
    return fh.fmt(v, digits)


def fs(s, digits: int = 1, scale: float = 1.0) -> str:
    return fh.fmt_spread(s, digits, scale)


def write_markdown(path: Path, report: dict) -> None:
    m, cfg, summ, cmp_ = report["machine"], report["config"], report["summary"], report["comparisons"]
    lines = [
        "# loadgen vs wrk",
        "",
        f"- command: `{report['command']}`",
        f"- when: {report['started_utc']} (UTC); git {m['git_commit']}{' (dirty)' if m.get('git_dirty') else ''}",
        f"- machine: {m['cpu_model']}, {m['online_cpus']} CPUs; {m['uname']}",
        f"- layout: server on cores {cfg['server_cores']}, loaders (and this harness) on cores {cfg['loader_cores']}"
        f" (SMT siblings: {', '.join(f'{k}={v}' for k, v in m['thread_siblings'].items()) or 'unknown'})",
        f"- loaders: {m['wrk_version']}; {m.get('loadgen_version') or 'loadgen (version unknown)'}; "
        f"{cfg['threads']} thread(s), {cfg['connections']} connections, no loader warmup, "
        f"{cfg['rounds']} interleaved round(s) of {cfg['duration']} (order rotated); every run on a fresh server "
        f"warmed by a discarded {cfg['server_warmup']} run of the same loader",
        f"- servers: A and C flight-rs bare (1 worker), B node {m['node_version']} (node:http, one process)",
        "",
        "Medians over rounds, (min–max) in brackets. Loader CPU is the loader process's ru_utime+ru_stime from "
        "wait4 (whole process, start to exit, both tools alike); requests are wrk's \"N requests in\" and "
        "loadgen's JSON `responses`.",
    ]
    if "A" in summ:
        lines += [
            "",
            "## A. Efficiency (flight-rs bare)",
            "",
            "| loader | requests / loader CPU-s | req/s | loader CPU s | loader busy % | server busy % | p50 ms "
            "| p99 ms | peak RSS MiB | other load server/loader core % | valid/void |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for tool, s in summ["A"].items():
            lines.append(
                f"| {tool} | {fs(s['requests_per_cpu_s'], 0)} | {fs(s['req_per_s'], 0)} | {fs(s['loader_cpu_s'], 2)} "
                f"| {fs(s['loader_busy_pct'], 0)} | {fs(s['server_busy_pct'], 0)} | {fs(s['p50_us'], 3, 1e-3)} "
                f"| {fs(s['p99_us'], 3, 1e-3)} | {fs(s['peak_rss_kib'], 1, 1 / 1024)} "
                f"| {fs(s['server_cores_other_pct'], 0)} / {fs(s['loader_cores_other_pct'], 0)} "
                f"| {s['valid_runs']}/{s['void_runs']} |")
        r = cmp_.get("A_requests_per_cpu_s_loadgen_over_wrk")
        lines += ["",
                  "- loadgen ÷ wrk, requests per loader CPU-second (per round; ratio of medians after the semicolon): "
                  + (f"**{fs(r, 3)}**; {fmt(r['of_medians'], 3)} — target ≥ {EFFICIENCY_TARGET}: "
                     f"**{'met' if r['target_met'] else 'missed'}**" if r else "— (no round with both runs valid)")]
        t = cmp_.get("A_req_per_s_loadgen_over_wrk")
        if t:
            lines.append(f"- loadgen ÷ wrk, req/s: {fs(t, 3)}; {fmt(t['of_medians'], 3)}")
        lg = summ["A"].get("loadgen", {}).get("self_responses_per_cpu_s")
        if lg:
            lines.append(f"- loadgen's own `cpu.responses_per_cpu_s` (worker threads over the window only): {fs(lg, 0)}")
        lines.append(f"- for reference, wrk measured earlier on this machine: ~{WRK_EARLIER_PER_CPU_S:,} requests "
                     "per CPU-second at -t1 -c100.")
        if any((s.get("server_busy_pct") or {}).get("median", 0) >= 90 for s in summ["A"].values()):
            lines.append("- server busy ≥ 90% in some runs: flight-rs was (near) the limit there, so the loader "
                         "idled part of the time and did fewer requests per wakeup; req/s then says little, "
                         "requests per loader CPU-second is still comparable but conservative.")
    if "B" in summ:
        lines += [
            "",
            "## B. Agreement (node peer, server-bound)",
            "",
            "| loader | req/s | p50 ms | p99 ms | server busy % | server core idle % | loader busy % "
            "| other load server/loader core % | valid/void |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for tool, s in summ["B"].items():
            lines.append(
                f"| {tool} | {fs(s['req_per_s'], 0)} | {fs(s['p50_us'], 3, 1e-3)} | {fs(s['p99_us'], 3, 1e-3)} "
                f"| {fs(s['server_busy_pct'], 0)} | {fs(s['server_cores_idle_pct'], 0)} | {fs(s['loader_busy_pct'], 0)} "
                f"| {fs(s['server_cores_other_pct'], 0)} / {fs(s['loader_cores_other_pct'], 0)} "
                f"| {s['valid_runs']}/{s['void_runs']} |")
        r = cmp_.get("B_req_per_s_loadgen_minus_wrk_pct")
        lines += ["",
                  "- (loadgen − wrk) ÷ wrk req/s, % (per round; of the medians after the semicolon): "
                  + (f"**{fs(r, 2)}**; {fmt(r['of_medians'], 2)} — target within ±{AGREEMENT_TARGET_PCT:.0f}%: "
                     f"**{'met' if r['target_met'] else 'missed'}**" if r else "— (no round with both runs valid)")]
        if any((s.get("server_cores_idle_pct") or {}).get("median", 0) >= 10 for s in summ["B"].values()):
            lines.append("- the server core was idle 10% or more of the time: node was not the bottleneck, so the "
                         "loaders' req/s need not agree.")
        elif any((s.get("server_busy_pct") or {}).get("median", 100) < 90 for s in summ["B"].values()):
            lines.append("- node had under 90% of its core (other load took the rest): the core was the limit, but "
                         "shared; agreement holds only as far as that other load stayed the same between runs.")
    mem = report.get("memory")
    if mem:
        lines += ["", "## C. loadgen memory (flight-rs bare, full rate)", ""]
        rss = mem.get("rss")
        if rss:
            lines += [
                f"- {cfg['memory_duration']} at {fmt(mem.get('req_per_s'), 0)} req/s "
                f"({fmt(mem.get('requests'), 0)} responses); VmRSS sampled every second, {rss['n']} samples",
                f"- RSS first {fmt(rss['first_kib'] / 1024, 2)} MiB, last {fmt(rss['last_kib'] / 1024, 2)} MiB, "
                f"max {fmt(rss['max_kib'] / 1024, 2)} MiB (VmHWM, peak since exec: {fmt((mem.get('peak_rss_kib') or 0) / 1024, 2)} MiB)",
                f"- slope (least squares): {fmt(rss['slope_kib_per_min'], 1)} KiB/min over all samples, "
                f"{fmt(rss['steady_slope_kib_per_min'], 1)} KiB/min from {rss['steady_from_s']:g} s on — "
                f"**{'flat' if rss['flat'] else 'growing'}** (flat: |steady slope| < {FLAT_KIB_PER_MIN:.0f} KiB/min)",
            ]
        else:
            lines.append("- no RSS samples (run too short or loadgen did not start)")
        if mem.get("void"):
            lines.append(f"- VOID: {mem['void_reason']}")
    if report["aborted"]:
        lines += ["", "## Aborted", ""]
        lines += [f"- {k}: {v.splitlines()[0]}" for k, v in report["aborted"].items()]
    voids = [r for r in report["runs"] if r["void"]]
    if voids:
        lines += ["", "## Void runs", ""]
        lines += [f"- {r['part']} round {r['round']} {r['tool']}: {r['void_reason']}" for r in voids]
    if any(s.get("contended") for p in ("A", "B") for s in summ.get(p, {}).values()):
        lines += ["", "contended: other processes (or steal) took 10% or more of the server or loader core during "
                      "most runs; rerun on a quiet machine."]
    path.write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--server-cores", default="0", help="taskset list for the server")
    p.add_argument("--loader-cores", default="1", help="taskset list for the loaders and this harness")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (one run per loader each) in A and B")
    p.add_argument("--duration", default="10s", help="-d of every measured run in A and B (no loader warmup)")
    p.add_argument("--connections", type=int, default=100, help="-c for both loaders")
    p.add_argument("--threads", type=int, default=1, help="-t for both loaders")
    p.add_argument("--server-warmup", default="2s",
                   help="discarded run of the same loader on each fresh server before the measured one (0 to skip)")
    p.add_argument("--check-duration", default="1s", help="length of each loader's correctness check per server")
    p.add_argument("--memory-duration", default="60s", help="length of the loadgen memory run (C)")
    p.add_argument("--skip-memory", action="store_true", help="leave out C")
    p.add_argument("--loaders", default=",".join(LOADERS),
                   help="comma list of wrk,loadgen (one alone skips the comparisons; for testing the harness)")
    p.add_argument("--loadgen-bin", type=Path, default=default_loadgen_bin(), help="loadgen binary")
    p.add_argument("--flight-bin", type=Path, default=fh.default_flight_bin(), help="flight-rs binary")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON path (default bench/results/<UTC timestamp>-loadgen-vs-wrk.json); .md written beside it")
    args = p.parse_args(argv)
    try:
        for d in (args.duration, args.server_warmup, args.check_duration, args.memory_duration):
            fh.parse_duration(d)
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    args.loader_list = [x.strip() for x in args.loaders.split(",") if x.strip()]
    if not args.loader_list or any(x not in LOADERS for x in args.loader_list):
        p.error(f"--loaders: choose from {LOADERS}")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if fh.parse_cores(args.server_cores) & fh.parse_cores(args.loader_cores):
        print("warning: server and loader cores overlap; CPU figures will mix server and loader work", file=sys.stderr)
    args.loadgen_bin = args.loadgen_bin.resolve()
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    started = dt.datetime.now(dt.timezone.utc)
    out_json = args.out or BENCH_DIR / "results" / f"{started:%Y%m%dT%H%M%SZ}-loadgen-vs-wrk.json"
    out_md = out_json.with_suffix(".md")
    signal.signal(signal.SIGTERM, fh.on_sigterm)
    os.sched_setaffinity(0, fh.parse_cores(args.loader_cores))
    log = fh.log

    rts = fh.make_runtimes(args.flight_bin.resolve())
    servers = {"A": rts["rust-bare"], "B": rts["node"]}
    loaders = list(args.loader_list)
    aborted: dict[str, str] = {}
    checks: dict[str, dict] = {}
    runs: list[dict] = []
    memory: dict | None = None

    if "loadgen" in loaders and not args.loadgen_bin.exists():
        aborted["loadgen"] = f"{args.loadgen_bin} not found; run bench/setup.sh (cargo build --release -p loadgen)"
        loaders.remove("loadgen")
        log(f"ABORT {aborted['loadgen']}")
    parts = [p for p in ("A", "B") if loaders]

    with tempfile.TemporaryDirectory(prefix="loadgen-vs-wrk-") as tmp:
        logdir = Path(tmp)
        try:
            # 1. Each server answers the contract and each loader sees only 2xx, no errors, against it.
            for part in list(parts):
                rt = servers[part]
                try:
                    checks[rt.name] = check(rt, loaders, args, logdir)
                    log(f"check {rt.name}: ok ({', '.join(loaders)})")
                except fh.Abort as e:
                    aborted[part] = str(e)
                    parts.remove(part)
                    log(f"ABORT part {part}: {e}")

            # 2. A then B, interleaved rounds with the order rotated.
            for part in parts:
                for rd in range(args.rounds):
                    order = loaders[rd % len(loaders):] + loaders[: rd % len(loaders)]
                    for tool in order:
                        run = measure(part, servers[part], tool, args, logdir, args.duration, f"{part}{rd + 1}")
                        run["round"] = rd + 1
                        runs.append(run)
                        if run["void"]:
                            log(f"{part} round {rd + 1} {tool}: VOID ({run['void_reason']})")
                        else:
                            log(f"{part} round {rd + 1} {tool}: {run['requests']:,} requests, "
                                f"{run['req_per_s']:,.0f} req/s, loader CPU {run['cpu_s']:.2f}s -> "
                                f"{run['requests_per_cpu_s']:,.0f} req/CPU-s; loader busy "
                                f"{run['loader_busy_pct']:.0f}%, server busy {run['server_busy_pct']:.0f}%")

            # 3. C: loadgen's memory over a long full-rate run.
            if not args.skip_memory and "loadgen" in loaders and "A" in parts:
                memory = measure_memory(servers["A"], args, logdir)
                memory["round"] = 1
                rss = memory.get("rss")
                if rss:
                    log(f"C memory: RSS first {rss['first_kib']} KiB, last {rss['last_kib']} KiB, max "
                        f"{rss['max_kib']} KiB, steady slope {fmt(rss['steady_slope_kib_per_min'])} KiB/min"
                        + (f" (VOID: {memory['void_reason']})" if memory["void"] else ""))
                else:
                    log(f"C memory: no samples ({memory.get('void_reason')})")
        except KeyboardInterrupt:
            log("interrupted: stopping loaders and servers, writing nothing")
            return 130
        finally:
            Loader.kill_all()
            fh.Server.stop_all()

    summary = {part: summarize_part(runs, part, loaders) for part in parts}
    machine = fh.machine_info(args)
    machine["loadgen_version"] = (fh.cmd_output([str(args.loadgen_bin), "--version"])
                                  if args.loadgen_bin.exists() else None)
    machine["layout"] = {"server_cores": args.server_cores, "loader_cores": args.loader_cores,
                         "harness_cores": args.loader_cores}
    report = {
        "benchmark": "loadgen-vs-wrk",
        "command": shlex.join([sys.executable, *sys.argv]),
        "cwd": os.getcwd(),
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine,
        "config": {
            "rounds": args.rounds, "duration": args.duration, "connections": args.connections,
            "threads": args.threads, "server_warmup": args.server_warmup, "check_duration": args.check_duration,
            "memory_duration": None if args.skip_memory else args.memory_duration, "loaders": args.loader_list,
            "server_cores": args.server_cores, "loader_cores": args.loader_cores, "url_path": HELLO_PATH,
            "loader_timeout": "2s", "loadgen_bin": str(args.loadgen_bin),
            "servers": {p: {"name": servers[p].name, "argv": servers[p].argv, "env": servers[p].extra_env}
                        for p in ("A", "B")},
            "targets": {"A_requests_per_cpu_s_loadgen_over_wrk_min": EFFICIENCY_TARGET,
                        "B_req_per_s_abs_diff_pct_max": AGREEMENT_TARGET_PCT,
                        "C_flat_steady_slope_kib_per_min_below": FLAT_KIB_PER_MIN},
        },
        "checks": checks,
        "aborted": aborted,
        "runs": runs,
        "summary": summary,
        "comparisons": comparisons(runs, summary),
        "memory": memory,
    }
    fh.write_report(out_json, out_md, report, write_markdown)
    return 2 if aborted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
