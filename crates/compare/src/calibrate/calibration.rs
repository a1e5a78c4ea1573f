//! A calibration's results (loadgen and the reference loader, wrk or h2load, on the same servers) and the
//! Markdown that shows them: the layout, every run, the agreement verdict per server and overall, and each
//! loader's efficiency.

use std::fmt::Write as _;
use std::time::Duration;

use crate::calibrate::agreement::{AGREE_PCT, Loader, ServerResult, disagrees, exit_code};
use crate::format::shell_join;
use crate::records;
use crate::stats::median;
use crate::table::Table;

/// Everything the Markdown shows.
#[derive(Debug, Clone)]
pub struct Calibration {
    pub command: Vec<String>,
    pub started_at: String,
    pub machine: records::Machine,
    /// wrk, or h2load with --http2.
    pub reference: Loader,
    pub reference_version: String,
    pub loadgen_version: String,
    /// Streams per connection over HTTP/2; None over HTTP/1.1.
    pub streams: Option<u32>,
    /// Over TLS 1.3 (the run's own certificate).
    pub tls: bool,
    /// The request headers both loaders send beyond Host (or the pseudo-headers), `Name: value`.
    pub request_headers: Vec<String>,
    pub server_cores: String,
    pub loader_cores: String,
    pub threads: usize,
    pub connections: u32,
    pub runs: u32,
    pub duration: Duration,
    pub warmup: Duration,
    /// Both loaders' per-request timeout.
    pub request_timeout: Duration,
    /// The path both loaders load.
    pub path: &'static str,
    pub results: Vec<ServerResult>,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".to_string(), |x| format!("{x:.digits$}"))
}

/// What loadgen's requests per loader CPU-second should reach against wrk's on a loader-bound server (the
/// floor): the target of the io_uring engine's issue, printed beside the measured ratio. Against h2load no
/// target was set: the ratio is printed as measured.
pub const EFFICIENCY_TARGET: f64 = 1.4;

/// The Markdown summary.
pub fn render(c: &Calibration) -> String {
    let mut s = String::new();
    let m = &c.machine;
    let reference = c.reference.name();
    let _ = writeln!(s, "# loadgen vs {reference} calibration\n");
    let _ = writeln!(s, "- command: `{}`", shell_join(&c.command));
    let _ = writeln!(s, "- when: {} (UTC)", c.started_at);
    let _ = writeln!(s, "- machine: {m}");
    let _ = writeln!(s, "- loaders: {}; {}", c.reference_version, c.loadgen_version);
    let protocol = match (c.streams, c.tls) {
        (Some(n), true) => format!("HTTP/2 over TLS 1.3 (ALPN h2), {n} streams per connection"),
        (Some(n), false) => format!("HTTP/2 by prior knowledge (h2c), {n} streams per connection"),
        (None, true) => "HTTP/1.1 over TLS 1.3".to_string(),
        (None, false) => "HTTP/1.1".to_string(),
    };
    let headers = if c.request_headers.is_empty() {
        "no request header beyond Host".to_string()
    } else {
        format!("request headers `{}` from both", c.request_headers.join("`, `"))
    };
    let _ = writeln!(
        s,
        "- layout: servers on cores {}, both loaders (and compare) on cores {} (taskset); {} thread(s), {} connections, \
         {protocol}, closed loop, GET {}, {headers}; loadgen's request timeout {}s{}",
        c.server_cores,
        c.loader_cores,
        c.threads,
        c.connections,
        c.path,
        c.request_timeout.as_secs(),
        match c.reference {
            Loader::H2load => " (h2load has no per-request timeout)",
            _ => ", wrk's the same",
        }
    );
    let _ = writeln!(
        s,
        "- method: per server one start; a discarded {}s warmup by each loader; then {} round(s) of {}s per loader, \
         the order rotated by one each round (loadgen, {reference}, loadgen-epoll; then loadgen-epoll, loadgen, \
         {reference}; …), all on that same warmed server; `loadgen` is its default engine, `loadgen-epoll` is \
         `--engine epoll`",
        c.warmup.as_secs(),
        c.runs,
        c.duration.as_secs()
    );
    for r in &c.results {
        if !r.loadgen_argv.is_empty() {
            let _ = writeln!(s, "- {} loadgen: `{}`", r.server.name(), shell_join(&r.loadgen_argv));
        }
        if !r.epoll_argv.is_empty() {
            let _ = writeln!(s, "- {} loadgen-epoll: `{}`", r.server.name(), shell_join(&r.epoll_argv));
        }
        if !r.reference_argv.is_empty() {
            let _ = writeln!(s, "- {} {reference}: `{}`", r.server.name(), shell_join(&r.reference_argv));
        }
        if let Some(engine) = &r.loadgen_engine {
            let _ = writeln!(s, "- {} loadgen's default engine was {engine}", r.server.name());
        }
    }

    let _ = writeln!(s, "\n## Runs\n");
    s.push_str(&runs_table(c));
    let _ = writeln!(s, "\n## Verdict\n");
    let _ = writeln!(
        s,
        "Judged on throughput only: loadgen ÷ {reference} req/s, the median of the per-round ratios (each round's two runs \
         are back to back on the same server, in rotating order), `agree` when within ±{AGREE_PCT}%, `disagree` when \
         not and every round's ratio is on the same side of 1, `inconclusive` when not but the rounds fall on both \
         sides (the server's own variation is wider than the difference: more or longer rounds can settle it); a server \
         whose cores were under {:.0}% busy with either loader is `loader-bound` and not judged, since there the req/s \
         are the loaders' own speed. \
         Latencies are printed, not judged: both loaders run closed loop here, so both leave out the time a request \
         would have waited behind a slow one (coordinated omission), and each times requests its own way ({}; \
         loadgen from HDR histograms from its own write).\n",
        crate::run::setup::LOADER_BOUND_PCT,
        match c.reference {
            Loader::H2load => "h2load prints a mean, no percentiles: its p50 and p99 cells are empty",
            _ => "wrk from its per-thread histogram",
        }
    );
    let (table, lines) = verdict_table(c);
    s.push_str(&table);
    let _ = writeln!(s);
    for l in &lines {
        let _ = writeln!(s, "{l}");
    }
    let overall = overall(c);
    let _ = writeln!(s, "\n**Verdict: {overall}.**");
    let _ = writeln!(
        s,
        "\nServer CPU per response is the server tree's utime+stime over each loader's run (/proc) divided by the \
         responses that loader counted: the same work per response under both loaders is expected; a loader with \
         equal CPU per response but fewer req/s left the server idle."
    );
    render_efficiency(&mut s, c);
    s
}

