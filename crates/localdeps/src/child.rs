//! The servers' processes: who starts and owns them ([`Spawner`], [`Process`]), and how they are signalled
//! and stopped. A pid is signalled only while its process is ours and not yet reaped, so a signal can never
//! reach a process that merely inherited the number.

use std::io;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

/// A started server process. `Sync` so a server can be shared between tests (a `static` `Weak<Postgres>`).
pub trait Process: Send + Sync {
    fn pid(&self) -> u32;
    /// The exit status once it exited (reaping it), else `None`.
    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>>;
    /// SIGKILL (to whatever else the owner puts with it, too) and reap.
    fn kill(&mut self);
}

/// Starts the servers' processes. compare passes one that puts each in a registered process group of its
/// own, so its Ctrl-C and panic handling take them down with its other children.
pub trait Spawner: Send + Sync {
    fn spawn(&self, cmd: Command, name: &str) -> io::Result<Box<dyn Process>>;
    /// A temp dir of this spawner's servers was created ([`crate::OwnedDir`]); an owner that outlives a crash
    /// removes it then.
    fn dir_created(&self, _dir: &Path) {}
    /// That dir is gone.
    fn dir_removed(&self, _dir: &Path) {}
}

/// Plain children of this process.
#[derive(Debug, Default)]
pub struct PlainSpawner;

impl Spawner for PlainSpawner {
    fn spawn(&self, mut cmd: Command, _name: &str) -> io::Result<Box<dyn Process>> {
        Ok(Box::new(cmd.spawn()?))
    }
}

impl Process for Child {
    fn pid(&self) -> u32 {
        self.id()
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        Child::try_wait(self)
    }

    fn kill(&mut self) {
        let _ = Child::kill(self);
        let _ = self.wait();
    }
}

/// A server process we own, with its exit status once reaped. Killed when dropped.
pub(crate) struct Running {
    process: Box<dyn Process>,
    status: Option<ExitStatus>,
}

impl Running {
    pub(crate) fn spawn(spawner: &dyn Spawner, cmd: Command, name: &str) -> io::Result<Running> {
        Ok(Running { process: spawner.spawn(cmd, name)?, status: None })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The exit status once it exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.process.try_wait().ok().flatten();
        }
        self.status
    }

    /// Only while not reaped, so the pid is still ours. Already exited (a zombie) is fine.
    pub(crate) fn signal(&self, signal: Signal) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        let pid = i32::try_from(self.pid()).ok().and_then(Pid::from_raw).ok_or_else(|| io::Error::other("bad pid"))?;
        kill_process(pid, signal).map_err(io::Error::from)
    }

    /// `signal`, up to `grace` for it to exit, then SIGKILL.
    pub(crate) fn stop(&mut self, signal: Signal, grace: Duration) {
        let _ = self.signal(signal);
        let deadline = Instant::now() + grace;
        while self.exited().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.process.kill();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.process.kill();
    }
}
