#!/usr/bin/env python3
"""Video-metadata benchmark: metadata-rs against its Bun and Node peers over SQLite, pinned.

Runtimes: rust (target/release/metadata-rs, METADATA_WORKERS=1, RUST_LOG=warn), bun and node
(bench/peers/metadata: one handler module, metadata.mjs, run by Bun.serve over bun:sqlite and by
node:http over node:sqlite). The server under test runs alone on --server-cores (default core 0);
loadgen and this harness on --loader-cores (default core 1), as DESIGN.md's "Measurement rules" ask.

  1. data      `metadata-rs gen-data --rows N --seed 1` once, into a temp dir (and sample_ids.txt);
               plus a small edge-case database this script writes itself.
  2. check     every runtime answers a probe set (20 sample ids x 5 regions, no region, an absent id,
               region=xx, region=bad!value, a malformed id, /healthz, POST -> 405, /nope -> 404) with
               status, content-type and body byte-identical to rust's, or it is void. Also compared
               with an independent Python model of the contract, and run on edge cases (escapes,
               malformed locales, odd regions, methods, a missing database and its recovery): those
               differences are reported, not voiding.
  3. startup   exec -> first 200 on GET /v1/metadata/<first present sample id>, --startup-runs times.
  4. closed    loadgen -c 128 over random (id, region) pairs from sample_ids.txt (about 1% absent
               ids: 404 is expected), after a discarded warmup; req/s, latency, server CPU-us per
               response, server-core busy %, idle and loaded RSS.
  5. open      loadgen -R at half the bun peer's median closed-loop req/s (or --rate), 128
               connections: latency tails corrected for coordinated omission.
  6. db-only   the lookup alone, no HTTP (lookup-bench.mjs under bun and node, metadata-rs
               bench-lookup), pinned to the server core; found/bytes must agree across runtimes.

Runs are interleaved round by round with the order rotated; every measured run gets a fresh
server. JSON (every raw figure) and Markdown (medians, ranges, ratios, targets) land in
bench/results/<UTC stamp>-metadata.{json,md}.

Run it through bench/metadata-bench.sh (which runs bench/setup.sh first), or directly:

    python3 bench/metadata_bench.py --rounds 3 --duration 10s
    python3 bench/metadata_bench.py --quick          # smoke test: 1 round of 2 s, small data

Python 3.11 standard library only. Shares the process and /proc helpers of flight_hello.py and the
loader process handling of loadgen_vs_wrk.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import http.client
import json
import math
import os
import re
import shlex
import shutil
import signal
import sqlite3
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
PEER_DIR = PEERS / "metadata"

ALL_RUNTIMES = ["rust", "bun", "node"]
REGIONS = ["ja", "ko", "zh-TW", "en", "th"]
PATH_TEMPLATE = "/v1/metadata/{id}?region={region}"
HEALTH_PATH = "/healthz"
CONTENT_TYPE = "application/json"
OK_STATUSES = {200, 404}

SETTLE_S = 0.5
READY_TIMEOUT_S = 30.0
LOADER_SLACK_S = 30.0
GEN_TIMEOUT_S = 600.0

# Defaults, and what --quick changes them to (an explicit flag wins over both).
DEFAULTS = {"rounds": 3, "duration": "10s", "warmup": "3s", "rows": 100_000, "startup_runs": 10,
            "lookup_iterations": 2_000_000}
QUICK = {"rounds": 1, "duration": "2s", "warmup": "1s", "rows": 20_000, "startup_runs": 2,
         "lookup_iterations": 20_000}

# The targets metadata-rs is built to meet (rust against the bun peer, and absolute).
TARGETS = [
    ("req/s ≥ 1.5× bun", "closed_req_per_s", "ratio_ge", 1.5),
    ("CPU-µs/resp ≤ 0.5× bun", "closed_cpu_us_per_response", "ratio_le", 0.5),
    ("open-loop p99.9 ≤ 0.5× bun", "open_p99_9_us", "ratio_le", 0.5),
    ("DB-only lookups/s ≥ 2× bun", "lookup_ops_per_sec", "ratio_ge", 2.0),
    ("idle RSS ≤ 12 MiB", "idle_rss_mib", "abs_le", 12.0),
    ("first 200 ≤ 10 ms", "startup_ms", "abs_le", 10.0),
]


log = fh.log


# --------------------------------------------------------------------------------------
# Runtimes and servers
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class MetadataRuntime(fh.Runtime):
    def env(self, port: int) -> dict[str, str]:
        # Nothing metadata-related from the caller's shell (a Redis URL, a worker count, a debug
        # filter) may change what is measured.
        env = {k: v for k, v in os.environ.items() if not k.startswith("METADATA_") and k != "RUST_LOG"}
        env.update(self.extra_env)
        env[self.port_env] = str(port)
        env[self.host_env] = "127.0.0.1"
        return env


def default_metadata_bin() -> Path:
    return fh.default_flight_bin().with_name("metadata-rs")


def make_runtimes(metadata_bin: Path) -> dict[str, MetadataRuntime]:
    js_env = {"NODE_ENV": "production"}
    return {
        "rust": MetadataRuntime("rust", [str(metadata_bin)], "METADATA_PORT", "METADATA_HOSTNAME",
                                {"METADATA_WORKERS": "1", "RUST_LOG": "warn"}),
        "bun": MetadataRuntime("bun", [str(BUN_BIN), "run", str(PEER_DIR / "server-bun.ts")],
                               "METADATA_PORT", "METADATA_HOSTNAME", dict(js_env), PEERS),
        # node:sqlite prints an ExperimentalWarning on first use; it says nothing about the run.
        "node": MetadataRuntime("node", [str(NODE_BIN), "--disable-warning=ExperimentalWarning",
                                         str(PEER_DIR / "server-node.mjs")],
                                "METADATA_PORT", "METADATA_HOSTNAME", dict(js_env), PEERS),
    }


def lookup_argv(name: str, metadata_bin: Path, db: Path, ids: Path, iterations: int, warmup: int) -> list[str]:
    common = ["--db", str(db), "--ids", str(ids), "--iterations", str(iterations), "--warmup", str(warmup)]
    if name == "rust":
        return [str(metadata_bin), "bench-lookup", *common]
    if name == "bun":
        return [str(BUN_BIN), "run", str(PEER_DIR / "lookup-bench.mjs"), *common]
    return [str(NODE_BIN), "--disable-warning=ExperimentalWarning", str(PEER_DIR / "lookup-bench.mjs"), *common]


def with_db(rt: MetadataRuntime, db: Path) -> MetadataRuntime:
    return dataclasses.replace(rt, extra_env={**rt.extra_env, "METADATA_DB": str(db)})


class MetadataServer(fh.Server):
    """flight_hello's pinned server process, ready on the first 200 (or, with any_status, the first
    complete answer of any status) on ready_path."""

    def __init__(self, rt, cores: str, logdir: Path, ready_path: str, any_status: bool = False):
        self.ready_path = ready_path
        self.any_status = any_status
        super().__init__(rt, cores, logdir)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S, poll_s: float = 0.0005) -> float:
        deadline = time.perf_counter() + timeout
        status = None
        while True:
            if self.proc.poll() is not None:
                raise fh.Abort(f"{self.rt.name}: exited with code {self.proc.returncode} before answering"
                               f"{self.log_tail()}")
            try:
                status = fh.http_get(self.port, self.ready_path, timeout=2.0)[0]
            except (OSError, ValueError):
                status = None
            if status == 200 or (self.any_status and status is not None):
                return time.perf_counter() - self.t0
            if time.perf_counter() > deadline:
                raise fh.Abort(f"{self.rt.name}: no 200 on {self.ready_path} within {timeout:.0f}s "
                               f"(last status {status}){self.log_tail()}")
            time.sleep(poll_s)


def start_server(rt: MetadataRuntime, args, logdir: Path, ready_path: str, any_status: bool = False) -> MetadataServer:
    srv = MetadataServer(rt, args.server_cores, logdir, ready_path, any_status)
    try:
        srv.wait_ready()
    except BaseException:
        srv.stop()
        raise
    return srv


# --------------------------------------------------------------------------------------
# Data: the generated dataset, and a small edge-case database
# --------------------------------------------------------------------------------------


def generate(args, workdir: Path) -> dict:
    db, ids = workdir / "metadata.db", workdir / "sample_ids.txt"
    argv = ["taskset", "-c", args.loader_cores, str(args.metadata_bin), "gen-data", "--db", str(db),
            "--ids", str(ids), "--rows", str(args.rows), "--seed", "1"]
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=GEN_TIMEOUT_S, cwd=REPO,
                       env={k: v for k, v in os.environ.items() if not k.startswith("METADATA_")})
    if p.returncode != 0 or not db.exists() or not ids.exists():
        raise fh.Abort(f"gen-data failed ({p.returncode}): {(p.stderr or p.stdout).strip()[-800:]}")
    sample = [line for line in ids.read_text().splitlines() if line]
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT count(*) FROM videos").fetchone()[0]
        present = set()
        for i in range(0, len(sample), 500):
            chunk = sample[i:i + 500]
            present.update(r[0] for r in con.execute(
                f"SELECT id FROM videos WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        journal = con.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        con.close()
    absent = [s for s in sample if s not in present]
    if not sample or len(absent) == len(sample):
        raise fh.Abort(f"gen-data wrote {len(sample)} sample ids, none of them in the database")
    return {"db": db, "ids": ids, "command": shlex.join(argv), "seconds": time.perf_counter() - t0,
            "rows": rows, "db_bytes": db.stat().st_size, "journal_mode": journal, "sample_ids": len(sample),
            "sample_absent": len(absent), "first_present": next(s for s in sample if s in present),
            "first_absent": absent[0] if absent else None, "first20": sample[:20]}


ESC_TEXT = ('q"uote \\back\\slash /sl \n\t\r\b\f \x01\x1f\x7f é 日本語 😀 \u2028\u2029 </script> '
            "\u0085\ufeff")


def edge_rows() -> list[tuple]:
    """(id, channel, duration_s, views, locales) rows for the edge-case checks. No NUL characters:
    node:sqlite cuts TEXT at the first NUL while bun:sqlite and rusqlite keep it (a binding difference,
    not handler logic), and SQLite itself calls such text undefined."""
    j = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    full = {"en": {"title": "T en", "description": "D en"}, "ja": {"title": "タイトル", "description": "説明"}}
    rows = [
        ("esc", 'Chan "q" \\ / é 😀', 3725, 600001,
         j({"en": {"title": ESC_TEXT, "description": "d" + ESC_TEXT}, "ja": {"title": "ラーメン 🍜", "description": "麺"}})),
        ("esc-ascii", "c", 1, 1, json.dumps({"en": {"title": "caf\u00e9 \u2028 😀 \x07", "description": "\\u escapes"}})),
        ("trend", "c", 59, 500001, j({"en": {"title": "t", "description": "d"}, "zh-TW": {"title": "中文", "description": "描述"}})),
        ("views500k", "c", 60, 500000, j(full)),
        ("nulls", None, None, None, j({"en": {}})),
        ("d0", "c", 0, 0, j(full)), ("d3599", "c", 3599, 1, j(full)), ("d3600", "c", 3600, 1, j(full)),
        ("d360000", "c", 360000, 1, j(full)), ("dneg", "c", -5, -7, j(full)), ("dbig", "c", 10**12, 2**52, j(full)),
        ("bad-json", "c", 1, 1, "not json"), ("arr", "c", 1, 1, "[1,2]"), ("null-json", "c", 1, 1, "null"),
        ("num", "c", 1, 1, "5"), ("str", "c", 1, 1, '"x"'), ("locales-null", "c", 1, 1, None),
        ("trailing", "c", 1, 1, '{"en":{}} x'), ("empty-obj", "c", 1, 600000, "{}"),
        ("ws", "c", 1, 1, ' {"en":{"title":"w"}} \n'), ("nan", "c", 1, 1, '{"en":{"title":NaN}}'),
        ("no-en", "c", 1, 900000, j({"ja": {"title": "j", "description": "jd"}})),
        ("odd", "c", 1, 900000, j({"ja": "x", "en": {"title": ["t"], "description": "d", "extra": {"a": [1]}}})),
        ("locale-null", "c", 1, 900000, j({"ja": None, "en": {"title": "e"}})),
        ("dup", "c", 1, 1, '{"en":{"title":"a"},"en":{"title":"b"}}'),
        ("dup-field", "c", 1, 1, '{"en":{"title":"b","title":7,"description":"x","description":"y"}}'),
        ("surrogate", "c", 1, 1, '{"en":{"title":"x\\ud800y","description":"\\ud83d\\ude00"}}'),
        ("deep", "c", 1, 1, '{"ko":' + "[" * 300 + "]" * 300 + ',"en":{"title":"deep"}}'),
        ("bignum", "c", 1, 1, '{"en":{"title":"t","n":1e400,"m":-0,"k":123456789012345678901234567890}}'),
        ("proto", "c", 1, 1, '{"__proto__":{"title":"p"},"constructor":{"title":"c"},"en":{"title":"e"}}'),
        ("views-real", "c", 90.7, 1234.5, j(full)),
        ("long", "c" * 300, 1, 1, j({"en": {"title": "L" * 20000, "description": "é" * 5000}})),
        ("a/b", "c", 1, 1, j(full)), ("a b", "c", 1, 1, j(full)), ("a+b", "c", 1, 1, j(full)),
        ("%41", "c", 1, 1, j(full)), ('x"y', "c", 1, 1, j(full)), ("vidé😀", "c", 1, 1, j(full)),
        ("A-Za-z0-9_-~", "c", 1, 1, j(full)),
    ]
    return rows


# REAL in the INTEGER columns (SQLite keeps 90.7 as REAL there): JS reads a number either way.
LAST_EDGE_ROWS = {"views-real"}


def make_edge_db(path: Path) -> None:
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE videos(id TEXT PRIMARY KEY, channel TEXT, duration_s INTEGER, views INTEGER, "
                    "locales TEXT) WITHOUT ROWID")
        con.executemany("INSERT INTO videos VALUES (?,?,?,?,?)", edge_rows())
        con.commit()
    finally:
        con.close()


# --------------------------------------------------------------------------------------
# The contract in Python: what every runtime must answer (an independent model, for the report)
# --------------------------------------------------------------------------------------

REGION_RE = re.compile(r"[A-Za-z0-9-]{1,35}")
BODY = {
    "not_found": '{"error":"not found"}', "method": '{"error":"method not allowed"}',
    "malformed_id": '{"error":"malformed id"}',
    "bad_region": '{"error":"region must be a language tag like en or zh-TW"}',
    "malformed_stored": '{"error":"stored metadata is malformed"}', "unavailable": '{"error":"database unavailable"}',
    "health_ok": '{"status":"ok","sqlite":"ok","redis":"disabled"}',
    "health_down": '{"status":"unavailable","sqlite":"down","redis":"disabled"}',
}


class URIError(Exception):
    pass


def js_decode_uri_component(s: str) -> str:
    """decodeURIComponent: %XX runs must be well-formed UTF-8 (no overlongs, no surrogates)."""
    out, i = [], 0
    while i < len(s):
        if s[i] != "%":
            out.append(s[i])
            i += 1
            continue
        raw = bytearray()
        while i < len(s) and s[i] == "%":
            h = s[i + 1:i + 3]
            if len(h) != 2 or not all(c in "0123456789abcdefABCDEF" for c in h):
                raise URIError(s)
            raw.append(int(h, 16))
            i += 3
        try:
            out.append(raw.decode("utf-8"))  # strict: what JS accepts, byte run by byte run
        except UnicodeDecodeError as e:
            raise URIError(s) from e
    return "".join(out)


def js_search_param(query: str, name: str) -> str | None:
    """new URLSearchParams(query).get(name)."""
    for part in query.split("&"):
        if not part:
            continue
        k, _, v = part.partition("=")
        dec = lambda t: urllib.parse.unquote(t.replace("+", " "), errors="replace")  # noqa: E731
        if dec(k) == name:
            return dec(v)
    return None


def js_str(s: str) -> str:
    """JSON.stringify of a string (well-formed: lone surrogates escaped)."""
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\b\f\n\r\t":
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif c < 0x20 or 0xD800 <= c <= 0xDFFF:
            out.append(f"\\u{c:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def js_value(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v) if abs(v) <= 2**53 else js_float(float(v))
    if isinstance(v, float):
        return js_float(v)
    if isinstance(v, str):
        return js_str(v)
    raise TypeError(type(v))


def js_float(f: float) -> str:
    if math.isnan(f) or math.isinf(f):
        return "null"
    if f.is_integer() and abs(f) < 1e21:
        return str(int(f))
    return repr(f)  # shortest round-trip, as JS (differs only in exponent spelling, unused here)


def js_number(v) -> float:
    """Number(v) for what SQLite can return."""
    if v is None:
        return 0.0
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v).strip() or "0")
    except ValueError:
        return math.nan


def format_duration(v) -> str:
    n = js_number(v)
    s = 0 if math.isnan(n) else max(0, int(math.trunc(n)) if not math.isinf(n) else 0)
    h, m, sec = s // 3600, s % 3600 // 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h > 0 else f"{m}:{sec:02d}"


def json_parse(text):
    """JSON.parse for a SQLite value: TypeError-free, JS's grammar (no NaN/Infinity literals)."""
    if text is None:
        return None  # JSON.parse(null) parses "null"
    def bad_constant(name):
        raise ValueError(name)
    return json.loads(text if isinstance(text, str) else str(text), parse_constant=bad_constant)