/// Every run of every server, one row each.
fn runs_table(c: &Calibration) -> String {
    let mut table = Table::new([
        "server",
        "round",
        "loader",
        "req/s",
        "responses",
        "p50 ms",
        "p99 ms",
        "mean ms",
        "server CPU µs/resp",
        "server cores busy %",
        "loader cores busy %",
        "loader CPU µs/resp",
        "responses per loader CPU-s",
    ]);
    for r in &c.results {
        for run in &r.runs {
            table.row([
                r.server.name().to_string(),
                run.round.to_string(),
                run.loader.name().to_string(),
                format!("{:.0}", run.req_per_s),
                run.requests.to_string(),
                opt(run.p50_us.map(|us| us / 1e3), 3),
                opt(run.p99_us.map(|us| us / 1e3), 3),
                opt(run.mean_us.map(|us| us / 1e3), 3),
                opt(run.server_cpu_us_per_resp, 2),
                format!("{:.0}", run.server_busy_pct),
                format!("{:.0}", run.loader_busy_pct),
                opt(run.loader_cpu_us.filter(|_| run.requests > 0).map(|us| us / run.requests as f64), 2),
                opt(run.per_loader_cpu_s(), 0),
            ]);
        }
    }
    table.finish()
}

/// The verdict per server: the table, and the lines under it that say why.
fn verdict_table(c: &Calibration) -> (String, Vec<String>) {
    let reference = c.reference.name();
    let mut table = Table::new([
        "server".to_string(),
        "version".to_string(),
        "loadgen req/s".to_string(),
        format!("{reference} req/s"),
        format!("loadgen ÷ {reference}"),
        "per round".to_string(),
        format!("server CPU µs/resp loadgen / {reference}"),
        "verdict".to_string(),
    ]);
    let mut lines = Vec::new();
    for r in &c.results {
        let cpu = |l: Loader| median(r.values(l, |x| x.server_cpu_us_per_resp));
        let rounds = r.round_ratios();
        let spread = match (rounds.iter().copied().reduce(f64::min), rounds.iter().copied().reduce(f64::max)) {
            (Some(lo), Some(hi)) => format!("{lo:.3}–{hi:.3}"),
            _ => "–".to_string(),
        };
        let v = r.verdict();
        let word = match (&r.failure, v) {
            (Some(_), _) | (None, None) => "failed",
            (None, Some(v)) if v.loader_bound => "loader-bound",
            (None, Some(v)) if v.agree => "agree",
            (None, Some(v)) if v.inconclusive => "inconclusive",
            (None, Some(_)) => "disagree",
        };
        table.row([
            r.server.name().to_string(),
            r.version.as_deref().unwrap_or("unknown").to_string(),
            opt(v.map(|v| v.loadgen_req_per_s), 0),
            opt(v.map(|v| v.reference_req_per_s), 0),
            opt(v.map(|v| v.ratio), 3),
            spread,
            format!("{} / {}", opt(cpu(Loader::Loadgen), 2), opt(cpu(c.reference), 2)),
            word.to_string(),
        ]);
        lines.extend(verdict_lines(r, word));
    }
    (table.finish(), lines)
}

