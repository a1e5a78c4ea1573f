#!/usr/bin/env python3
"""Scribe notes benchmark: scribe-rs against the Scribe Bun and Node peers, shipped and fixed, pinned.

Runtimes: rust (target/release/scribe-rs, one worker), bun-shipped, bun-fixed, node-shipped,
node-fixed (bench/peers/scribe: one handler module run by Bun.serve and by node:http; "shipped" does
what the original Scribe does on every POST -- DDL for both tables and every column, a freshly
compiled validator, two autocommit inserts -- and "fixed" does the DDL once, compiles once and
inserts in one transaction). Scenarios:

  read   seed --seed-count notes by POST, then GET /notes/1 under load
  write  POST /notes under load, one fixed valid body

This harness starts its own PostgreSQL (initdb in a temp dir, durability defaults: fsync,
synchronous_commit and full_page_writes stay on) and redis-server (--save ''), both pinned with
the loader to --loader-cores (default core 1); the server under test runs alone on --server-cores
(default core 0), as DESIGN.md's "Measurement rules" ask. Every measured run gets a fresh server
and a fresh database. Before any timing each runtime must give byte-identical answers on the same
data: POST -> 200 [row], GET /notes/1 -> [row], absent rows and tables -> [], the first history
patch, /healthz. Load comes from target/release/loadgen, pinned to the loader core; a separate
discarded warmup run comes first. Runs are interleaved round by round (order rotated), and the
JSON (every raw figure) and Markdown (medians, ranges, ratios) land in bench/results/.

Run it through bench/notes-bench.sh (which runs bench/setup.sh first), or directly:

    python3 bench/notes_bench.py --rounds 3 --duration 10s --runtimes rust,bun-shipped,bun-fixed

Python 3.11 standard library only. Shares the process and /proc helpers of flight_hello.py and the
loader process handling of loadgen_vs_wrk.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import http.client
import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.dont_write_bytecode = True  # no bench/__pycache__ from importing the sibling modules
import flight_hello as fh  # noqa: E402  (same directory; their main() only runs as a script)
import loadgen_vs_wrk as lw  # noqa: E402

REPO = fh.REPO
PEERS = fh.PEERS
BUN_BIN = fh.BUN_BIN
NODE_BIN = fh.NODE_BIN

ALL_RUNTIMES = ["rust", "bun-shipped", "bun-fixed", "node-shipped", "node-fixed"]
SCENARIOS = ["read", "write"]
COMPONENT = "notes"
READ_PATH = f"/{COMPONENT}/1"
HEALTH_PATH = "/healthz"
HEALTH_BODY = b'{"status":"ok","postgres":"ok","redis":"ok"}'

READY_TIMEOUT_S = 30.0
BACKEND_READY_TIMEOUT_S = 60.0
SETTLE_S = 0.5
LOADER_SLACK_S = 30.0
STOP_GRACE_S = 10.0


class Skip(Exception):
    """A runtime cannot run here at all (binary not built): left out, and said so."""


# --------------------------------------------------------------------------------------
# The data: identical for every runtime, and what each must answer with
# --------------------------------------------------------------------------------------


def note_body(i: int) -> dict:
    """Seed note i (1-based). Note 1's timestamps need normalizing (no ms, an offset) so the check
    covers the timestamp format; its data has a nested object and an array."""
    return {
        "data": {
            "title": f"Note {i}",
            "body": f"Body of note {i}: remember the milk, and the eggs.",
            "tags": ["seed", f"n{i % 10}"],
            "meta": {"words": 9 + i % 7, "pinned": i % 2 == 0, "source": "notes_bench"},
        },
        "date_created": "2024-01-02T03:04:05Z" if i == 1 else f"2024-01-{1 + i % 28:02d}T10:00:00.250Z",
        "date_modified": "2024-05-06T09:08:07.123+02:00" if i == 1 else f"2024-02-{1 + i % 28:02d}T11:30:00.500Z",
        "created_by": 1 + i % 3,
        "modified_by": 2 + i % 5,
    }


WRITE_BODY = {
    "data": {"title": "Load note", "body": "Written under load by notes_bench.", "tags": ["load"],
             "meta": {"words": 6, "pinned": False}},
    "date_created": "2024-03-04T05:06:07.089Z",
    "date_modified": "2024-03-04T05:06:07.089Z",
    "created_by": 7,
    "modified_by": 7,
}

# Fails the envelope: created_by missing, an extra property, data not an object.
INVALID_BODY = {"data": [1], "date_created": "2024-01-01T00:00:00Z", "date_modified": "yesterday",
                "modified_by": 1, "extra": True}


def compact(value) -> bytes:
    # Matches JSON.stringify / serde_json for the ASCII-only data used here.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def jsonb_order(value):
    """Keys as Postgres' jsonb stores (and returns) them: shorter keys first, then bytewise."""
    if isinstance(value, dict):
        return {k: jsonb_order(value[k]) for k in sorted(value, key=lambda k: (len(k.encode()), k.encode()))}
    if isinstance(value, list):
        return [jsonb_order(v) for v in value]
    return value