def model_lookup(con, rid: str, region: str | None) -> tuple[int, str, dict]:
    if region in (None, ""):
        region = "en"
    if not REGION_RE.fullmatch(region):
        return 400, BODY["bad_region"], {}
    if con is None:
        return 503, BODY["unavailable"], {"retry-after": "1"}
    try:
        row = con.execute("SELECT channel, duration_s, views, locales FROM videos WHERE id = ?", (rid,)).fetchone()
    except sqlite3.Error:
        return 503, BODY["unavailable"], {"retry-after": "1"}
    if row is None:
        return 404, "null", {}
    channel, duration_s, views, locales_text = row
    try:
        locales = json_parse(locales_text)
    except (ValueError, RecursionError):
        return 500, BODY["malformed_stored"], {}
    if not isinstance(locales, dict):
        return 500, BODY["malformed_stored"], {}
    has = region in locales
    loc = locales[region] if has else locales.get("en")
    title = loc.get("title") if isinstance(loc, dict) and isinstance(loc.get("title"), str) else None
    desc = loc.get("description") if isinstance(loc, dict) and isinstance(loc.get("description"), str) else None
    trending = views is not None and js_number(views) > 500000 and has
    body = ('{"id":' + js_str(rid) + ',"channel":' + js_value(channel) + ',"title":' + js_value(title)
            + ',"description":' + js_value(desc) + ',"duration":' + js_str(format_duration(duration_s))
            + ',"views":' + js_value(views) + ',"trending":' + js_value(trending) + "}")
    return 200, body, {}


