//! compare's children (servers, loadgen), each started in its own process group and registered while it
//! lives, so an error, a panic or Ctrl-C/SIGTERM kills every one of them and whatever they spawned (a Node
//! cluster's workers, a shell's background job), by process group and only those groups.
//!
//! Why process groups: a server's tree is ours to clean up even when its leader exits first, and a terminal
//! Ctrl-C goes to the terminal's foreground group, so it reaches compare and not the servers: compare stops
//! them itself, in order, and records nothing half-measured.
//!
//! When compare cannot clean up (SIGKILL, the OOM killer, an abort), the reaper does: a second compare
//! process (`compare reap`, started first, in a group of its own) that compare tells every group it starts
//! and reaps over a pipe. When compare dies, however it dies, the kernel closes the pipe, and the reaper kills
//! every group still listed. Not `PR_SET_PDEATHSIG`: it reaches only the direct child, not a Node cluster's
//! workers or PostgreSQL's backends, and it fires when the spawning *thread* exits, not the process.

use std::collections::BTreeSet;
use std::io::{self, BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use crate::system::cores::Cores;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group};

/// Process groups (the leader's pid) of children not yet reaped, and the pipe to the reaper that mirrors
/// them. A pid stays ours until it is reaped, and reaping happens under this lock, so the signal thread never
/// signals a recycled pid (and the reaper hears of a reaped group before the pid can be reused).
static LIVE: Mutex<Live> = Mutex::new(Live { groups: BTreeSet::new(), reaper: None });

struct Live {
    groups: BTreeSet<i32>,
    /// The reaper's stdin, once [`start_reaper`] ran; writes to it fail harmlessly if the reaper is gone.
    reaper: Option<ChildStdin>,
}

impl Live {
    fn insert(&mut self, pgid: i32) {
        self.groups.insert(pgid);
        self.tell_reaper(&format!("+{pgid}"));
    }

    fn remove(&mut self, pgid: i32) {
        self.groups.remove(&pgid);
        self.tell_reaper(&format!("-{pgid}"));
    }

    /// The reaper's protocol, a line each: `+pgid` / `-pgid` for a child's process group, `>path` / `<path`
    /// for a temp dir to remove after the groups are killed.
    fn tell_reaper(&mut self, line: &str) {
        if let Some(pipe) = &mut self.reaper {
            // One short line per write: atomic on a pipe (under PIPE_BUF).
            let _ = pipe.write_all(format!("{line}\n").as_bytes());
        }
    }
}

/// A temp dir of compare's (its work dir, a PostgreSQL cluster, Redis's dir) that the reaper removes if
/// compare dies without removing it. A path with a newline is not announced (the protocol is lines), and
/// one too long for an atomic pipe write neither: such a dir is left behind after a crash, as before.
fn announce_dir(op: char, dir: &Path) {
    let Some(path) = dir.to_str().filter(|p| !p.contains('\n') && p.len() < 3000) else { return };
    live().tell_reaper(&format!("{op}{path}"));
}
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// How long a SIGKILLed child may take to be reaped before we give up on it (and say so).
const REAP_GRACE: Duration = Duration::from_secs(5);

fn live() -> MutexGuard<'static, Live> {
    // A panic while holding the lock leaves the set itself consistent (inserts and removes are atomic).
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn kill_group(pgid: i32) {
    if let Some(pid) = Pid::from_raw(pgid) {
        // ESRCH (already gone) is the common case and fine.
        let _ = kill_process_group(pid, Signal::KILL);
    }
}

/// True once SIGINT/SIGTERM/SIGHUP arrived: long loops check it and stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// An error when interrupted, for `?` at every step boundary.
pub fn check_interrupted() -> anyhow::Result<()> {
    if interrupted() { Err(anyhow::anyhow!("interrupted")) } else { Ok(()) }
}

/// Number of children started and not yet reaped (the tests check it returns to zero).
pub fn live_count() -> usize {
    live().groups.len()
}

/// SIGKILL to every live child's process group.
pub fn kill_all() {
    for pgid in live().groups.iter() {
        kill_group(*pgid);
    }
}