/// Why a server got its verdict, as list lines.
fn verdict_lines(r: &ServerResult, word: &str) -> Vec<String> {
    let mut lines = Vec::new();
    match (&r.failure, r.verdict()) {
        (Some(why), _) => lines.push(format!("- {}: **failed**: {why}", r.server.name())),
        (None, None) => lines.push(format!("- {}: **failed**: no run of both loaders", r.server.name())),
        (None, Some(v)) => {
            let reference = r.reference.name();
            let pct = (v.ratio - 1.0) * 100.0;
            let within = if v.agree { "within" } else { "outside" };
            lines.push(format!(
                "- {}: **{word}** (loadgen ÷ {reference} = {:.3}, {pct:+.1}%, {within} ±{AGREE_PCT}%)",
                r.server.name(),
                v.ratio
            ));
            let idle: Vec<&str> = r.idle_under().into_iter().map(Loader::name).collect();
            if !idle.is_empty() {
                lines.push(format!(
                    "  - the server cores were under {:.0}% busy with {}: the loader, not the server, set the pace \
                     there, so the req/s compare the loaders' own speed (loadgen ÷ {reference} = {:.3}) rather than their \
                     measurement of the server; not judged",
                    crate::run::setup::LOADER_BOUND_PCT,
                    idle.join(" and "),
                    v.ratio
                ));
            }
        }
    }
    lines
}

/// The overall verdict, one sentence.
fn overall(c: &Calibration) -> String {
    let reference = c.reference.name();
    match exit_code(&c.results) {
        0 => {
            let bound: Vec<&str> = c
                .results
                .iter()
                .filter(|r| r.verdict().is_some_and(|v| v.loader_bound))
                .map(|r| r.server.name())
                .collect();
            let except = if bound.is_empty() {
                String::new()
            } else {
                format!(" ({} loader-bound: not judged)", bound.join(", "))
            };
            format!(
                "loadgen and {reference} agree within ±{AGREE_PCT}% on every server they could be judged on{except}"
            )
        }
        1 => {
            let which: Vec<&str> = c
                .results
                .iter()
                .filter(|r| r.verdict().is_some_and(|v| disagrees(&v)))
                .map(|r| r.server.name())
                .collect();
            let unsure: Vec<&str> = c
                .results
                .iter()
                .filter(|r| r.verdict().is_some_and(|v| v.inconclusive && !v.loader_bound))
                .map(|r| r.server.name())
                .collect();
            match (which.is_empty(), unsure.is_empty()) {
                (false, true) => {
                    format!("loadgen and {reference} disagree by more than {AGREE_PCT}% on {}", which.join(", "))
                }
                (true, _) => format!(
                    "agreement within ±{AGREE_PCT}% not shown on {}: the server varied more between rounds than the \
                     loaders differ (rerun with more --runs or a longer --duration)",
                    unsure.join(", ")
                ),
                (false, false) => format!(
                    "loadgen and {reference} disagree by more than {AGREE_PCT}% on {}; inconclusive on {}",
                    which.join(", "),
                    unsure.join(", ")
                ),
            }
        }
        _ => "incomplete: a run failed or every server was loader-bound (see above), so agreement is not established"
            .to_string(),
    }
}

/// Each loader's responses per CPU-second of its own process, and loadgen's over the reference's per round.
fn render_efficiency(s: &mut String, c: &Calibration) {
    let reference = c.reference.name();
    let _ = writeln!(s, "\n## Loader efficiency\n");
    let target = match (c.reference, c.tls) {
        (Loader::H2load, _) | (_, true) => {
            format!("no target is set against {reference} here: below 1, loadgen spends more per response")
        }
        _ => format!(
            "on a server that outruns the loaders (the floor), this is the loader's own cost per request; the \
             target for loadgen is ≥ {EFFICIENCY_TARGET}× wrk there"
        ),
    };
    let _ = writeln!(
        s,
        "Responses per loader CPU-second: each run's responses over the loader process's own CPU time (user + \
         system, every thread, as /proc had it when the process exited: what `wait4` reports), the same for \
         every loader; the ratios are per round against {reference}'s run in that round, then the median; \
         {target}.\n"
    );
    let mut table = Table::new([
        "server".to_string(),
        "loadgen resp/CPU-s".to_string(),
        "loadgen-epoll resp/CPU-s".to_string(),
        format!("{reference} resp/CPU-s"),
        format!("loadgen ÷ {reference} (rounds)"),
        format!("loadgen-epoll ÷ {reference} (rounds)"),
    ]);
    for r in &c.results {
        let per = |l: Loader| median(r.values(l, |x| x.per_loader_cpu_s()));
        let ratio = |l: Loader| {
            let rounds = r.efficiency_ratios(l);
            match (
                median(rounds.iter().copied()),
                rounds.iter().copied().reduce(f64::min),
                rounds.iter().copied().reduce(f64::max),
            ) {
                (Some(m), Some(lo), Some(hi)) => format!("{m:.3} ({lo:.3}–{hi:.3})"),
                _ => "–".to_string(),
            }
        };
        table.row([
            r.server.name().to_string(),
            opt(per(Loader::Loadgen), 0),
            opt(per(Loader::LoadgenEpoll), 0),
            opt(per(c.reference), 0),
            ratio(Loader::Loadgen),
            ratio(Loader::LoadgenEpoll),
        ]);
    }
    s.push_str(&table.finish());
}