def model(con, method: str, target: str) -> tuple[int, str, dict]:
    """(status, body, extra headers) the contract gives for one request; con None = database unavailable."""
    path, q, query = target.partition("?")
    if path.startswith("/v1/metadata/"):
        raw = path[len("/v1/metadata/"):]
        if raw and "/" not in raw:
            if method not in ("GET", "HEAD"):
                return 405, BODY["method"], {"allow": "GET, HEAD"}
            try:
                rid = js_decode_uri_component(raw)
            except URIError:
                return 400, BODY["malformed_id"], {}
            return model_lookup(con, rid, js_search_param(query, "region") if q else None)
        return 404, BODY["not_found"], {}
    if path == HEALTH_PATH:
        if method not in ("GET", "HEAD"):
            return 405, BODY["method"], {"allow": "GET, HEAD"}
        try:
            if con is None:
                raise sqlite3.Error("unavailable")
            con.execute("SELECT 1 FROM videos LIMIT 1").fetchall()
            return 200, BODY["health_ok"], {}
        except sqlite3.Error:
            return 503, BODY["health_down"], {}
    return 404, BODY["not_found"], {}


def open_ro(db: Path | None):
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True) if db is not None and db.exists() else None


# --------------------------------------------------------------------------------------
# Probes: what each runtime answers, compared byte for byte
# --------------------------------------------------------------------------------------