def utc_ms(text: str) -> str:
    """An RFC 3339 timestamp as a JS Date serializes it: UTC, milliseconds, Z."""
    t = dt.datetime.fromisoformat(text).astimezone(dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def expected_row(row_id: int, body: dict) -> dict:
    return {"id": row_id, "data": jsonb_order(body["data"]), "date_created": utc_ms(body["date_created"]),
            "date_modified": utc_ms(body["date_modified"]), "created_by": body["created_by"],
            "modified_by": body["modified_by"]}


def expected_first_patch(row: dict) -> str:
    """diff-match-patch's patch_toText(patch_make(JSON.stringify(row), "")) for ASCII text: one patch
    deleting everything, its text encodeURI'd with %20 turned back into spaces."""
    text = compact(row).decode()
    encoded = urllib.parse.quote(text, safe=";,/?:@&=+$!*'()#").replace("%20", " ")
    return f"@@ -1,{len(text)} +0,0 @@\n-{encoded}\n"


# --------------------------------------------------------------------------------------
# Runtimes
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class ScribeRuntime(fh.Runtime):
    def env(self, port: int) -> dict[str, str]:
        # Nothing Scribe-related from the caller's shell may change what is measured.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("SCRIBE_") and k not in ("DATABASE_URL", "REDIS_URL", "RUST_LOG")}
        env.update(self.extra_env)
        env[self.port_env] = str(port)
        env[self.host_env] = "127.0.0.1"
        return env


def default_scribe_bin() -> Path:
    return fh.default_flight_bin().with_name("scribe-rs")


def make_runtimes(scribe_bin: Path) -> dict[str, ScribeRuntime]:
    # RUST_LOG pinned so a debug filter in the shell cannot put logging on the hot path.
    rust_env = {"SCRIBE_APP_WORKERS": "1", "RUST_LOG": "warn"}
    rts = {"rust": ScribeRuntime("rust", [str(scribe_bin)], "SCRIBE_APP_PORT", "SCRIBE_APP_HOST", rust_env)}
    for variant in ("shipped", "fixed"):
        js_env = {"NODE_ENV": "production", "SCRIBE_VARIANT": variant}
        rts[f"bun-{variant}"] = ScribeRuntime(
            f"bun-{variant}", [str(BUN_BIN), "run", str(PEERS / "scribe/server-bun.ts")],
            "SCRIBE_APP_PORT", "SCRIBE_APP_HOST", js_env, PEERS)
        rts[f"node-{variant}"] = ScribeRuntime(
            f"node-{variant}", [str(NODE_BIN), str(PEERS / "scribe/server-node.mjs")],
            "SCRIBE_APP_PORT", "SCRIBE_APP_HOST", js_env, PEERS)
    return rts


def with_backends(rt: ScribeRuntime, db_url: str, redis_url: str) -> ScribeRuntime:
    return dataclasses.replace(rt, extra_env={**rt.extra_env, "DATABASE_URL": db_url, "REDIS_URL": redis_url})


class ScribeServer(fh.Server):
    """flight_hello's pinned server process, ready when GET /healthz answers 200 (both backends up)."""

    def wait_ready(self, timeout: float = READY_TIMEOUT_S, poll_s: float = 0.0005) -> float:
        deadline = time.perf_counter() + timeout
        status = None
        while True:
            if self.proc.poll() is not None:
                raise fh.Abort(f"{self.rt.name}: exited with code {self.proc.returncode} before answering"
                               f"{self.log_tail()}")
            try:
                status = fh.http_get(self.port, HEALTH_PATH, timeout=2.0)[0]
            except (OSError, ValueError):
                status = None
            if status == 200:
                return time.perf_counter() - self.t0
            if time.perf_counter() > deadline:
                raise fh.Abort(f"{self.rt.name}: no 200 on {HEALTH_PATH} within {timeout:.0f}s "
                               f"(last status {status}){self.log_tail()}")
            time.sleep(poll_s)


def start_server(rt: ScribeRuntime, args, logdir: Path) -> ScribeServer:
    if not rt.binary().exists():
        raise Skip(f"{rt.name}: {rt.binary()} not found; run bench/setup.sh"
                   + (" (cargo build --release -p scribe)" if rt.name == "rust" else " (npm ci in bench/peers)"))
    srv = ScribeServer(rt, args.server_cores, logdir)
    try:
        srv.wait_ready()
    except BaseException:
        srv.stop()
        raise
    return srv


# --------------------------------------------------------------------------------------
# PostgreSQL and Redis, pinned to the loader core, in a temp dir, stopped by pid
# --------------------------------------------------------------------------------------


def find_pg_bin() -> Path | None:
    cands = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if cands:
        return cands[-1].parent
    found = shutil.which("postgres")
    return Path(found).parent if found else None


def wait_stop(proc: subprocess.Popen, sig: int, name: str) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            print(f"warning: {name} pid {proc.pid} survived SIGKILL", file=sys.stderr)


class Backends:
    """One PostgreSQL cluster and one redis-server for the whole benchmark."""

    def __init__(self, args, workdir: Path):
        self.args = args
        self.dir = workdir
        self.pg_bin = args.pg_bin
        self.pg: subprocess.Popen | None = None
        self.redis: subprocess.Popen | None = None
        self.pg_port = fh.free_port()
        self.redis_port = fh.free_port()
        self.logs: list = []
        # PostgreSQL refuses to run as root: as root, run it as the `postgres` system user.
        self.demote: list[str] = []
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError as e:
                raise fh.Abort("running as root and there is no `postgres` user to run PostgreSQL as "
                               "(apt-get install postgresql creates it)") from e
            self.demote = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--"]
            self.pg_owner = (pw.pw_uid, pw.pw_gid)
        else:
            self.pg_owner = None

    def _log(self, name: str):
        f = open(self.dir / name, "wb")
        self.logs.append(f)
        return f

    def log_tail(self, name: str, n: int = 15) -> str:
        try:
            lines = (self.dir / name).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "".join("\n    | " + line for line in lines[-n:])

    def start(self) -> None:
        pgdata = self.dir / "pgdata"
        if self.pg_owner:
            os.chown(self.dir, *self.pg_owner)
        # initdb --no-sync only skips flushing initdb's own files; the running server keeps fsync on.
        init = subprocess.run(
            [*self.demote, str(self.pg_bin / "initdb"), "-D", str(pgdata), "-A", "trust", "-U", "postgres",
             "-E", "UTF8", "--locale=C", "--no-sync"],
            capture_output=True, text=True, timeout=120, cwd=self.dir)
        if init.returncode != 0:
            raise fh.Abort(f"initdb failed ({init.returncode}): {(init.stderr or init.stdout).strip()[-800:]}")
        # Durability defaults (fsync, synchronous_commit, full_page_writes) are left alone on purpose.
        self.pg = subprocess.Popen(
            ["taskset", "-c", self.args.loader_cores, *self.demote, str(self.pg_bin / "postgres"),
             "-D", str(pgdata), "-p", str(self.pg_port), "-c", "listen_addresses=127.0.0.1",
             "-c", "unix_socket_directories=", "-c", "max_connections=200", "-c", "TimeZone=UTC"],
            stdin=subprocess.DEVNULL, stdout=self._log("postgres.log"), stderr=subprocess.STDOUT,
            cwd=self.dir, start_new_session=True)
        self.redis = subprocess.Popen(
            ["taskset", "-c", self.args.loader_cores, "redis-server", "--port", str(self.redis_port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.dir)],
            stdin=subprocess.DEVNULL, stdout=self._log("redis.log"), stderr=subprocess.STDOUT,
            cwd=self.dir, start_new_session=True)
        deadline = time.monotonic() + BACKEND_READY_TIMEOUT_S
        while not self._pg_ready():
            if self.pg.poll() is not None:
                raise fh.Abort(f"postgres exited with code {self.pg.returncode}{self.log_tail('postgres.log')}")
            if time.monotonic() > deadline:
                raise fh.Abort(f"postgres not ready within {BACKEND_READY_TIMEOUT_S:.0f}s"
                               f"{self.log_tail('postgres.log')}")
            time.sleep(0.1)
        while not self._redis_ready():
            if self.redis.poll() is not None:
                raise fh.Abort(f"redis-server exited with code {self.redis.returncode}{self.log_tail('redis.log')}")
            if time.monotonic() > deadline:
                raise fh.Abort(f"redis-server not ready within {BACKEND_READY_TIMEOUT_S:.0f}s")
            time.sleep(0.05)

    def _pg_ready(self) -> bool:
        p = subprocess.run([str(self.pg_bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.pg_port),
                            "-U", "postgres", "-d", "postgres"], capture_output=True, timeout=10)
        return p.returncode == 0

    def _redis_ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.redis_port), timeout=1.0) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def psql(self, db: str, sql: str) -> str:
        p = subprocess.run([str(self.pg_bin / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                            "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", "postgres", "-d", db, "-c", sql],
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {p.stderr.strip()}")
        return p.stdout

    def createdb(self, name: str) -> str:
        self.psql("postgres", f"DROP DATABASE IF EXISTS {name}")
        self.psql("postgres", f"CREATE DATABASE {name}")
        return f"postgres://postgres@127.0.0.1:{self.pg_port}/{name}"

    def dropdb(self, name: str) -> None:
        try:
            self.psql("postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"warning: {e}", file=sys.stderr)

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}"

    def info(self) -> dict:
        settings = dict(line.split("=", 1) for line in self.psql(
            "postgres", "SELECT name || '=' || setting FROM pg_settings WHERE name IN ('fsync', "
            "'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'shared_buffers', 'max_connections', "
            "'server_version', 'TimeZone') ORDER BY name").splitlines() if "=" in line)
        fs = (fh.cmd_output(["findmnt", "-n", "-o", "FSTYPE", "--target", str(self.dir)])
              or fh.cmd_output(["stat", "-f", "-c", "%T", str(self.dir)]))
        redis_v = fh.cmd_output(["redis-server", "--version"])
        return {"postgres_settings": settings, "postgres_bin": str(self.pg_bin), "data_dir_filesystem": fs,
                "redis_version": redis_v, "cores": self.args.loader_cores}

    def stop(self) -> None:
        if self.pg is not None:
            wait_stop(self.pg, signal.SIGINT, "postgres")  # SIGINT: fast shutdown
        if self.redis is not None:
            wait_stop(self.redis, signal.SIGTERM, "redis-server")
        for f in self.logs:
            f.close()
        self.logs = []


# --------------------------------------------------------------------------------------
# HTTP for checks and seeding (keep-alive, stdlib)
# --------------------------------------------------------------------------------------


class Client:
    def __init__(self, port: int, timeout: float = 10.0):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict, bytes]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        self.conn.request(method, path, body=body, headers=headers)
        r = self.conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def close(self) -> None:
        self.conn.close()


def first_difference(got: bytes, want: bytes) -> str:
    i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return f"first difference at byte {i}: got …{got[max(0, i - 30):i + 40]!r}… want …{want[max(0, i - 30):i + 40]!r}…"


def expect(problems: list, what: str, status: int, body: bytes, want_status: int, want_body: bytes | None) -> None:
    if status != want_status:
        problems.append(f"{what}: status {status} (want {want_status}), body {body[:300]!r}")
    elif want_body is not None and body != want_body:
        problems.append(f"{what}: body differs; {first_difference(body, want_body)}")


def seed(port: int, count: int) -> tuple[float, list[str]]:
    """POST notes 1..count in order on one keep-alive connection; seconds taken and any problems."""
    problems: list[str] = []
    client = Client(port, timeout=30.0)
    t0 = time.perf_counter()
    try:
        for i in range(1, count + 1):
            status, _, body = client.request("POST", f"/{COMPONENT}", compact(note_body(i)))
            if status != 200:
                problems.append(f"seed POST #{i}: status {status}, body {body[:300]!r}")
                break
            if i == 1:
                expect(problems, "seed POST #1", status, body, 200, compact([expected_row(1, note_body(1))]))
    except (OSError, http.client.HTTPException) as e:
        problems.append(f"seed: {type(e).__name__}: {e}")
    finally:
        client.close()
    return time.perf_counter() - t0, problems


# --------------------------------------------------------------------------------------
# Phases
# --------------------------------------------------------------------------------------


def check_runtime(rt: ScribeRuntime, args, backends: Backends, logdir: Path) -> dict:
    """Fresh database; every answer the benchmark relies on, byte for byte. Raises Abort or Skip."""
    db = f"nb_check_{rt.name.replace('-', '_')}"
    url = backends.createdb(db)
    try:
        srv = start_server(with_backends(rt, url, backends.redis_url), args, logdir)
    except BaseException:
        backends.dropdb(db)
        raise
    problems: list[str] = []
    out: dict = {}
    row1 = compact([expected_row(1, note_body(1))])
    row2 = compact([expected_row(2, WRITE_BODY)])
    client = Client(srv.port)
    try:
        status, headers, body = client.request("GET", HEALTH_PATH)
        expect(problems, f"GET {HEALTH_PATH}", status, body, 200, HEALTH_BODY)
        status, _, body = client.request("GET", "/")
        expect(problems, "GET /", status, body, 200, None)
        status, _, body = client.request("GET", READ_PATH)
        expect(problems, f"GET {READ_PATH} before the table exists", status, body, 200, b"[]")
        status, headers, body = client.request("POST", f"/{COMPONENT}", compact(note_body(1)))
        expect(problems, f"POST /{COMPONENT} (note 1)", status, body, 200, row1)
        out["post_body"] = body.decode(errors="replace")
        out["post_content_type"] = headers.get("content-type")
        status, headers, body = client.request("GET", READ_PATH)
        expect(problems, f"GET {READ_PATH}", status, body, 200, row1)
        out["get_body"] = body.decode(errors="replace")
        out["get_content_type"] = headers.get("content-type")
        if not (headers.get("content-type") or "").startswith("application/json"):
            problems.append(f"GET {READ_PATH}: content-type {headers.get('content-type')!r} (want application/json)")
        status, _, body = client.request("GET", f"/{COMPONENT}/2")
        expect(problems, f"GET /{COMPONENT}/2 (absent)", status, body, 200, b"[]")
        status, _, body = client.request("GET", "/nosuchcomponent/1")
        expect(problems, "GET /nosuchcomponent/1 (no table)", status, body, 200, b"[]")
        status, _, body = client.request("POST", f"/{COMPONENT}", compact(INVALID_BODY))
        expect(problems, f"POST /{COMPONENT} (invalid envelope)", status, body, 400, None)
        out["invalid_post"] = {"status": status, "body": body.decode(errors="replace")[:2000]}
        status, _, body = client.request("POST", f"/{COMPONENT}", compact(WRITE_BODY))
        expect(problems, f"POST /{COMPONENT} (the write scenario's body)", status, body, 200, row2)
    except (OSError, http.client.HTTPException) as e:
        problems.append(f"request failed: {type(e).__name__}: {e}")
    finally:
        client.close()
        srv.stop()
    # History: one entry per created row, its first patch turning the row's JSON into "".
    try:
        hist = [json.loads(line) for line in backends.psql(
            db, f"SELECT patches::text FROM {COMPONENT}_history ORDER BY id").splitlines()]
        want = [[expected_first_patch(expected_row(1, note_body(1)))],
                [expected_first_patch(expected_row(2, WRITE_BODY))]]
        out["history"] = hist
        if hist != want:
            problems.append(f"{COMPONENT}_history patches {hist!r} (want {want!r})")
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        problems.append(f"reading {COMPONENT}_history: {e}")
    backends.dropdb(db)
    if problems:
        raise fh.Abort(f"{rt.name}: differs from the contract:\n  - " + "\n  - ".join(problems)
                       + srv.log_tail())
    return out


def measure_startup(rt: ScribeRuntime, args, logdir: Path) -> float:
    """Exec to first 200 on /healthz (so both backends are connected), in ms."""
    srv = ScribeServer(rt, args.server_cores, logdir)
    try:
        return srv.wait_ready(poll_s=0.0005) * 1000.0
    finally:
        srv.stop()


def loadgen_argv(args, port: int, scenario: str, duration: str, json_path: Path, files: dict) -> list[str]:
    url = f"http://127.0.0.1:{port}{READ_PATH if scenario == 'read' else '/' + COMPONENT}"
    argv = ["taskset", "-c", args.loader_cores, str(args.loadgen_bin), "-t", str(args.threads),
            "-c", str(args.connections), "-d", duration, "--warmup", "0s", "--timeout", args.timeout,
            "--pin", args.loader_cores, "--no-progress", "--json", str(json_path), "--expect-status", "200"]
    if scenario == "read":
        # Every response must be the seeded row, byte for byte (a memcmp per response).
        argv += ["--expect-body-file", str(files["read_expected"])]
    else:
        argv += ["-m", "POST", "--body-file", str(files["write_body"]), "-H", "Content-Type: application/json",
                 "--expect-contains", '[{"id":']
    return [*argv, url]


def run_loadgen(args, port: int, scenario: str, duration: str, logdir: Path, tag: str, files: dict,
                warmup: bool = False) -> dict:
    """One loadgen process, reaped with wait4 (its own CPU); its figures and why it is void, if it is.
    A warmup only fails on wrong answers and errors: a slow server may complete nothing in it
    (loadgen then exits 1), which is no reason to void the measured run."""
    json_path = logdir / f"{tag}.json"
    json_path.unlink(missing_ok=True)
    argv = loadgen_argv(args, port, scenario, duration, json_path, files)
    ld = lw.Loader(argv, logdir / f"{tag}.out", logdir / f"{tag}.err")
    proc = ld.wait(fh.parse_duration(duration) + LOADER_SLACK_S)
    stderr = (logdir / f"{tag}.err").read_text(errors="replace")
    res: dict = {"command": shlex.join(argv), "returncode": proc["returncode"], "wall_s": proc["wall_s"],
                 "loader_cpu_s": proc["cpu_s"]}
    if stderr.strip():
        res["stderr"] = stderr[-2000:]
    reasons = []
    if proc["timed_out"]:
        reasons.append(f"loadgen still running after -d + {LOADER_SLACK_S:.0f}s; killed")
    elif proc["returncode"] != 0 and not (warmup and json_path.exists()):
        reasons.append(f"loadgen exited {proc['returncode']}: {stderr.strip()[-300:]}")
    try:
        rep = json.loads(json_path.read_text())
        res["report"] = lw.strip_histograms(rep)
        lat = rep["latency"]
        res.update(requests=int(rep["responses"]), req_per_s=float(rep["req_per_s"]), p50_us=lat["p50_us"],
                   p99_us=lat["p99_us"], max_us=lat.get("max_us"), measured_s=rep.get("duration_s"),
                   errors=rep["errors"], non_2xx_3xx=int(rep["non_2xx_3xx"]), status=rep.get("status"))
        other = {c: n for c, n in (rep.get("status") or {}).items() if not 200 <= int(c) < 300 and n}
        if other:
            reasons.append("non-2xx statuses " + ", ".join(f"{c}: {n}" for c, n in other.items()))
        errs = {k: v for k, v in rep["errors"].items() if v}
        if errs:
            reasons.append("errors " + ", ".join(f"{k} {v}" for k, v in errs.items()))
        failed = (rep.get("assertions") or {}).get("failed")
        if failed:
            reasons.append(f"{failed} responses failed the assertions")
        conns = rep["connections"]
        if conns.get("failed") or conns.get("established", 0) < conns.get("asked", 0):
            reasons.append(f"connections asked {conns.get('asked')}, established {conns.get('established')}, "
                           f"failed {conns.get('failed')}")
        if not res["requests"] and not warmup:
            stuck = rep.get("in_flight_at_end") or 0
            reasons.append(f"no response completed in the window ({stuck} requests still in flight"
                           + (": the server needs longer than the window per response; use a longer --duration)"
                              if stuck else ")"))
    except (OSError, ValueError, KeyError, TypeError) as e:
        reasons.append(f"unreadable loadgen report: {type(e).__name__}: {e}")
    res["void"] = bool(reasons)
    res["void_reason"] = "; ".join(reasons) or None
    return res


def settled_counts(backends: Backends, db: str, timeout: float = 15.0) -> tuple[int, int]:
    """Rows and history rows once the requests still in flight when loadgen stopped have finished
    (the shipped variant inserts the two in separate statements): the same counts twice running."""
    sql = f"SELECT (SELECT count(*) FROM {COMPONENT}), (SELECT count(*) FROM {COMPONENT}_history)"
    deadline = time.monotonic() + timeout
    last = None
    while True:
        rows, hist = (int(x) for x in backends.psql(db, sql).strip().split("|"))
        if (rows == hist and last == (rows, hist)) or time.monotonic() > deadline:
            return rows, hist
        last = (rows, hist)
        time.sleep(0.25)


def measure(rt: ScribeRuntime, scenario: str, rd: int, args, backends: Backends, logdir: Path, files: dict) -> dict:
    """Fresh database and server; idle RSS; seed (read) or one POST (write); discarded warmup run;
    the measured run with CPU of the server tree, Postgres, Redis and both cores around it; loaded RSS."""
    run: dict = {"runtime": rt.name, "scenario": scenario, "round": rd, "void": False, "void_reason": None}
    db = f"nb_{rt.name.replace('-', '_')}_{scenario}_r{rd}"
    try:
        url = backends.createdb(db)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        return {**run, "void": True, "void_reason": f"createdb: {e}"}
    srv = None
    reasons: list[str] = []
    try:
        srv = start_server(with_backends(rt, url, backends.redis_url), args, logdir)
        time.sleep(SETTLE_S)
        run["idle_rss_kib"] = fh.tree_rss_kib(srv.pid)
        if scenario == "read":
            run["seed_s"], problems = seed(srv.port, args.seed_count)
            status, _, body = fh.http_get(srv.port, READ_PATH, timeout=5.0)
            expect(problems, f"GET {READ_PATH} after seeding", status, body, 200, files["read_expected_bytes"])
        else:
            problems = []
            client = Client(srv.port)
            try:
                status, _, body = client.request("POST", f"/{COMPONENT}", files["write_body_bytes"])
                expect(problems, f"POST /{COMPONENT} before load", status, body, 200,
                       compact([expected_row(1, WRITE_BODY)]))
            finally:
                client.close()
        if problems:
            raise fh.Abort("; ".join(problems))

        if fh.parse_duration(args.warmup) > 0:
            warm = run_loadgen(args, srv.port, scenario, args.warmup, logdir, f"r{rd}-{rt.name}-{scenario}-warm", files,
                               warmup=True)
            run["warmup"] = {k: warm.get(k) for k in ("requests", "req_per_s", "non_2xx_3xx", "errors",
                                                      "void_reason")}
            if warm["void"]:
                reasons.append(f"warmup: {warm['void_reason']}")

        server_cores, loader_cores = fh.parse_cores(args.server_cores), fh.parse_cores(args.loader_cores)
        s0, l0 = fh.cores_ticks(server_cores), fh.cores_ticks(loader_cores)
        u0, k0, n0 = fh.tree_cpu_us(srv.pid)
        pu0, pk0, _ = fh.tree_cpu_us(backends.pg.pid)
        ru0, rk0, _ = fh.tree_cpu_us(backends.redis.pid)
        res = run_loadgen(args, srv.port, scenario, args.duration, logdir, f"r{rd}-{rt.name}-{scenario}", files)
        u1, k1, n1 = fh.tree_cpu_us(srv.pid)
        pu1, pk1, _ = fh.tree_cpu_us(backends.pg.pid)
        ru1, rk1, _ = fh.tree_cpu_us(backends.redis.pid)
        s1, l1 = fh.cores_ticks(server_cores), fh.cores_ticks(loader_cores)
        run["loaded_rss_kib"] = fh.tree_rss_kib(srv.pid)
        run["processes_in_tree"] = max(n0, n1)
        run.update(res)
        if res["void"]:
            reasons.append(res["void_reason"])

        wall = res["wall_s"]
        n = res.get("requests") or 0
        cpu_us = (u1 + k1) - (u0 + k0)
        run["server_cpu_us"], run["server_user_us"], run["server_sys_us"] = cpu_us, u1 - u0, k1 - k0
        run["postgres_cpu_us"] = (pu1 + pk1) - (pu0 + pk0)
        run["redis_cpu_us"] = (ru1 + rk1) - (ru0 + rk0)
        per = (lambda v: v / n if n else None)  # noqa: E731
        run["cpu_us_per_response"] = per(cpu_us)
        run["user_us_per_response"] = per(run["server_user_us"])
        run["sys_us_per_response"] = per(run["server_sys_us"])
        run["postgres_cpu_us_per_response"] = per(run["postgres_cpu_us"])
        run["redis_cpu_us_per_response"] = per(run["redis_cpu_us"])
        run["server_busy_pct"] = 100.0 * cpu_us / (wall * 1e6) / len(server_cores)

        def busy_pct(a, b):
            return 100.0 - 100.0 * (b["idle"] - a["idle"]) / max(1, b["total"] - a["total"])
        run["server_cores_busy_pct"] = busy_pct(s0, s1)
        run["loader_cores_busy_pct"] = busy_pct(l0, l1)  # loadgen + Postgres + Redis + this harness
        run["server_cores_other_pct"] = max(0.0, run["server_cores_busy_pct"] - run["server_busy_pct"])
        # Below 90% busy the server was not the limit: the loader core (loadgen, Postgres, Redis) or
        # Postgres' commit flushes were -- unless other work took the server's core (contended).
        run["server_not_saturated"] = run["server_busy_pct"] < 90.0 and run["server_cores_other_pct"] < 10.0
        run["contended"] = run["server_cores_other_pct"] >= 10.0

        if scenario == "write":
            try:
                run["rows"], run["history_rows"] = settled_counts(backends, db)
                if run["rows"] != run["history_rows"]:
                    reasons.append(f"{run['rows']} rows but {run['history_rows']} history rows")
            except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                reasons.append(f"counting rows: {e}")
        if srv.proc.poll() is not None:
            reasons.append(f"server exited with code {srv.proc.returncode} during the run")
        for name, proc in (("postgres", backends.pg), ("redis-server", backends.redis)):
            if proc.poll() is not None:
                reasons.append(f"{name} exited with code {proc.returncode} during the run")
    except (fh.Abort, Skip, RuntimeError, ValueError, OSError, http.client.HTTPException,
            subprocess.TimeoutExpired) as e:
        reasons.append(f"{type(e).__name__}: {e}")
    finally:
        if srv is not None:
            if reasons:
                run["server_log_tail"] = srv.log_tail(30)
            srv.stop()
        backends.dropdb(db)
    run["void"] = bool(reasons)
    run["void_reason"] = "; ".join(reasons) or None
    return run


# --------------------------------------------------------------------------------------
# Summaries and ratios
# --------------------------------------------------------------------------------------

METRICS = ["req_per_s", "p50_us", "p99_us", "cpu_us_per_response", "user_us_per_response", "sys_us_per_response",
           "postgres_cpu_us_per_response", "redis_cpu_us_per_response", "server_busy_pct",
           "server_cores_other_pct", "loader_cores_busy_pct"]


def summarize(runs: list[dict], startup: dict[str, list[float]], names: list[str], scenarios: list[str]) -> dict:
    out: dict = {}
    for sc in scenarios:
        out[sc] = {}
        for name in names:
            mine = [r for r in runs if r["runtime"] == name and r["scenario"] == sc]
            ok = [r for r in mine if not r["void"]]
            s = {"valid_runs": len(ok), "void_runs": len(mine) - len(ok)}
            for m in METRICS:
                s[m] = fh.spread([r.get(m) for r in ok])
            s["idle_rss_mib"] = fh.spread([r["idle_rss_kib"] / 1024 for r in ok if r.get("idle_rss_kib")])
            s["loaded_rss_mib"] = fh.spread([r["loaded_rss_kib"] / 1024 for r in ok if r.get("loaded_rss_kib")])
            s["seed_s"] = fh.spread([r.get("seed_s") for r in ok])
            s["server_not_saturated"] = sum(r["server_not_saturated"] for r in ok) * 2 > len(ok) > 0
            s["contended"] = sum(r["contended"] for r in ok) * 2 > len(ok) > 0
            out[sc][name] = s
    out["startup_ms"] = {}
    for name in names:
        st = startup.get(name) or []
        out["startup_ms"][name] = ({"median": statistics.median(st), "p90": fh.p90(st), "min": min(st),
                                    "max": max(st), "n": len(st)} if st else None)
    return out


# (scenario, metric, numerator, denominator); the first five are the headline figures.
RATIOS = [
    ("read", "req_per_s", "rust", "bun-fixed"),
    ("read", "cpu_us_per_response", "rust", "bun-fixed"),
    ("read", "req_per_s", "rust", "bun-shipped"),
    ("read", "cpu_us_per_response", "rust", "bun-shipped"),
    ("write", "req_per_s", "rust", "bun-shipped"),
    ("write", "req_per_s", "rust", "bun-fixed"),
    ("write", "cpu_us_per_response", "rust", "bun-shipped"),
    ("write", "cpu_us_per_response", "rust", "bun-fixed"),
    ("read", "req_per_s", "rust", "node-fixed"),
    ("read", "cpu_us_per_response", "rust", "node-fixed"),
    ("write", "req_per_s", "rust", "node-shipped"),
    ("write", "cpu_us_per_response", "rust", "node-shipped"),
    ("write", "postgres_cpu_us_per_response", "rust", "bun-shipped"),
    ("read", "req_per_s", "bun-fixed", "bun-shipped"),
    ("write", "req_per_s", "bun-fixed", "bun-shipped"),
    ("write", "req_per_s", "node-fixed", "node-shipped"),
    ("read", "req_per_s", "bun-fixed", "node-fixed"),
    ("write", "req_per_s", "bun-fixed", "node-fixed"),
]


def ratio_key(sc: str, metric: str, a: str, b: str) -> str:
    return f"{sc}_{metric}_{a}_over_{b}".replace("-", "_")


def ratios(runs: list[dict], summary: dict) -> dict:
    """Per interleaved round (both runs in the same round), then median and range; ratio of the
    medians alongside."""
    out = {}
    for sc, metric, num, den in RATIOS:
        per_round = []
        for rd in sorted({r["round"] for r in runs}):
            a = [r for r in runs if (r["round"], r["scenario"], r["runtime"]) == (rd, sc, num) and not r["void"]]
            b = [r for r in runs if (r["round"], r["scenario"], r["runtime"]) == (rd, sc, den) and not r["void"]]
            if a and b and a[0].get(metric) and b[0].get(metric):
                per_round.append(a[0][metric] / b[0][metric])
        if not per_round:
            continue
        sa = summary.get(sc, {}).get(num, {}).get(metric)
        sb = summary.get(sc, {}).get(den, {}).get(metric)
        out[ratio_key(sc, metric, num, den)] = {
            "scenario": sc, "metric": metric, "numerator": num, "denominator": den, "per_round": per_round,
            **fh.spread(per_round),
            "of_medians": sa["median"] / sb["median"] if sa and sb and sb["median"] else None}
    return out


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------

METRIC_LABEL = {"req_per_s": "req/s", "cpu_us_per_response": "server CPU-µs/resp",
                "postgres_cpu_us_per_response": "Postgres CPU-µs/resp"}


def write_markdown(path: Path, report: dict) -> None:
    m, cfg, summ = report["machine"], report["config"], report["summary"]
    fs = fh.fmt_spread
    pg = m["backends"].get("postgres_settings", {})
    lines = [
        "# Scribe notes benchmark",
        "",
        f"- command: `{report['command']}`",
        f"- when: {report['started_utc']} (UTC); git {m['git_commit']}{' (dirty)' if m.get('git_dirty') else ''}",
        f"- machine: {m['cpu_model']}, {m['online_cpus']} CPUs; {m['uname']}",
        f"- layout: server on cores {cfg['server_cores']}; loadgen, PostgreSQL, Redis and this harness on cores "
        f"{cfg['loader_cores']} (SMT siblings: {', '.join(f'{k}={v}' for k, v in m['thread_siblings'].items()) or 'unknown'})",
        f"- load: {m.get('loadgen_version')}, {cfg['threads']} thread(s), {cfg['connections']} connections, "
        f"timeout {cfg['timeout']}; {cfg['rounds']} interleaved round(s) of {cfg['duration']} per runtime and "
        f"scenario, each after a discarded {cfg['warmup']} warmup run, fresh server and database every run",
        f"- backends: PostgreSQL {pg.get('server_version')} (fsync={pg.get('fsync')}, synchronous_commit="
        f"{pg.get('synchronous_commit')}, full_page_writes={pg.get('full_page_writes')}, shared_buffers="
        f"{pg.get('shared_buffers')}×8kB, data on {m['backends'].get('data_dir_filesystem')}); "
        f"{(m['backends'].get('redis_version') or '').split(' sha=')[0]}",
        f"- peers: bun {m['bun_version']}, node {m['node_version']} (bench/peers/scribe, pg Pool max "
        f"{cfg['peer_pool_max']}); rust: {cfg['scribe_bin']} with SCRIBE_APP_WORKERS=1",
        f"- scenarios: read = GET {READ_PATH} after seeding {cfg['seed_count']} notes by POST (every response "
        f"checked byte for byte); write = POST /{COMPONENT} with one fixed body (status 200 and `[{{\"id\":` checked)",
        "- variants: *shipped* does on every POST what the original Scribe does (new Ajv + ajv-formats + compile; "
        "CREATE TABLE IF NOT EXISTS for both tables and ALTER TABLE … ADD COLUMN IF NOT EXISTS per column; insert "
        "and history insert as two autocommit statements); *fixed* compiles once, runs the DDL once per component "
        "and inserts both rows in one transaction. Both look the schema up in Redis on every POST.",
        "",
        "Medians over rounds, (min–max) in brackets. CPU-µs/resp: the server process tree's utime+stime over the "
        "measured window ÷ loadgen's responses; Postgres CPU-µs/resp the same for the postmaster's tree (its "
        "work on the loader core, which the shipped variant's per-request DDL inflates). seed s: the "
        f"{cfg['seed_count']} sequential POSTs on one connection before each read run (not timed load; each "
        "durable commit waits for a WAL flush, and in the shipped variant so does each of its no-op ALTER TABLEs).",
    ]
    for sc in cfg["scenarios"]:
        if sc not in summ:
            continue
        lines += ["", f"## {sc}", "",
                  "| runtime | req/s | p50 ms | p99 ms | server CPU-µs/resp | user / kernel µs | Postgres CPU-µs/resp "
                  "| server busy % | loader core busy % | idle RSS MiB | loaded RSS MiB | valid/void |"
                  + (" seed s |" if sc == "read" else ""),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if sc == "read" else "")]
        for name, s in summ[sc].items():
            rps = fs(s["req_per_s"], 0) + (" **not server-bound**" if s["server_not_saturated"] else "") \
                + (" **contended**" if s["contended"] else "")
            uk = (f"{fh.fmt(s['user_us_per_response']['median'], 1)} / {fh.fmt(s['sys_us_per_response']['median'], 1)}"
                  if s["user_us_per_response"] and s["sys_us_per_response"] else "—")
            lines.append(
                f"| {name} | {rps} | {fs(s['p50_us'], 3, 1e-3)} | {fs(s['p99_us'], 3, 1e-3)} "
                f"| {fs(s['cpu_us_per_response'], 1)} | {uk} | {fs(s['postgres_cpu_us_per_response'], 1)} "
                f"| {fs(s['server_busy_pct'], 0)} | {fs(s['loader_cores_busy_pct'], 0)} "
                f"| {fs(s['idle_rss_mib'])} | {fs(s['loaded_rss_mib'])} | {s['valid_runs']}/{s['void_runs']} |"
                + (f" {fs(s['seed_s'], 1)} |" if sc == "read" else ""))
    lines += ["", "## Startup (exec to first 200 on /healthz, both backends connected)", "",
              "| runtime | median ms | p90 ms | min–max ms | runs |", "|---|---|---|---|---|"]
    for name, st in summ.get("startup_ms", {}).items():
        lines.append(f"| {name} | {fh.fmt(st['median'])} | {fh.fmt(st['p90'])} | {fh.fmt(st['min'])}–"
                     f"{fh.fmt(st['max'])} | {st['n']} |" if st else f"| {name} | — | — | — | 0 |")
    lines += ["", "## Ratios", "",
              "Per interleaved round: median (min–max); the ratio of the medians after the semicolon. For req/s "
              "above 1 means the numerator is faster; for CPU-µs/resp below 1 means it spends less.", ""]
    for sc, metric, num, den in RATIOS:
        r = report["ratios"].get(ratio_key(sc, metric, num, den))
        label = f"{sc}: {num} ÷ {den}, {METRIC_LABEL.get(metric, metric)}"
        if r:
            lines.append(f"- {label}: {fs(r, 3)}; {fh.fmt(r['of_medians'], 3)}")
        elif num in cfg["measured"] and den in cfg["measured"]:
            lines.append(f"- {label}: — (no round with both runs valid)")
    if "rust" not in cfg["measured"]:
        lines.append("- rust ratios: none (rust was not measured: see below)")
    if report["skipped"]:
        lines += ["", "## Skipped", ""] + [f"- {k}: {v}" for k, v in report["skipped"].items()]
    if report["aborted"]:
        lines += ["", "## Aborted (failed the checks; not timed)", ""]
        for k, v in report["aborted"].items():
            lines += [f"- {k}:", "", "```", v, "```"]
    voids = [r for r in report["runs"] if r["void"]]
    if voids:
        lines += ["", "## Void runs", ""]
        lines += [f"- round {r['round']} {r['scenario']} {r['runtime']}: {r['void_reason']}" for r in voids]
    if any(s.get("server_not_saturated") for sc in cfg["scenarios"] for s in summ.get(sc, {}).values()):
        lines += ["", "not server-bound: the server used under 90% of its core, so something else set the req/s "
                      "-- the loader core (loadgen, PostgreSQL and Redis share it) or PostgreSQL's commit flushes "
                      "(writes). Compare server CPU-µs/resp there, not req/s."]
    if any(s.get("contended") for sc in cfg["scenarios"] for s in summ.get(sc, {}).values()):
        lines += ["", "contended: other processes (or steal) took 10% or more of the server core during most runs; "
                      "rerun on a quiet machine."]
    path.write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--server-cores", default="0", help="taskset list for the server")
    p.add_argument("--loader-cores", default="1", help="taskset list for loadgen, PostgreSQL, Redis and this harness")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (one run per runtime and scenario each)")
    p.add_argument("--duration", default="10s", help="measured loadgen duration per run")
    p.add_argument("--warmup", default="3s", help="discarded loadgen run before each measured one (0 to skip)")
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--threads", type=int, default=1, help="loadgen threads")
    p.add_argument("--timeout", default="5s", help="loadgen per-request timeout (a timeout voids the run)")
    p.add_argument("--runtimes", default=",".join(ALL_RUNTIMES), help="comma list of " + ",".join(ALL_RUNTIMES))
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma list of " + ",".join(SCENARIOS))
    p.add_argument("--seed-count", type=int, default=1000, help="notes POSTed before each read run")
    p.add_argument("--startup-runs", type=int, default=15, help="exec-to-first-200 runs per runtime (0 to skip)")
    p.add_argument("--scribe-bin", type=Path, default=default_scribe_bin(), help="scribe-rs binary")
    p.add_argument("--loadgen-bin", type=Path, default=lw.default_loadgen_bin(), help="loadgen binary")
    p.add_argument("--pg-bin", type=Path, default=find_pg_bin(), help="directory with initdb, postgres, psql")
    p.add_argument("--workdir", type=Path, default=None,
                   help="parent of the temp dir for PostgreSQL's data and the logs (default: the system temp dir)")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON path (default bench/results/<UTC timestamp>-notes.json); .md written beside it")
    args = p.parse_args(argv)
    try:
        for d in (args.duration, args.warmup, args.timeout):
            fh.parse_duration(d)
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    args.runtime_list = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    if not args.runtime_list or any(r not in ALL_RUNTIMES for r in args.runtime_list):
        p.error(f"--runtimes: choose from {ALL_RUNTIMES}")
    args.scenario_list = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if not args.scenario_list or any(s not in SCENARIOS for s in args.scenario_list):
        p.error(f"--scenarios: choose from {SCENARIOS}")
    if args.rounds < 1 or args.seed_count < 1:
        p.error("--rounds and --seed-count must be at least 1")
    if args.pg_bin is None or not (args.pg_bin / "postgres").exists():
        p.error("no PostgreSQL server binaries found (apt-get install postgresql, or pass --pg-bin)")
    if not shutil.which("redis-server"):
        p.error("redis-server not found (apt-get install redis-server)")
    if not args.loadgen_bin.exists():
        p.error(f"{args.loadgen_bin} not found; run bench/setup.sh (cargo build --release -p loadgen)")
    if fh.parse_cores(args.server_cores) & fh.parse_cores(args.loader_cores):
        print("warning: server and loader cores overlap; figures will mix server and loader work", file=sys.stderr)
    args.loadgen_bin = args.loadgen_bin.resolve()
    args.scribe_bin = args.scribe_bin.resolve()
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    started = dt.datetime.now(dt.timezone.utc)
    out_json = args.out or BENCH_DIR / "results" / f"{started:%Y%m%dT%H%M%SZ}-notes.json"
    out_md = out_json.with_suffix(".md")
    signal.signal(signal.SIGTERM, fh.on_sigterm)
    # Keep the harness itself (polling, /proc reads, seeding) off the server's core.
    os.sched_setaffinity(0, fh.parse_cores(args.loader_cores))
    log = fh.log

    runtimes = make_runtimes(args.scribe_bin)
    names = list(args.runtime_list)
    scenarios = list(args.scenario_list)
    skipped: dict[str, str] = {}
    aborted: dict[str, str] = {}
    checks: dict[str, dict] = {}
    runs: list[dict] = []
    startup: dict[str, list[float]] = {n: [] for n in names}
    backend_info: dict = {}

    for name in list(names):
        if not runtimes[name].binary().exists():
            skipped[name] = (f"{runtimes[name].binary()} not found -- "
                             + ("scribe-rs is not built (cargo build --release -p scribe, or bench/setup.sh)"
                                if name == "rust" else "run bench/setup.sh (npm ci in bench/peers)"))
            names.remove(name)
            log(f"SKIP {name}: {skipped[name]}")

    workdir = Path(tempfile.mkdtemp(prefix="notes-bench-", dir=args.workdir))
    workdir.chmod(0o711)  # PostgreSQL may run as another user: it must reach its data dir below
    logdir = workdir / "logs"
    backends: Backends | None = None
    try:
        logdir.mkdir()
        (workdir / "backends").mkdir()
        files = {"write_body": logdir / "write-body.json", "write_body_bytes": compact(WRITE_BODY),
                 "read_expected": logdir / "read-expected.json",
                 "read_expected_bytes": compact([expected_row(1, note_body(1))])}
        files["write_body"].write_bytes(files["write_body_bytes"])
        files["read_expected"].write_bytes(files["read_expected_bytes"])
        try:
            backends = Backends(args, workdir / "backends")
            backends.start()
            backend_info = backends.info()
            log(f"backends: postgres :{backends.pg_port} (pid {backends.pg.pid}), redis :{backends.redis_port} "
                f"(pid {backends.redis.pid}), on cores {args.loader_cores}")

            # 1. Same answers from everyone, on the same data, before any timing.
            for name in list(names):
                try:
                    checks[name] = check_runtime(runtimes[name], args, backends, logdir)
                    log(f"check {name}: ok")
                except (fh.Abort, Skip, RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                    aborted[name] = str(e)
                    names.remove(name)
                    log(f"ABORT {e}")

            # 2. Startup, interleaved, against one shared (empty) database.
            if names and args.startup_runs > 0:
                url = backends.createdb("nb_startup")
                for i in range(args.startup_runs):
                    for name in names[i % len(names):] + names[: i % len(names)]:
                        if name in aborted:
                            continue
                        try:
                            startup[name].append(measure_startup(
                                with_backends(runtimes[name], url, backends.redis_url), args, logdir))
                        except fh.Abort as e:
                            aborted[name] = f"startup: {e}"
                            log(f"ABORT {e}")
                backends.dropdb("nb_startup")
                names = [n for n in names if n not in aborted]
                for name in names:
                    if startup[name]:
                        log(f"startup {name}: median {statistics.median(startup[name]):.1f} ms "
                            f"over {len(startup[name])}")

            # 3. Load: rounds outermost, scenarios, then runtimes with the order rotated each round.
            for rd in range(1, args.rounds + 1):
                for sc in scenarios:
                    k = (rd - 1) % len(names) if names else 0
                    for name in names[k:] + names[:k]:
                        run = measure(runtimes[name], sc, rd, args, backends, logdir, files)
                        runs.append(run)
                        if run["void"]:
                            log(f"round {rd} {sc} {name}: VOID ({run['void_reason']})")
                        else:
                            log(f"round {rd} {sc} {name}: {run['req_per_s']:,.0f} req/s, "
                                f"{run['cpu_us_per_response']:.1f} server CPU-µs/resp, "
                                f"{run['postgres_cpu_us_per_response']:.1f} Postgres CPU-µs/resp, "
                                f"server busy {run['server_busy_pct']:.0f}%, loader core busy "
                                f"{run['loader_cores_busy_pct']:.0f}%, p99 {run['p99_us'] / 1000:.2f} ms")
        except KeyboardInterrupt:
            log("interrupted: stopping servers and backends, writing nothing")
            return 130
        except fh.Abort as e:
            log(f"ABORT backends: {e}")
            return 1
        finally:
            lw.Loader.kill_all()
            fh.Server.stop_all()
            if backends is not None:
                backends.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    measured = [n for n in args.runtime_list if n not in aborted and n not in skipped]
    summary = summarize(runs, startup, measured, scenarios)
    machine = fh.machine_info(args)
    machine.pop("wrk_version", None)
    machine["loadgen_version"] = fh.cmd_output([str(args.loadgen_bin), "--version"])
    machine["backends"] = backend_info
    machine["layout"] = {"server_cores": args.server_cores, "loader_cores": args.loader_cores,
                         "postgres_cores": args.loader_cores, "redis_cores": args.loader_cores,
                         "harness_cores": args.loader_cores}
    report = {
        "benchmark": "notes",
        "command": shlex.join([sys.executable, *sys.argv]),
        "cwd": os.getcwd(),
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine,
        "config": {
            "rounds": args.rounds, "duration": args.duration, "warmup": args.warmup,
            "connections": args.connections, "threads": args.threads, "timeout": args.timeout,
            "startup_runs": args.startup_runs, "startup_path": HEALTH_PATH, "seed_count": args.seed_count,
            "scenarios": scenarios, "read_path": READ_PATH, "write_path": f"/{COMPONENT}",
            "write_body": WRITE_BODY, "server_cores": args.server_cores, "loader_cores": args.loader_cores,
            "scribe_bin": str(args.scribe_bin), "loadgen_bin": str(args.loadgen_bin),
            "peer_pool_max": 10, "clock_ticks_per_s": fh.CLK_TCK, "measured": measured,
            "runtimes": {n: {"argv": runtimes[n].argv, "env": runtimes[n].extra_env,
                             "port_env": runtimes[n].port_env} for n in args.runtime_list},
        },
        "checks": checks,
        "skipped": skipped,
        "aborted": aborted,
        "startup_ms": startup,
        "runs": runs,
        "summary": summary,
        "ratios": ratios(runs, summary),
    }
    fh.write_report(out_json, out_md, report, write_markdown)
    # Non-zero when a runtime failed its checks, so scripts notice; a runtime not built is only skipped.
    return 2 if aborted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
