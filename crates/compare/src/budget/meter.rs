//! One budget cell measured: a server's user-space instructions per response under callgrind, and its system
//! calls per response under `strace -c -f`, each in a server of its own started as the comparison starts it
//! (same binary, flags, environment, databases and data). Or, for the loadgen cell, loadgen's own
//! instructions and system calls per request while it loads the workload's rust server.
//!
//! The load is one connection, closed loop: every response then costs the server the same wake-up, read and
//! write, so the figures do not depend on how many requests one `epoll_wait` happened to return, which
//! moves with timing. The warmup (connections, allocator, lazy statics, caches) is outside the window:
//! callgrind's counters are zeroed after it, and strace attaches after it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::budget::callgrind::{self, Profile};
use crate::budget::file::Cell;
use crate::budget::syscalls::{self, SyscallCounts};
use crate::plan::load_spec::LoadSpec;
use crate::plan::runtimes::Runtime;
use crate::run::loader::{self, LoadgenRun};
use crate::run::server::{Server, start_ready};
use crate::run::setup::Bench;
use crate::run::workload_run::{Purpose, WorkloadRun};

/// Connections of every budget load (see the module's note).
pub const CONNECTIONS: u32 = 1;
/// The discarded warmup before each window.
pub const WARMUP: Duration = Duration::from_secs(1);
/// The measured window: a few thousand responses even under callgrind's slowdown.
pub const WINDOW: Duration = Duration::from_secs(2);

/// The function loadgen's worker threads spend their run in: callgrind counts inside it only, so the cell
/// is loadgen's cost per request and not its start (argument parsing, thread and ring setup).
const LOADGEN_LOOP: &str = "loadgen::worker::Worker*::event_loop*";

/// What one measurement of a cell found.
#[derive(Debug, Clone)]
pub struct Instructions {
    pub responses: u64,
    pub profile: Profile,
}

impl Instructions {
    /// The figure the gate judges: instructions per response outside the allocator. Inside it (glibc's
    /// malloc) the count follows the heap's state, not the code: which frees consolidate, which chunk a
    /// request splits. Two runs of one binary differed by 1.4% there and 0.05% outside it
    /// (bench/results/20261206T0240Z); [`Self::allocations_per_response`] gates the allocator instead.
    pub fn per_response(&self) -> f64 {
        self.profile.total.saturating_sub(self.profile.allocator) as f64 / self.responses()
    }

    /// Allocating calls per response (malloc, calloc, realloc, the aligned ones), which do not move with
    /// the heap's state.
    pub fn allocations_per_response(&self) -> f64 {
        self.profile.allocation_count() as f64 / self.responses()
    }

    /// Instructions per response inside the allocator: reported, not judged.
    pub fn allocator_per_response(&self) -> f64 {
        self.profile.allocator as f64 / self.responses()
    }

    fn responses(&self) -> f64 {
        self.responses.max(1) as f64
    }
}

#[derive(Debug, Clone)]
pub struct Syscalls {
    pub responses: u64,
    pub counts: SyscallCounts,
}

impl Syscalls {
    pub fn per_response(&self) -> f64 {
        self.counts.total() as f64 / self.responses.max(1) as f64
    }
}

/// The cell's load: the workload's own requests and checks, over one connection.
fn load(wr: &WorkloadRun<'_>) -> LoadSpec {
    LoadSpec { connections: CONNECTIONS, ..wr.plan.load.clone() }
}

/// Instructions per response (or per request, for loadgen), one measurement; `dir` keeps the dumps.
pub fn instructions(wr: &WorkloadRun<'_>, cell: &Cell, dir: &Path, tag: &str) -> anyhow::Result<Instructions> {
    let out = dir.join(format!("{tag}.callgrind"));
    if cell.is_loadgen() {
        let mut server = start(wr, None)?;
        let wrapper = vec![
            "valgrind".into(),
            "--tool=callgrind".into(),
            format!("--callgrind-out-file={}", out.display()),
            "--collect-atstart=no".into(),
            format!("--toggle-collect={LOADGEN_LOOP}"),
        ];
        let bench = Bench { loadgen_wrapper: wrapper, ..wr.bench.clone() };
        let run = measured(&bench, &mut server, wr, tag);
        server.stop();
        let responses = responses(&run?)?;
        return Ok(Instructions { responses, profile: callgrind::read(&out)? });
    }
    let vgdb = dir.join(format!("{tag}.vgdb"));
    let valgrind = vec![
        "--tool=callgrind".to_string(),
        format!("--callgrind-out-file={}", out.display()),
        format!("--vgdb-prefix={}", vgdb.display()),
    ];
    let mut server = start(wr, Some(valgrind))?;
    let result = (|| {
        let pid = server.pid().context("no pid")?;
        warm(wr, &mut server, tag)?;
        callgrind_control(&vgdb, "-z", pid)?;
        let run = measured(wr.bench, &mut server, wr, tag)?;
        callgrind_control(&vgdb, "-d", pid)?;
        anyhow::Ok(run)
    })();
    server.stop();
    let responses = responses(&result?)?;
    // `-d` writes the window as dump 1; the server's exit writes what came after it to `out` itself.
    let dump = PathBuf::from(format!("{}.1", out.display()));
    Ok(Instructions { responses, profile: callgrind::read(&dump)? })
}