/// Starts the reaper (`compare reap`) before any child: the same binary, in a process group of its own so a
/// signal meant for compare's group does not reach it, reading compare's announcements on its stdin.
/// Nothing to reap from before this, so a failure leaves compare as safe as it was without it.
pub fn start_reaper() -> io::Result<()> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("reap").stdin(Stdio::piped()).stdout(Stdio::null()).process_group(0);
    let mut reaper = cmd.spawn()?;
    let pipe = reaper.stdin.take().ok_or_else(|| io::Error::other("the reaper has no stdin"))?;
    live().reaper = Some(pipe);
    // Not waited for: it exits when compare does (its stdin closes), and init reaps it then.
    drop(reaper);
    Ok(())
}

/// `compare reap`: the reaper's side. Follows the `+pgid` / `-pgid` lines on stdin until compare is gone
/// (end of file: compare exited, normally or not, and the kernel closed its end), then SIGKILLs every group
/// still listed. After a normal exit none is.
pub fn reap() -> ExitCode {
    let mut groups = BTreeSet::new();
    let mut dirs = BTreeSet::new();
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match (line.get(..1), line.get(1..).and_then(|n| n.parse::<i32>().ok())) {
            (Some("+"), Some(pgid)) => groups.insert(pgid),
            (Some("-"), Some(pgid)) => groups.remove(&pgid),
            (Some(">"), _) => dirs.insert(PathBuf::from(&line[1..])),
            (Some("<"), _) => dirs.remove(Path::new(&line[1..])),
            _ => continue,
        };
    }
    for pgid in &groups {
        kill_group(*pgid);
    }
    if !groups.is_empty() {
        eprintln!("compare reap: compare died with {} child group(s) running; killed them", groups.len());
    }
    for dir in &dirs {
        remove_when_unused(dir);
    }
    if !dirs.is_empty() {
        eprintln!("compare reap: removed {} temp dir(s) compare left", dirs.len());
    }
    ExitCode::SUCCESS
}

/// Removes a dead compare's temp dir. A SIGKILLed server may still be writing into it for a moment (the
/// signal is delivered, the process not yet gone), so a removal that meets a file created meanwhile is
/// retried, for up to 5 s.
fn remove_when_unused(dir: &Path) {
    let deadline = Instant::now() + REAP_GRACE;
    loop {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) if Instant::now() >= deadline => {
                eprintln!("compare reap: could not remove {}: {e}", dir.display());
                return;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Installs the SIGINT/SIGTERM/SIGHUP handler: the first signal sets the interrupted flag and kills every
/// registered child, so whatever the main thread is waiting on returns and it unwinds normally (dropping the
/// dependencies it started); a second signal exits at once.
pub fn install_signal_handler() -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    // Registered before returning, so a signal right after startup is already ours.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new().name("compare-signals".into()).spawn(move || {
        for _ in signals.forever() {
            let again = INTERRUPTED.swap(true, Ordering::SeqCst);
            kill_all();
            if again {
                eprintln!("compare: second signal: exiting now");
                std::process::exit(130);
            }
            eprintln!("compare: interrupted: stopping children (signal again to exit at once)");
        }
    })?;
    Ok(())
}

/// Kills every registered child before the default panic output (release builds abort on panic, so no
/// destructor would run).
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // try_lock: the panicking thread may itself hold the lock.
        match LIVE.try_lock() {
            Ok(live) => live.groups.iter().for_each(|pgid| kill_group(*pgid)),
            Err(TryLockError::Poisoned(p)) => p.into_inner().groups.iter().for_each(|pgid| kill_group(*pgid)),
            Err(TryLockError::WouldBlock) => {}
        }
        default(info);
    }));
}

/// Before compare starts any child: itself pinned to the loader's cores (readiness polls and /proc reads stay
/// off the server's; a failure is only a warning), every child killed on a panic or a signal, and the reaper
/// started (on those cores too) for a death compare cannot handle.
pub fn take_charge(loader_cores: &Cores) -> anyhow::Result<()> {
    if let Err(e) = crate::system::procfs::pin_self(loader_cores) {
        eprintln!("warning: could not pin compare to cores {loader_cores}: {e}");
    }
    if let Err(e) = start_reaper() {
        eprintln!("warning: could not start the reaper ({e}): a SIGKILLed compare would leave its children running");
    }
    install_panic_hook();
    install_signal_handler().map_err(|e| e.context("installing the signal handler"))
}