def enc(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def core_probes(data: dict) -> list[tuple[str, str, str]]:
    """(label, method, target): the probe set every runtime must answer exactly as rust does."""
    probes = []
    for sid in data["first20"]:
        for region in REGIONS:
            probes.append((f"{sid} {region}", "GET", f"/v1/metadata/{sid}?region={region}"))
    first = data["first_present"]
    absent = data["first_absent"] or "absent-id-not-in-db"
    probes += [
        (f"{first} no region", "GET", f"/v1/metadata/{first}"),
        ("absent id", "GET", f"/v1/metadata/{absent}?region=en"),
        ("region=xx", "GET", f"/v1/metadata/{first}?region=xx"),
        ("region=bad!value", "GET", f"/v1/metadata/{first}?region=bad!value"),
        ("malformed id", "GET", "/v1/metadata/%E0%A4%A"),
        ("healthz", "GET", HEALTH_PATH),
        ("POST metadata", "POST", f"/v1/metadata/{first}"),
        ("/nope", "GET", "/nope"),
    ]
    return probes


def edge_probes() -> list[tuple[str, str, str]]:
    """Edge cases on the edge database: reported when a runtime differs, not voiding."""
    def row_probes(rid: str) -> list[tuple[str, str, str]]:
        return [(f"{rid!r} {region or 'no region'}", "GET",
                 f"/v1/metadata/{enc(rid)}" + (f"?region={region}" if region else ""))
                for region in (None, "ja", "ko", "zh-TW")]

    # Rows whose column types are unusual go last: a server that treats them as a database failure and
    # reopens its connection would answer the probes right after them with 503s too.
    last = [row[0] for row in edge_rows() if row[0] in LAST_EDGE_ROWS]
    probes = [p for row in edge_rows() if row[0] not in LAST_EDGE_ROWS for p in row_probes(row[0])]
    probes += [
        ("id a+b sent raw", "GET", "/v1/metadata/a+b"),
        ("id with %2F", "GET", "/v1/metadata/a%2Fb?region=en"),
        ("id percent-encoded ASCII", "GET", "/v1/metadata/%74rend?region=en"),
        ("id lower-case hex", "GET", "/v1/metadata/vid%c3%a9%f0%9f%98%80"),
    ]
    q = "/v1/metadata/trend"
    for label, query in [("region=", "region="), ("region (no =)", "region"), ("region=%6Aa", "region=%6Aa"),
                         ("region=zh%2DTW", "region=zh%2DTW"), ("two regions", "region=ja&region=zh-TW"),
                         ("other param first", "x=1&region=zh-TW"), ("empty pairs", "&&region=zh-TW&"),
                         ("REGION=zh-TW", "REGION=zh-TW"), ("%72egion=zh-TW", "%72egion=zh-TW"),
                         ("region=+en", "region=+en"), ("region=en+", "region=en+"),
                         ("region=zh-tw", "region=zh-tw"), ("region=EN", "region=EN"),
                         ("region 35 chars", "region=" + "a" * 35), ("region 36 chars", "region=" + "a" * 36),
                         ("region=%E0", "region=%E0"), ("region=en%0A", "region=en%0A"),
                         ("region=en%00", "region=en%00"), ("region=e_n", "region=e_n"),
                         ("region=constructor", "region=constructor"), ("region=__proto__", "region=__proto__"),
                         ("region=toString", "region=toString"), ("region=%", "region=%"),
                         ("region=%zz", "region=%zz"), ("bare ?", "")]:
        probes.append((f"trend {label}", "GET", f"{q}?{query}"))
    probes += [
        ("region=__proto__ on proto row", "GET", "/v1/metadata/proto?region=__proto__"),
        ("region=constructor on proto row", "GET", "/v1/metadata/proto?region=constructor"),
        ("malformed id and bad region", "GET", "/v1/metadata/%E0%A4%A?region=bad!"),
        ("absent id and bad region", "GET", "/v1/metadata/nope?region=bad!"),
        ("absent id, region=xx", "GET", "/v1/metadata/nope?region=xx"),
        ("%C3 alone", "GET", "/v1/metadata/%C3"), ("surrogate %ED%A0%80", "GET", "/v1/metadata/%ED%A0%80"),
        ("overlong %C0%80", "GET", "/v1/metadata/%C0%80"), ("%ZZ", "GET", "/v1/metadata/%ZZ"),
        ("% at end", "GET", "/v1/metadata/abc%"), ("above U+10FFFF", "GET", "/v1/metadata/%F4%90%80%80"),
        ("/v1/metadata/", "GET", "/v1/metadata/"), ("/v1/metadata/?region=en", "GET", "/v1/metadata/?region=en"),
        ("/v1/metadata", "GET", "/v1/metadata"), ("/v1/metadata/a/b", "GET", "/v1/metadata/a/b"),
        ("/v1/metadata/trend/", "GET", "/v1/metadata/trend/"), ("/v1/metadataX", "GET", "/v1/metadataX"),
        ("/V1/metadata/trend", "GET", "/V1/metadata/trend"), ("/", "GET", "/"),
        ("/healthz/", "GET", "/healthz/"), ("/healthz?x=1", "GET", "/healthz?x=1"),
        ("HEAD metadata", "HEAD", "/v1/metadata/trend?region=zh-TW"), ("HEAD absent", "HEAD", "/v1/metadata/nope"),
        ("HEAD healthz", "HEAD", HEALTH_PATH), ("HEAD /nope", "HEAD", "/nope"),
        ("PUT metadata", "PUT", "/v1/metadata/trend"), ("DELETE metadata", "DELETE", "/v1/metadata/trend"),
        ("OPTIONS metadata", "OPTIONS", "/v1/metadata/trend"), ("PATCH metadata", "PATCH", "/v1/metadata/trend"),
        ("POST malformed id", "POST", "/v1/metadata/%E0%A4%A"), ("POST /nope", "POST", "/nope"),
        ("POST /v1/metadata/", "POST", "/v1/metadata/"),
        # Not settled by the contract (it names GET/HEAD for /healthz, not what other methods get).
        ("POST healthz", "POST", HEALTH_PATH),
    ]
    return probes + [p for rid in last for p in row_probes(rid)]


def request(port: int, method: str, target: str, timeout: float = 5.0) -> dict:
    """One request on a fresh connection; what the checks compare (or the error)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        if method not in ("GET", "HEAD"):
            conn.putheader("Content-Length", "0")
        conn.endheaders()
        r = conn.getresponse()
        body = r.read()
        headers = {k.lower(): v for k, v in r.getheaders()}
    except (OSError, http.client.HTTPException) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        conn.close()
    cl = headers.get("content-length")
    if "transfer-encoding" in headers:
        framing = f"transfer-encoding: {headers['transfer-encoding']}"
    elif cl is None:
        framing = "no content-length"
    elif method != "HEAD" and cl != str(len(body)):
        framing = f"content-length {cl} but {len(body)} body bytes"
    else:
        framing = "content-length"
    out = {"status": r.status, "content_type": headers.get("content-type"), "body": body.decode("utf-8", "replace"),
           "framing": framing}
    if body and not out["body"].encode() == body:
        out["body_hex"] = body.hex()
    for h in ("allow", "retry-after"):
        if h in headers:
            out[h] = headers[h]
    if method == "HEAD":
        out["head_content_length"] = cl
    return out


def expected_answer(con, method: str, target: str) -> dict:
    status, body, extra = model(con, method, target)
    out = {"status": status, "content_type": CONTENT_TYPE, "body": "" if method == "HEAD" else body,
           "framing": "content-length", **extra}
    if method == "HEAD":
        out["head_content_length"] = str(len(body.encode()))
    return out


def describe_difference(got: dict, want: dict) -> str:
    if "error" in got or "error" in want:
        return f"got {got.get('error') or got.get('status')}, want {want.get('error') or want.get('status')}"
    parts = []
    for k in sorted(set(got) | set(want)):
        if k == "body_hex":
            continue
        a, b = got.get(k), want.get(k)
        if a == b:
            continue
        if k == "body" and isinstance(a, str) and isinstance(b, str):
            ab, bb = a.encode(), b.encode()
            i = next((n for n, (x, y) in enumerate(zip(ab, bb)) if x != y), min(len(ab), len(bb)))
            parts.append(f"body differs at byte {i}: got …{ab[max(0, i - 30):i + 40]!r}… "
                         f"want …{bb[max(0, i - 30):i + 40]!r}…")
        else:
            parts.append(f"{k} {a!r} (want {b!r})")
    return "; ".join(parts)


def answers(port: int, probes: list[tuple[str, str, str]]) -> dict[str, dict]:
    return {label: request(port, method, target) for label, method, target in probes}


def compare(mine: dict[str, dict], ref: dict[str, dict], probes) -> list[dict]:
    diffs = []
    for label, method, target in probes:
        a, b = mine.get(label), ref.get(label)
        if a is None or b is None:
            continue
        a2 = {k: v for k, v in a.items() if k != "body_hex"}
        b2 = {k: v for k, v in b.items() if k != "body_hex"}
        if a2 != b2:
            short = lambda x: {k: (v[:500] if isinstance(v, str) else v) for k, v in x.items()}  # noqa: E731
            diffs.append({"probe": label, "request": f"{method} {target}", "how": describe_difference(a2, b2),
                          "got": short(a), "want": short(b)})
    return diffs


def check_phase(names: list[str], runtimes: dict, args, data: dict, edge_db: Path, workdir: Path,
                logdir: Path) -> tuple[dict, dict]:
    """Answers of every runtime on the three probe sets; (per-runtime record, runtimes voided and why)."""
    probes = core_probes(data)
    eprobes = edge_probes()
    con, econ = open_ro(data["db"]), open_ro(edge_db)
    want_core = {label: expected_answer(con, m, t) for label, m, t in probes}
    want_edge = {label: expected_answer(econ, m, t) for label, m, t in eprobes}
    con.close()
    unavailable_probes = [("metadata while missing", "GET", "/v1/metadata/trend?region=zh-TW"),
                          ("healthz while missing", "GET", HEALTH_PATH)]
    recovered_probes = [("metadata after the file appears", "GET", "/v1/metadata/trend?region=zh-TW"),
                        ("healthz after the file appears", "GET", HEALTH_PATH)]
    want_unavail = {label: expected_answer(None, m, t) for label, m, t in unavailable_probes}
    want_recovered = {label: expected_answer(econ, m, t) for label, m, t in recovered_probes}
    econ.close()

    got: dict[str, dict] = {}
    for name in names:
        rec: dict = {}
        got[name] = rec
        rt = runtimes[name]
        # 1. The generated data: the probe set that decides.
        try:
            srv = start_server(with_db(rt, data["db"]), args, logdir, f"/v1/metadata/{data['first_present']}")
            try:
                rec["core"] = answers(srv.port, probes)
                if srv.proc.poll() is not None:
                    rec["core_error"] = f"exited with code {srv.proc.returncode} during the probes"
            finally:
                srv.stop()
        except fh.Abort as e:
            rec["core_error"] = str(e)
        # 2. Edge cases.
        try:
            srv = start_server(with_db(rt, edge_db), args, logdir, "/v1/metadata/trend")
            try:
                rec["edge"] = answers(srv.port, eprobes)
                if srv.proc.poll() is not None:
                    rec["edge_error"] = f"exited with code {srv.proc.returncode} during the probes"
            finally:
                srv.stop()
        except fh.Abort as e:
            rec["edge_error"] = str(e)
        # 3. A database file that does not exist yet, then appears: 503s, then answers within 250 ms.
        late = workdir / f"late-{name}.db"
        try:
            srv = start_server(with_db(rt, late), args, logdir, HEALTH_PATH, any_status=True)
            try:
                rec["unavailable"] = answers(srv.port, unavailable_probes)
                tmp = workdir / f"late-{name}.tmp"
                shutil.copyfile(edge_db, tmp)
                os.replace(tmp, late)  # appears at once, complete
                time.sleep(0.3)
                rec["recovered"] = answers(srv.port, recovered_probes)
                if srv.proc.poll() is not None:
                    rec["unavailable_error"] = f"exited with code {srv.proc.returncode} during the probes"
            finally:
                srv.stop()
        except fh.Abort as e:
            rec["unavailable_error"] = str(e)

    voided: dict[str, str] = {}
    report: dict[str, dict] = {}
    ref = got.get("rust")
    for name in names:
        rec = got[name]
        out: dict = {"errors": {k: v for k, v in rec.items() if k.endswith("_error")}}
        out["core_vs_contract"] = compare(rec.get("core", {}), want_core, probes)
        out["edge_vs_contract"] = compare(rec.get("edge", {}), want_edge, eprobes)
        out["unavailable_vs_contract"] = (compare(rec.get("unavailable", {}), want_unavail, unavailable_probes)
                                          + compare(rec.get("recovered", {}), want_recovered, recovered_probes))
        # Against rust only where rust answered that set (a set rust failed is reported under its errors).
        if name != "rust" and ref is not None:
            if "core" in ref:
                out["core_vs_rust"] = compare(rec.get("core", {}), ref["core"], probes)
            if "edge" in ref:
                out["edge_vs_rust"] = compare(rec.get("edge", {}), ref["edge"], eprobes)
            if "unavailable" in ref:
                out["unavailable_vs_rust"] = (
                    compare(rec.get("unavailable", {}), ref.get("unavailable", {}), unavailable_probes)
                    + compare(rec.get("recovered", {}), ref.get("recovered", {}), recovered_probes))
        if "core_error" in rec:
            voided[name] = f"{name}: {rec['core_error']}"
        elif out.get("core_vs_rust"):
            d = out["core_vs_rust"]
            voided[name] = (f"{name}: {len(d)} of {len(probes)} probes differ from rust's answers; first: "
                            f"{d[0]['probe']} ({d[0]['request']}): {d[0]['how']}")
        elif name != "rust" and "core_vs_rust" not in out and out["core_vs_contract"]:
            # No rust answers to hold the peers to (not measured, or it failed): the contract model decides.
            d = out["core_vs_contract"]
            voided[name] = (f"{name}: {len(d)} of {len(probes)} probes differ from the contract (rust gave no "
                            f"answers to compare with); first: {d[0]['probe']} ({d[0]['request']}): {d[0]['how']}")
        # Rust's answers are the reference: kept whole for the probe set; the differences above carry the rest.
        if name == "rust":
            out["core_answers"] = rec.get("core")
        out["unavailable_answers"] = {**rec.get("unavailable", {}), **rec.get("recovered", {})}
        report[name] = out
    return report, voided


# --------------------------------------------------------------------------------------
# loadgen
# --------------------------------------------------------------------------------------


def expect_status_list_supported(loadgen_bin: Path) -> bool:
    """Whether this loadgen build takes `--expect-status 200,404` (older builds take one code)."""
    out = fh.cmd_output([str(loadgen_bin), "--help"]) or ""
    m = re.search(r"--expect-status[^\n]*\n(.*?)\n\s*-", out, re.S)
    return bool(m and "comma" in m.group(1))


def loadgen_argv(args, port: int, duration: str, json_path: Path, data: dict, rate: float | None) -> list[str]:
    argv = ["taskset", "-c", args.loader_cores, str(args.loadgen_bin), "-t", "1", "-c", str(args.connections),
            "-d", duration, "--warmup", "0s", "--timeout", args.timeout, "--pin", args.loader_cores,
            "--no-progress", "--json", str(json_path),
            "--path", PATH_TEMPLATE, "--var", f"id=@{data['ids']}", "--var", "region=" + ",".join(REGIONS),
            "--pick", "random", "--seed", "1"]
    if args.expect_status_list:
        argv += ["--expect-status", "200,404"]
    if rate is not None:
        argv += ["-R", f"{rate:.0f}"]
    return [*argv, f"http://127.0.0.1:{port}"]


def run_loadgen(args, port: int, duration: str, logdir: Path, tag: str, data: dict, rate: float | None,
                warmup: bool = False) -> dict:
    """One loadgen process reaped with wait4; its figures, and why the run is void if it is."""
    json_path = logdir / f"{tag}.json"
    json_path.unlink(missing_ok=True)
    argv = loadgen_argv(args, port, duration, json_path, data, rate)
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
        status = {int(c): int(n) for c, n in (rep.get("status") or {}).items()}
        n = int(rep["responses"])
        res.update(requests=n, req_per_s=float(rep["req_per_s"]), p50_us=lat["p50_us"], p99_us=lat["p99_us"],
                   p99_9_us=lat["p99_9_us"], max_us=lat["max_us"], latency_corrected=lat.get("corrected"),
                   measured_s=rep.get("duration_s"), errors=rep["errors"], status=status,
                   share_404=status.get(404, 0) / n if n else None, open_loop=rep.get("open_loop"))
        other = {c: k for c, k in status.items() if c not in OK_STATUSES and k}
        if other:
            reasons.append("statuses other than 200/404: " + ", ".join(f"{c}: {k}" for c, k in sorted(other.items())))
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
        if not n and not warmup:
            reasons.append(f"no response completed ({rep.get('in_flight_at_end') or 0} in flight at the end)")
    except (OSError, ValueError, KeyError, TypeError) as e:
        reasons.append(f"unreadable loadgen report: {type(e).__name__}: {e}")
    res["void"] = bool(reasons)
    res["void_reason"] = "; ".join(reasons) or None
    return res


def measure_load(rt: MetadataRuntime, mode: str, rd: int, args, data: dict, logdir: Path,
                 rate: float | None = None) -> dict:
    """Fresh server; idle RSS after its first 200; discarded warmup (same mode); the measured run with the
    server tree's CPU and the server cores' ticks around it; RSS after load."""
    run: dict = {"runtime": rt.name, "mode": mode, "round": rd, "rate": rate, "void": False, "void_reason": None}
    reasons: list[str] = []
    srv = None
    try:
        srv = start_server(with_db(rt, data["db"]), args, logdir, f"/v1/metadata/{data['first_present']}")
        time.sleep(SETTLE_S)
        run["idle_rss_kib"] = fh.tree_rss_kib(srv.pid)
        if fh.parse_duration(args.warmup) > 0:
            warm = run_loadgen(args, srv.port, args.warmup, logdir, f"{mode}-r{rd}-{rt.name}-warm", data, rate,
                               warmup=True)
            run["warmup"] = {k: warm.get(k) for k in ("requests", "req_per_s", "status", "errors", "void_reason")}
            if warm["void"]:
                reasons.append(f"warmup: {warm['void_reason']}")
        server_cores, loader_cores = fh.parse_cores(args.server_cores), fh.parse_cores(args.loader_cores)
        s0, l0 = fh.cores_ticks(server_cores), fh.cores_ticks(loader_cores)
        u0, k0, n0 = fh.tree_cpu_us(srv.pid)
        res = run_loadgen(args, srv.port, args.duration, logdir, f"{mode}-r{rd}-{rt.name}", data, rate)
        u1, k1, n1 = fh.tree_cpu_us(srv.pid)
        s1, l1 = fh.cores_ticks(server_cores), fh.cores_ticks(loader_cores)
        run["loaded_rss_kib"] = fh.tree_rss_kib(srv.pid)
        run["processes_in_tree"] = max(n0, n1)
        run.update(res)
        if res["void"]:
            reasons.append(res["void_reason"])
        n = res.get("requests") or 0
        cpu_us = (u1 + k1) - (u0 + k0)
        run["server_cpu_us"], run["server_user_us"], run["server_sys_us"] = cpu_us, u1 - u0, k1 - k0
        run["cpu_us_per_response"] = cpu_us / n if n else None
        run["user_us_per_response"] = (u1 - u0) / n if n else None
        run["sys_us_per_response"] = (k1 - k0) / n if n else None
        run["server_busy_pct"] = 100.0 * cpu_us / (res["wall_s"] * 1e6) / len(server_cores)
        run["server_cores_busy_pct"] = busy_pct(s0, s1)
        run["server_cores_other_pct"] = max(0.0, run["server_cores_busy_pct"] - run["server_busy_pct"])
        # loadgen (its own CPU from wait4) and whatever else ran there, this harness included.
        run["loader_cores_busy_pct"] = busy_pct(l0, l1)
        run["loadgen_busy_pct"] = (100.0 * res["loader_cpu_s"] / res["wall_s"] / len(loader_cores)
                                   if res.get("loader_cpu_s") is not None else None)
        run["contended"] = run["server_cores_other_pct"] >= 10.0
        # Closed loop below 90% busy: the loader (or the network path) set the pace, not the server.
        run["loader_bound"] = mode == "closed" and run["server_busy_pct"] < 90.0 and not run["contended"]
        if mode == "open" and res.get("open_loop"):
            ol = res["open_loop"]
            run["fell_behind"] = bool(ol.get("missed_sends")) or ol.get("achieved_rate", 0) < 0.97 * ol.get("target_rate", 0)
        if srv.proc.poll() is not None:
            reasons.append(f"server exited with code {srv.proc.returncode} during the run")
    except (fh.Abort, RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
        reasons.append(f"{type(e).__name__}: {e}")
    finally:
        if srv is not None:
            if reasons:
                run["server_log_tail"] = srv.log_tail(30)
            srv.stop()
    run["void"] = bool(reasons)
    run["void_reason"] = "; ".join(reasons) or None
    return run


def busy_pct(a: dict, b: dict) -> float:
    """Share of the cores' time (from fh.cores_ticks snapshots) that was not idle."""
    return 100.0 - 100.0 * (b["idle"] - a["idle"]) / max(1, b["total"] - a["total"])


def measure_startup(rt: MetadataRuntime, args, data: dict, logdir: Path) -> float:
    """Exec to the first 200 on GET /v1/metadata/<first present sample id>, in ms."""
    srv = MetadataServer(with_db(rt, data["db"]), args.server_cores, logdir, f"/v1/metadata/{data['first_present']}")
    try:
        return srv.wait_ready(poll_s=0.0005) * 1000.0
    finally:
        srv.stop()


def measure_lookup(name: str, rd: int, args, data: dict, logdir: Path) -> dict:
    """One DB-only lookup run (no HTTP), pinned to the server cores."""
    warm = max(1, args.lookup_iterations // 10)
    argv = ["taskset", "-c", args.server_cores,
            *lookup_argv(name, args.metadata_bin, data["db"], data["ids"], args.lookup_iterations, warm)]
    run: dict = {"runtime": name, "round": rd, "command": shlex.join(argv), "void": False, "void_reason": None}
    tag = f"lookup-r{rd}-{name}"
    cores = fh.parse_cores(args.server_cores)
    c0 = fh.cores_ticks(cores)
    ld = lw.Loader(argv, logdir / f"{tag}.out", logdir / f"{tag}.err")
    # Generous: a slow runtime at a few tens of thousands of lookups a second, plus start-up.
    proc = ld.wait(60.0 + args.lookup_iterations * 1.1 / 10_000)
    c1 = fh.cores_ticks(cores)
    run.update(returncode=proc["returncode"], wall_s=proc["wall_s"], cpu_s=proc["cpu_s"])
    if proc["cpu_s"] is not None and proc["wall_s"]:
        # Busy time on the cores that was not the lookup process's own: another process took them.
        own = 100.0 * proc["cpu_s"] / proc["wall_s"] / len(cores)
        run["cores_other_pct"] = max(0.0, busy_pct(c0, c1) - own)
        run["contended"] = run["cores_other_pct"] >= 10.0
    out = (logdir / f"{tag}.out").read_text(errors="replace").strip()
    err = (logdir / f"{tag}.err").read_text(errors="replace").strip()
    if err:
        run["stderr"] = err[-1500:]
    try:
        if proc["timed_out"]:
            raise ValueError("still running at the deadline; killed")
        if proc["returncode"] != 0:
            raise ValueError(f"exited {proc['returncode']}: {err[-300:] or out[-300:]}")
        line = json.loads(out.splitlines()[-1])
        run.update(result=line, ops_per_sec=float(line["ops_per_sec"]), found=int(line["found"]),
                   bytes=int(line["bytes"]), seconds=float(line["seconds"]), version=line.get("version"))
        if int(line["iterations"]) != args.lookup_iterations:
            raise ValueError(f"ran {line['iterations']} iterations, asked {args.lookup_iterations}")
    except (ValueError, KeyError, IndexError, TypeError) as e:
        run["void"], run["void_reason"] = True, f"{type(e).__name__}: {e}"
    return run


# --------------------------------------------------------------------------------------
# Summaries, ratios, targets
# --------------------------------------------------------------------------------------

LOAD_METRICS = ["req_per_s", "p50_us", "p99_us", "p99_9_us", "max_us", "cpu_us_per_response",
                "user_us_per_response", "sys_us_per_response", "server_busy_pct", "server_cores_other_pct",
                "loader_cores_busy_pct", "loadgen_busy_pct", "share_404"]


def summarize(runs: list[dict], lookups: list[dict], startup: dict, names: list[str]) -> dict:
    out: dict = {}
    for name in names:
        s: dict = {}
        for mode in ("closed", "open"):
            mine = [r for r in runs if r["runtime"] == name and r["mode"] == mode]
            ok = [r for r in mine if not r["void"]]
            m = {"valid_runs": len(ok), "void_runs": len(mine) - len(ok)}
            for k in LOAD_METRICS:
                m[k] = fh.spread([r.get(k) for r in ok])
            m["idle_rss_mib"] = fh.spread([r["idle_rss_kib"] / 1024 for r in ok if r.get("idle_rss_kib")])
            m["loaded_rss_mib"] = fh.spread([r["loaded_rss_kib"] / 1024 for r in ok if r.get("loaded_rss_kib")])
            m["loader_bound"] = sum(bool(r.get("loader_bound")) for r in ok) * 2 > len(ok) > 0
            m["contended"] = sum(bool(r.get("contended")) for r in ok) * 2 > len(ok) > 0
            m["fell_behind"] = any(r.get("fell_behind") for r in ok)
            s[mode] = m
        lk = [r for r in lookups if r["runtime"] == name]
        s["lookup"] = {"valid_runs": sum(not r["void"] for r in lk), "void_runs": sum(r["void"] for r in lk),
                       "ops_per_sec": fh.spread([r.get("ops_per_sec") for r in lk if not r["void"]]),
                       "contended": sum(bool(r.get("contended")) for r in lk if not r["void"]) * 2
                       > sum(not r["void"] for r in lk) > 0}
        st = startup.get(name) or []
        s["startup_ms"] = ({"median": statistics.median(st), "p90": fh.p90(st), "min": min(st), "max": max(st),
                            "n": len(st)} if st else None)
        # Idle RSS from every load run (closed and open alike: each a fresh server after one request).
        s["idle_rss_mib"] = fh.spread([r["idle_rss_kib"] / 1024 for r in runs
                                       if r["runtime"] == name and not r["void"] and r.get("idle_rss_kib")])
        out[name] = s
    return out


def metric_value(summary: dict, name: str, metric: str) -> float | None:
    s = summary.get(name)
    if not s:
        return None
    v = {
        "closed_req_per_s": s["closed"]["req_per_s"], "closed_cpu_us_per_response": s["closed"]["cpu_us_per_response"],
        "open_p99_9_us": s["open"]["p99_9_us"], "lookup_ops_per_sec": s["lookup"]["ops_per_sec"],
        "idle_rss_mib": s["idle_rss_mib"], "startup_ms": s["startup_ms"],
    }[metric]
    return v["median"] if v else None


def per_round_ratio(runs: list[dict], mode: str, metric: str, num: str, den: str) -> list[float]:
    out = []
    for rd in sorted({r["round"] for r in runs}):
        a = [r for r in runs if (r["round"], r.get("mode", mode), r["runtime"]) == (rd, mode, num) and not r["void"]]
        b = [r for r in runs if (r["round"], r.get("mode", mode), r["runtime"]) == (rd, mode, den) and not r["void"]]
        if a and b and a[0].get(metric) and b[0].get(metric):
            out.append(a[0][metric] / b[0][metric])
    return out


RATIO_METRICS = [  # (key, label, where the per-round figures are, mode, run field)
    ("closed_req_per_s", "req/s (closed loop)", "runs", "closed", "req_per_s"),
    ("closed_cpu_us_per_response", "server CPU-µs/resp", "runs", "closed", "cpu_us_per_response"),
    ("open_p99_9_us", "open-loop p99.9", "runs", "open", "p99_9_us"),
    ("lookup_ops_per_sec", "DB-only lookups/s", "lookups", None, "ops_per_sec"),
    ("idle_rss_mib", "idle RSS", None, None, None),
    ("startup_ms", "first 200 (startup)", None, None, None),
]


def ratios(runs: list[dict], lookups: list[dict], summary: dict) -> dict:
    """rust ÷ bun and rust ÷ node: per interleaved round where there are rounds (median and range),
    and the ratio of the medians."""
    out = {}
    for den in ("bun", "node"):
        for key, _label, where, mode, field in RATIO_METRICS:
            a, b = metric_value(summary, "rust", key), metric_value(summary, den, key)
            r: dict = {"of_medians": a / b if a is not None and b else None}
            if where == "runs":
                pr = per_round_ratio(runs, mode, field, "rust", den)
            elif where == "lookups":
                pr = per_round_ratio(lookups, "lookup", field, "rust", den)
            else:
                pr = []
            if pr:
                r.update(per_round=pr, **fh.spread(pr))
            out[f"{key}_rust_over_{den}"] = r
    return out


def targets(summary: dict, rat: dict) -> list[dict]:
    out = []
    for label, key, kind, bound in TARGETS:
        if kind.startswith("ratio"):
            r = rat.get(f"{key}_rust_over_bun") or {}
            value = r.get("median", r.get("of_medians"))
        else:
            value = metric_value(summary, "rust", key)
        if value is None:
            verdict = "not measured"
        elif kind in ("ratio_ge",):
            verdict = "met" if value >= bound else "missed"
        else:
            verdict = "met" if value <= bound else "missed"
        out.append({"target": label, "metric": key, "value": value, "bound": bound, "kind": kind, "verdict": verdict})
    return out


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def write_markdown(path: Path, report: dict) -> None:
    m, cfg, summ = report["machine"], report["config"], report["summary"]
    fs, f = fh.fmt_spread, fh.fmt
    data = report["data"]
    lines = [
        "# Video-metadata benchmark",
        "",
        f"- command: `{report['command']}`",
        f"- when: {report['started_utc']} (UTC); git {m['git_commit']}{' (dirty)' if m.get('git_dirty') else ''}",
        f"- machine: {m['cpu_model']}, {m['online_cpus']} CPUs; {m['uname']}",
        f"- layout: server on cores {cfg['server_cores']}; loadgen and this harness on cores {cfg['loader_cores']}; "
        f"DB-only lookups on cores {cfg['server_cores']} (SMT siblings: "
        f"{', '.join(f'{k}={v}' for k, v in m['thread_siblings'].items()) or 'unknown'})",
        f"- data: `{data.get('command')}` → {data.get('rows')} rows, {f((data.get('db_bytes') or 0) / 2**20)} MiB, "
        f"journal {data.get('journal_mode')}; {data.get('sample_ids')} sample ids, {data.get('sample_absent')} absent",
        f"- load: {m.get('loadgen_version')}, 1 thread, {cfg['connections']} connections, `{PATH_TEMPLATE}` with random "
        f"ids from sample_ids.txt and regions {','.join(REGIONS)} (seed 1), timeout {cfg['timeout']}; "
        f"{cfg['rounds']} interleaved round(s) of {cfg['duration']} after a discarded {cfg['warmup']} warmup, "
        f"fresh server every run; open loop at {f(cfg.get('open_rate'), 0)} req/s ({cfg.get('open_rate_source')})",
        f"- runtimes: rust {cfg['metadata_bin']} (METADATA_WORKERS=1); bun {m['bun_version']}, node {m['node_version']} "
        f"(bench/peers/metadata, NODE_ENV=production); DB-only: {cfg['lookup_iterations']} lookups after "
        f"{max(1, cfg['lookup_iterations'] // 10)} warmup, per round",
        "",
        "Medians over rounds, (min–max) in brackets. CPU-µs/resp: the server process tree's utime+stime over the "
        "measured window ÷ loadgen's responses (200 and 404 alike). Idle RSS: the tree after its first 200, "
        "every load run.",
        "",
        "## Closed loop",
        "",
        "| runtime | req/s | p50 ms | p99 ms | p99.9 ms | max ms | CPU-µs/resp | user / kernel µs | server busy % "
        "| loader core busy % (loadgen) | idle RSS MiB | loaded RSS MiB | 404 share % | valid/void |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in summ.items():
        c = s["closed"]
        rps = fs(c["req_per_s"], 0) + (" **loader-bound**" if c["loader_bound"] else "") \
            + (" **contended**" if c["contended"] else "")
        uk = (f"{f(c['user_us_per_response']['median'], 1)} / {f(c['sys_us_per_response']['median'], 1)}"
              if c["user_us_per_response"] and c["sys_us_per_response"] else "—")
        lines.append(f"| {name} | {rps} | {fs(c['p50_us'], 3, 1e-3)} | {fs(c['p99_us'], 3, 1e-3)} "
                     f"| {fs(c['p99_9_us'], 3, 1e-3)} | {fs(c['max_us'], 2, 1e-3)} | {fs(c['cpu_us_per_response'], 1)} "
                     f"| {uk} | {fs(c['server_busy_pct'], 0)} | {fs(c['loader_cores_busy_pct'], 0)} "
                     f"({f(c['loadgen_busy_pct']['median'] if c['loadgen_busy_pct'] else None, 0)}) "
                     f"| {fs(c['idle_rss_mib'])} | {fs(c['loaded_rss_mib'])} "
                     f"| {fs(c['share_404'], 2, 100)} | {c['valid_runs']}/{c['void_runs']} |")
    lines += ["", f"## Open loop at {f(cfg.get('open_rate'), 0)} req/s (latency from the intended send time)", "",
              "| runtime | p50 ms | p99 ms | p99.9 ms | max ms | CPU-µs/resp | server busy % | valid/void |",
              "|---|---|---|---|---|---|---|---|"]
    for name, s in summ.items():
        o = s["open"]
        lines.append(f"| {name} | {fs(o['p50_us'], 3, 1e-3)} | {fs(o['p99_us'], 3, 1e-3)} | {fs(o['p99_9_us'], 3, 1e-3)}"
                     f"{' **fell behind**' if o['fell_behind'] else ''}{' **contended**' if o['contended'] else ''} "
                     f"| {fs(o['max_us'], 2, 1e-3)} "
                     f"| {fs(o['cpu_us_per_response'], 1)} | {fs(o['server_busy_pct'], 0)} "
                     f"| {o['valid_runs']}/{o['void_runs']} |")
    lines += ["", "## DB-only lookups and startup", "",
              "| runtime | lookups/s | found / bytes | startup ms median (min–max) | startup runs |",
              "|---|---|---|---|---|"]
    for name, s in summ.items():
        lk = [r for r in report["lookups"] if r["runtime"] == name and not r["void"]]
        fb = f"{lk[0]['found']:,} / {lk[0]['bytes']:,}" if lk else "—"
        st = s["startup_ms"]
        lines.append(f"| {name} | {fs(s['lookup']['ops_per_sec'], 0)}{' **contended**' if s['lookup']['contended'] else ''} "
                     f"| {fb} "
                     f"| {f(st['median']) + ' (' + f(st['min']) + '–' + f(st['max']) + ')' if st else '—'} "
                     f"| {st['n'] if st else 0} |")
    lines += ["", "## Ratios", "",
              "rust ÷ peer. Per interleaved round: median (min–max); the ratio of the medians after the semicolon. "
              "req/s and lookups/s above 1 mean rust is faster; CPU, latency, RSS and startup below 1 mean rust "
              "spends less.", "", "| metric | rust ÷ bun | rust ÷ node |", "|---|---|---|"]
    for key, label, *_ in RATIO_METRICS:
        cells = []
        for den in ("bun", "node"):
            r = report["ratios"].get(f"{key}_rust_over_{den}") or {}
            if r.get("median") is not None:
                cells.append(f"{fs(r, 3)}; {f(r['of_medians'], 3)}")
            elif r.get("of_medians") is not None:
                cells.append(f"{f(r['of_medians'], 3)} (of medians)")
            else:
                cells.append("—")
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    lines += ["", "## Targets", "", "| target | value | verdict |", "|---|---|---|"]
    for t in report["targets"]:
        v = t["value"]
        unit = "×" if t["kind"].startswith("ratio") else (" MiB" if "RSS" in t["target"] else " ms")
        val = "—" if v is None else f"{v:.3f}{unit}" if unit == "×" else f"{v:.1f}{unit}"
        note = ""
        if t["metric"] == "closed_req_per_s" and summ.get("rust", {}).get("closed", {}).get("loader_bound"):
            note = " (rust loader-bound: the ratio understates it)"
        lines.append(f"| {t['target']} | {val} | {t['verdict']}{note} |")
    # Identity.
    lines += ["", "## Identity checks", "",
              f"Probe set ({report['config']['core_probes']} requests on the generated data) compared byte for byte "
              "(status, content-type, body, framing, Allow, Retry-After) with rust's answers; edge cases "
              f"({report['config']['edge_probes']} requests on a database of escapes, malformed locales, odd "
              "regions and ids) and a missing database file that appears later are compared too, but do not void. "
              "'contract' is an independent Python model of the handler contract.", ""]
    for name, c in report["checks"].items():
        parts = []
        for key, label in (("core_vs_rust", "probe set vs rust"), ("core_vs_contract", "probe set vs contract"),
                           ("edge_vs_rust", "edge vs rust"), ("edge_vs_contract", "edge vs contract"),
                           ("unavailable_vs_rust", "missing db vs rust"),
                           ("unavailable_vs_contract", "missing db vs contract")):
            if key in c:
                parts.append(f"{label}: {'identical' if not c[key] else str(len(c[key])) + ' differ'}")
        lines.append(f"- {name}: " + "; ".join(parts)
                     + ("; errors: " + "; ".join(f"{k}: {v.splitlines()[0]}" for k, v in c["errors"].items())
                        if c["errors"] else ""))
        for key in ("core_vs_rust", "core_vs_contract", "edge_vs_rust", "edge_vs_contract", "unavailable_vs_rust",
                    "unavailable_vs_contract"):
            diffs = c.get(key) or []
            for d in diffs[:12]:
                lines.append(f"  - {key.replace('_', ' ')}: `{d['request']}` ({d['probe']}): {d['how'][:300]}")
            if len(diffs) > 12:
                lines.append(f"  - {key.replace('_', ' ')}: … {len(diffs) - 12} more in the JSON")
    lk_check = report.get("lookup_agreement")
    if lk_check:
        lines += ["", f"DB-only found/bytes across runtimes: {lk_check}"]
    if report["skipped"]:
        lines += ["", "## Skipped", ""] + [f"- {k}: {v}" for k, v in report["skipped"].items()]
    if report["aborted"]:
        lines += ["", "## Void runtimes (not timed)", ""]
        for k, v in report["aborted"].items():
            lines += [f"- {k}:", "", "```", v[:3000], "```"]
    voids = [r for r in report["runs"] + report["lookups"] if r["void"]]
    if voids:
        lines += ["", "## Void runs", ""]
        lines += [f"- round {r['round']} {r.get('mode', 'db-only')} {r['runtime']}: {r['void_reason']}" for r in voids]
    if any(s["closed"]["loader_bound"] for s in summ.values()):
        lines += ["", "loader-bound: the server used under 90% of its core, so loadgen (not the server) set the "
                      "req/s; compare CPU-µs/resp instead."]
    if any(s["closed"]["contended"] or s["open"]["contended"] or s["lookup"]["contended"] for s in summ.values()):
        lines += ["", "contended: other processes (or steal) took 10% or more of the server core during most runs "
                      "of that kind; its figures are unreliable (CPU-µs/resp least so). Rerun on a quiet machine."]
    if any(s["open"]["fell_behind"] for s in summ.values()):
        lines += ["", "fell behind: loadgen could not keep the open-loop schedule (missed sends, or under 97% of the "
                      "target rate); that runtime's tail is at least what is shown."]
    lines += ["", "Known runtime differences outside the handler (not probed): Bun's req.url resolves `.`/`..` "
              "path segments (also `%2e`) and turns `\\` into `/` before the handler sees the path; node:sqlite cuts "
              "TEXT at an embedded NUL; integers beyond 2^53 lose precision in Bun and throw in node:sqlite."]
    path.write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--server-cores", default="0", help="taskset list for the server and the DB-only lookups")
    p.add_argument("--loader-cores", default="1", help="taskset list for loadgen, gen-data and this harness")
    p.add_argument("--rounds", type=int, default=None, help=f"interleaved rounds (default {DEFAULTS['rounds']})")
    p.add_argument("--duration", default=None, help=f"measured loadgen duration per run (default {DEFAULTS['duration']})")
    p.add_argument("--warmup", default=None,
                   help=f"discarded loadgen run before each measured one, 0 to skip (default {DEFAULTS['warmup']})")
    p.add_argument("--connections", type=int, default=128)
    p.add_argument("--timeout", default="5s", help="loadgen per-request timeout (a timeout voids the run)")
    p.add_argument("--runtimes", default=",".join(ALL_RUNTIMES), help="comma list of " + ",".join(ALL_RUNTIMES))
    p.add_argument("--rows", type=int, default=None, help=f"rows gen-data writes (default {DEFAULTS['rows']})")
    p.add_argument("--startup-runs", type=int, default=None,
                   help=f"exec-to-first-200 runs per runtime, 0 to skip (default {DEFAULTS['startup_runs']})")
    p.add_argument("--lookup-iterations", type=int, default=None,
                   help=f"DB-only lookups per run, 0 to skip (default {DEFAULTS['lookup_iterations']})")
    p.add_argument("--rate", type=float, default=None,
                   help="open-loop rate, req/s (default: half the bun peer's median closed-loop req/s); 0 skips it")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: " + ", ".join(f"{k.replace('_', '-')} {v}" for k, v in QUICK.items()))
    p.add_argument("--metadata-bin", type=Path, default=default_metadata_bin(), help="metadata-rs binary")
    p.add_argument("--loadgen-bin", type=Path, default=lw.default_loadgen_bin(), help="loadgen binary")
    p.add_argument("--out-dir", type=Path, default=BENCH_DIR / "results",
                   help="where <UTC stamp>-metadata.json and .md are written")
    p.add_argument("--workdir", type=Path, default=None,
                   help="parent of the temp dir for the data and logs (default: the system temp dir)")
    args = p.parse_args(argv)
    base = QUICK if args.quick else DEFAULTS
    for k, v in base.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    try:
        for d in (args.duration, args.warmup, args.timeout):
            fh.parse_duration(d)
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    args.runtime_list = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    if not args.runtime_list or any(r not in ALL_RUNTIMES for r in args.runtime_list):
        p.error(f"--runtimes: choose from {ALL_RUNTIMES}")
    if args.rounds < 1 or args.rows < 1:
        p.error("--rounds and --rows must be at least 1")
    if args.startup_runs < 0 or args.lookup_iterations < 0:
        p.error("--startup-runs and --lookup-iterations cannot be negative")
    args.metadata_bin = args.metadata_bin.resolve()
    args.loadgen_bin = args.loadgen_bin.resolve()
    # gen-data needs metadata-rs even when rust itself is not measured.
    if not args.metadata_bin.exists():
        p.error(f"{args.metadata_bin} not found; run bench/setup.sh (cargo build --release -p metadata)")
    if not args.loadgen_bin.exists():
        p.error(f"{args.loadgen_bin} not found; run bench/setup.sh (cargo build --release -p loadgen)")
    if fh.parse_cores(args.server_cores) & fh.parse_cores(args.loader_cores):
        print("warning: server and loader cores overlap; figures will mix server and loader work", file=sys.stderr)
    return args


def rotated(names: list[str], i: int) -> list[str]:
    k = i % len(names) if names else 0
    return names[k:] + names[:k]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    started = dt.datetime.now(dt.timezone.utc)
    out_json = args.out_dir / f"{started:%Y%m%dT%H%M%SZ}-metadata.json"
    out_md = out_json.with_suffix(".md")
    signal.signal(signal.SIGTERM, fh.on_sigterm)
    # Keep the harness itself (polling, /proc reads) off the server's core.
    os.sched_setaffinity(0, fh.parse_cores(args.loader_cores))
    args.expect_status_list = expect_status_list_supported(args.loadgen_bin)
    if not args.expect_status_list:
        log("note: this loadgen takes one --expect-status code; statuses are checked from its report instead")

    runtimes = make_runtimes(args.metadata_bin)
    names = list(args.runtime_list)
    skipped: dict[str, str] = {}
    aborted: dict[str, str] = {}
    checks: dict = {}
    runs: list[dict] = []
    lookups: list[dict] = []
    startup: dict[str, list[float]] = {n: [] for n in names}
    data: dict = {}
    lookup_agreement = None
    open_rate, open_rate_source = None, None

    for name in list(names):
        if not runtimes[name].binary().exists():
            skipped[name] = f"{runtimes[name].binary()} not found -- run bench/setup.sh"
            names.remove(name)
            log(f"SKIP {name}: {skipped[name]}")

    workdir = Path(tempfile.mkdtemp(prefix="metadata-bench-", dir=args.workdir))
    logdir = workdir / "logs"
    logdir.mkdir()
    try:
        try:
            # 1. Data.
            data = generate(args, workdir)
            log(f"data: {data['rows']} rows ({data['db_bytes'] / 2**20:.1f} MiB, {data['journal_mode']}), "
                f"{data['sample_ids']} sample ids ({data['sample_absent']} absent) in {data['seconds']:.1f}s")
            edge_db = workdir / "edge.db"
            make_edge_db(edge_db)

            # 2. Same answers from everyone before any timing.
            checks, voided = check_phase(names, runtimes, args, data, edge_db, workdir, logdir)
            for name in names:
                c = checks[name]
                if name in voided:
                    aborted[name] = voided[name]
                    log(f"VOID {voided[name]}")
                else:
                    log(f"check {name}: probe set "
                        + ("identical to rust's" if "core_vs_rust" in c else "answered") + "; "
                        f"vs contract: {len(c['core_vs_contract'])} core, {len(c['edge_vs_contract'])} edge, "
                        f"{len(c['unavailable_vs_contract'])} missing-db differences"
                        + (f"; vs rust: {len(c.get('edge_vs_rust') or [])} edge, "
                           f"{len(c.get('unavailable_vs_rust') or [])} missing-db" if "core_vs_rust" in c else ""))
            names = [n for n in names if n not in aborted]

            # 3. Startup, interleaved.
            for i in range(args.startup_runs):
                for name in rotated(names, i):
                    if name in aborted:
                        continue
                    try:
                        startup[name].append(measure_startup(runtimes[name], args, data, logdir))
                    except fh.Abort as e:
                        aborted[name] = f"startup: {e}"
                        log(f"ABORT {e}")
            names = [n for n in names if n not in aborted]
            for name in names:
                if startup[name]:
                    log(f"startup {name}: median {statistics.median(startup[name]):.1f} ms over {len(startup[name])}")

            # 4. Closed loop.
            for rd in range(1, args.rounds + 1):
                for name in rotated(names, rd - 1):
                    run = measure_load(runtimes[name], "closed", rd, args, data, logdir)
                    runs.append(run)
                    if run["void"]:
                        log(f"round {rd} closed {name}: VOID ({run['void_reason']})")
                    else:
                        log(f"round {rd} closed {name}: {run['req_per_s']:,.0f} req/s, "
                            f"{run['cpu_us_per_response']:.1f} CPU-µs/resp, busy {run['server_busy_pct']:.0f}%, "
                            f"p99 {run['p99_us'] / 1000:.2f} ms, 404 {100 * (run['share_404'] or 0):.2f}%")

            # 5. Open loop at half bun's closed-loop rate.
            if args.rate is not None:
                open_rate, open_rate_source = (args.rate or None), "--rate"
            else:
                def med(n):
                    v = [r["req_per_s"] for r in runs if r["runtime"] == n and r["mode"] == "closed" and not r["void"]]
                    return statistics.median(v) if v else None
                if med("bun"):
                    open_rate, open_rate_source = med("bun") / 2, "half the bun peer's median closed-loop req/s"
                else:
                    meds = [m for m in (med(n) for n in names) if m]
                    if meds:
                        open_rate = min(meds) / 2
                        open_rate_source = "half the slowest runtime's median closed-loop req/s (bun not measured)"
            if open_rate:
                log(f"open loop at {open_rate:,.0f} req/s ({open_rate_source})")
                for rd in range(1, args.rounds + 1):
                    for name in rotated(names, rd - 1):
                        run = measure_load(runtimes[name], "open", rd, args, data, logdir, rate=open_rate)
                        runs.append(run)
                        if run["void"]:
                            log(f"round {rd} open {name}: VOID ({run['void_reason']})")
                        else:
                            log(f"round {rd} open {name}: p50 {run['p50_us'] / 1000:.2f} ms, p99 "
                                f"{run['p99_us'] / 1000:.2f} ms, p99.9 {run['p99_9_us'] / 1000:.2f} ms, "
                                f"busy {run['server_busy_pct']:.0f}%"
                                + (" (fell behind)" if run.get("fell_behind") else ""))

            # 6. DB-only lookups, interleaved.
            if args.lookup_iterations > 0:
                for rd in range(1, args.rounds + 1):
                    for name in rotated(names, rd - 1):
                        r = measure_lookup(name, rd, args, data, logdir)
                        lookups.append(r)
                        log(f"round {rd} db-only {name}: " + (f"VOID ({r['void_reason']})" if r["void"] else
                            f"{r['ops_per_sec']:,.0f} lookups/s, found {r['found']}, bytes {r['bytes']}"))
                ok = [r for r in lookups if not r["void"]]
                pairs = {(r["found"], r["bytes"]) for r in ok}
                if len(pairs) > 1:
                    ref = next((r for r in ok if r["runtime"] == "rust"), ok[0])
                    lookup_agreement = "DIFFER: " + ", ".join(
                        sorted({f"{r['runtime']} found {r['found']} bytes {r['bytes']}" for r in ok}))
                    for r in ok:
                        if (r["found"], r["bytes"]) != (ref["found"], ref["bytes"]):
                            r["void"], r["void_reason"] = True, (
                                f"found/bytes {r['found']}/{r['bytes']} differ from {ref['runtime']}'s "
                                f"{ref['found']}/{ref['bytes']}")
                    log(f"db-only: {lookup_agreement}")
                elif pairs:
                    (fd, by), = pairs
                    lookup_agreement = f"identical (found {fd:,}, bytes {by:,} in every valid run)"
        except KeyboardInterrupt:
            log("interrupted: stopping servers, writing nothing")
            return 130
        except fh.Abort as e:
            log(f"ABORT: {e}")
            return 1
        finally:
            lw.Loader.kill_all()
            fh.Server.stop_all()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    measured = [n for n in args.runtime_list if n not in aborted and n not in skipped]
    summary = summarize(runs, lookups, startup, measured)
    rat = ratios(runs, lookups, summary)
    machine = fh.machine_info(args)
    machine.pop("wrk_version", None)
    machine["loadgen_version"] = fh.cmd_output([str(args.loadgen_bin), "--version"])
    machine["layout"] = {"server_cores": args.server_cores, "loader_cores": args.loader_cores,
                         "lookup_cores": args.server_cores, "harness_cores": args.loader_cores}
    report = {
        "benchmark": "metadata",
        "command": shlex.join([sys.executable, *sys.argv]),
        "cwd": os.getcwd(),
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine,
        "config": {
            "rounds": args.rounds, "duration": args.duration, "warmup": args.warmup, "quick": args.quick,
            "connections": args.connections, "timeout": args.timeout, "rows": args.rows,
            "startup_runs": args.startup_runs, "lookup_iterations": args.lookup_iterations,
            "open_rate": open_rate, "open_rate_source": open_rate_source, "path_template": PATH_TEMPLATE,
            "regions": REGIONS, "expect_status_list": args.expect_status_list,
            "server_cores": args.server_cores, "loader_cores": args.loader_cores,
            "metadata_bin": str(args.metadata_bin), "loadgen_bin": str(args.loadgen_bin),
            "clock_ticks_per_s": fh.CLK_TCK, "measured": measured,
            "core_probes": len(core_probes(data)) if data else 0, "edge_probes": len(edge_probes()),
            "runtimes": {n: {"argv": runtimes[n].argv, "env": runtimes[n].extra_env} for n in args.runtime_list},
        },
        "data": {k: (str(v) if isinstance(v, Path) else v) for k, v in data.items()},
        "checks": checks,
        "skipped": skipped,
        "aborted": aborted,
        "startup_ms": startup,
        "runs": runs,
        "lookups": lookups,
        "lookup_agreement": lookup_agreement,
        "summary": summary,
        "ratios": rat,
        "targets": targets(summary, rat),
    }
    fh.write_report(out_json, out_md, report, write_markdown)
    # Non-zero when a runtime failed its checks, so scripts notice; a runtime not built is only skipped.
    return 2 if aborted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