/// System calls per response (or per request, for loadgen), one measurement.
pub fn syscalls(wr: &WorkloadRun<'_>, cell: &Cell, dir: &Path, tag: &str) -> anyhow::Result<Syscalls> {
    let out = dir.join(format!("{tag}.strace"));
    let mut server = start(wr, None)?;
    let result = (|| {
        if cell.is_loadgen() {
            // loadgen's whole life, start included: a few hundred calls over thousands of requests.
            let wrapper = ["strace", "-f", "-c", "-o"].map(String::from).into_iter();
            let bench =
                Bench { loadgen_wrapper: wrapper.chain([out.display().to_string()]).collect(), ..wr.bench.clone() };
            return measured(&bench, &mut server, wr, tag);
        }
        warm(wr, &mut server, tag)?;
        let pid = server.pid().context("no pid")?;
        let mut strace = Command::new("strace")
            .args(["-f", "-c", "-o"])
            .arg(&out)
            .args(["-p", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting strace (Debian: apt-get install strace)")?;
        let run = attached(pid, Duration::from_secs(10)).and_then(|()| measured(wr.bench, &mut server, wr, tag));
        // SIGINT: strace detaches and writes its table.
        if let Some(p) = rustix::process::Pid::from_raw(strace.id() as i32) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::INT);
        }
        let status = strace.wait().context("waiting for strace")?;
        let run = run?;
        if !status.success() && !out.is_file() {
            bail!("strace exited {status} and wrote nothing");
        }
        Ok(run)
    })();
    server.stop();
    let responses = responses(&result?)?;
    let text = std::fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()))?;
    let counts = syscalls::parse(&text).with_context(|| format!("{}", out.display()))?;
    Ok(Syscalls { responses, counts })
}

/// The workload's rust server, started as the comparison starts it (under `valgrind ARGS` when given) and
/// answering.
fn start(wr: &WorkloadRun<'_>, valgrind: Option<Vec<String>>) -> anyhow::Result<Server> {
    let mut spec = wr.spec(Runtime::Rust, Purpose::Run)?;
    if let Some(mut args) = valgrind {
        args.push(spec.program.display().to_string());
        args.append(&mut spec.args);
        spec.args = args;
        spec.program = PathBuf::from("valgrind");
    }
    let (server, _) = start_ready(&spec, wr.bench, &wr.plan.ready_path)?;
    Ok(server)
}

fn warm(wr: &WorkloadRun<'_>, server: &mut Server, tag: &str) -> anyhow::Result<()> {
    let run = loader::run(wr.bench, server.port, &load(wr), WARMUP, None, &format!("{tag}-warmup"))?;
    let reasons = loader::void_reasons(&run, wr.workload().also_ok(), true);
    if !reasons.is_empty() {
        bail!("the warmup failed: {}", reasons.join("; "));
    }
    Ok(())
}

/// The measured window: loadgen's run, which must have failed no request.
fn measured(bench: &Bench, server: &mut Server, wr: &WorkloadRun<'_>, tag: &str) -> anyhow::Result<LoadgenRun> {
    let run = loader::run(bench, server.port, &load(wr), WINDOW, None, tag)?;
    let reasons = loader::void_reasons(&run, wr.workload().also_ok(), false);
    if !reasons.is_empty() {
        bail!("the measured window failed: {}{}", reasons.join("; "), server.log_tail(8));
    }
    Ok(run)
}

fn responses(run: &LoadgenRun) -> anyhow::Result<u64> {
    let report = run.report.as_ref().context("no loadgen report")?;
    if report.responses == 0 {
        bail!("no response in the window");
    }
    Ok(report.responses)
}

/// `callgrind_control OP PID` through the server's own vgdb prefix.
fn callgrind_control(vgdb: &Path, op: &str, pid: u32) -> anyhow::Result<()> {
    let out = Command::new("callgrind_control")
        .arg(format!("--vgdb-prefix={}", vgdb.display()))
        .arg(op)
        .arg(pid.to_string())
        .output()
        .context("running callgrind_control (Debian: apt-get install valgrind)")?;
    if !out.status.success() {
        bail!("callgrind_control {op} {pid}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Waits until every thread of `pid` is traced: strace -p returns before it has attached to them all.
fn attached(pid: u32, limit: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).with_context(|| format!("process {pid}"))?;
        let all = tasks.flatten().all(|t| {
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            status.lines().any(|l| l.starts_with("TracerPid:") && l.split_whitespace().nth(1) != Some("0"))
        });
        if all {
            return Ok(());
        }
        if started.elapsed() > limit {
            bail!("strace did not attach to every thread of {pid} within {limit:?} (is ptrace allowed here?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