/// One child in its own process group, killed (group and all) when dropped.
#[derive(Debug)]
pub struct Spawned {
    child: Child,
    pgid: i32,
    status: Option<ExitStatus>,
    /// The leader's CPU time, read from /proc while it was a zombie (exited, not yet reaped).
    cpu_at_exit: Option<crate::system::procfs::TreeCpu>,
    name: String,
}

impl Spawned {
    /// Spawns `cmd` as the leader of a new process group and registers it. Refused once interrupted.
    pub fn spawn(mut cmd: Command, name: &str) -> io::Result<Spawned> {
        cmd.process_group(0);
        // Spawn under the lock: a signal between spawn and registration would miss the child.
        let mut live = live();
        if interrupted() {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        let child = cmd.spawn()?;
        let pgid = i32::try_from(child.id()).map_err(|_| io::Error::other("pid out of range"))?;
        live.insert(pgid);
        Ok(Spawned { child, pgid, status: None, cpu_at_exit: None, name: name.to_string() })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The child's stdout when it was spawned piped (a child that prints where it listens), once.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// The CPU time (user + system, all its threads) the leader used in its whole life, when it exited on its
    /// own and `try_wait` saw it: what `wait4` would report, measured the same way for every loader.
    pub fn cpu_at_exit(&self) -> Option<crate::system::procfs::TreeCpu> {
        self.cpu_at_exit
    }

    /// The exit status once the leader exited (reaping it); anything left in its group is killed then.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        // Exited but not reaped yet: its /proc entry still holds its final CPU times (every thread's).
        let pid = Pid::from_raw(self.pgid);
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG;
        if let Some(pid) = pid
            && matches!(rustix::process::waitid(WaitId::Pid(pid), options), Ok(Some(_)))
        {
            self.cpu_at_exit = Some(crate::system::procfs::own_cpu(self.pid()));
        }
        let mut live = live();
        let status = self.child.try_wait()?;
        if let Some(status) = status {
            // The group id cannot be reused while members remain, so this reaches only our leftovers.
            kill_group(self.pgid);
            live.remove(self.pgid);
            self.status = Some(status);
        }
        Ok(status)
    }

    /// Waits up to `limit` for the leader to exit; `None` if it still runs.
    pub fn wait_timeout(&mut self, limit: Duration) -> io::Result<Option<ExitStatus>> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            // Coarse on purpose: this thread runs on the loader's core.
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL to the whole group, then reap the leader (bounded). Safe to call more than once.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if self.status.is_some() {
            return self.status;
        }
        let mut live = live();
        kill_group(self.pgid);
        let deadline = Instant::now() + REAP_GRACE;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.status = Some(status);
                    break;
                }
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
                Ok(None) => {
                    eprintln!("warning: {} (pid {}) survived SIGKILL for {REAP_GRACE:?}", self.name, self.pgid);
                    break;
                }
                Err(e) => {
                    eprintln!("warning: waiting for {} (pid {}): {e}", self.name, self.pgid);
                    break;
                }
            }
        }
        live.remove(self.pgid);
        self.status
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.kill();
    }
}

/// localdeps' servers (PostgreSQL, redis-server) started as [`Spawned`] children, so the signal handler and
/// the panic hook take them down with the rest.
#[derive(Debug)]
pub struct Supervised;

impl localdeps::Spawner for Supervised {
    fn spawn(&self, cmd: Command, name: &str) -> io::Result<Box<dyn localdeps::Process>> {
        Ok(Box::new(Spawned::spawn(cmd, name)?))
    }

    fn dir_created(&self, dir: &Path) {
        announce_dir('>', dir);
    }

    fn dir_removed(&self, dir: &Path) {
        announce_dir('<', dir);
    }
}

/// A temp dir the reaper removes if compare dies before it does (`prefix` then random characters).
pub fn work_dir(prefix: &str) -> io::Result<localdeps::OwnedDir> {
    localdeps::OwnedDir::create(prefix, std::sync::Arc::new(Supervised))
}

impl localdeps::Process for Spawned {
    fn pid(&self) -> u32 {
        Spawned::pid(self)
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        Spawned::try_wait(self)
    }

    fn kill(&mut self) {
        Spawned::kill(self);
    }
}
