//! A redis-server of our own: no persistence (`--save ""`, no AOF), bound to 127.0.0.1 on a free port.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rustix::process::Signal;

use crate::Options;
use crate::binaries::{INSTALL_HINT, require, tail, version_of};
use crate::child::Running;

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A redis-server child process. Stopped when dropped.
pub struct Redis {
    running: Option<Running>,
    port: u16,
    binary: PathBuf,
    /// The taskset that pins it, when it is pinned.
    taskset: Option<PathBuf>,
    opts: Options,
    /// Its working dir and log; declared last so it is removed only after the server has stopped.
    dir: crate::OwnedDir,
}

impl Redis {
    /// Starts redis-server on a free port and waits until it answers PING.
    pub fn start(opts: &Options) -> anyhow::Result<Redis> {
        let binary = require("redis-server", &opts.dirs, INSTALL_HINT)?;
        let taskset = match &opts.cores {
            Some(_) => Some(require("taskset", &opts.dirs, "apt-get install util-linux")?),
            None => None,
        };
        let dir = crate::OwnedDir::create("redis-", opts.spawner.clone()).context("temp dir for redis-server")?;
        let port = crate::free_port().context("bind 127.0.0.1:0")?;
        let mut redis = Redis { running: None, port, binary, taskset, opts: opts.clone(), dir };
        redis.spawn()?;
        Ok(redis)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// While it runs.
    pub fn pid(&self) -> Option<u32> {
        self.running.as_ref().map(Running::pid)
    }

    /// Whether it answers PING with PONG now.
    pub fn answers_ping(&self) -> bool {
        ping(self.port)
    }

    /// "7.0.15".
    pub fn version(&self) -> String {
        version_of(&self.binary, "v=")
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        self.running = None;
    }

    /// Starts it again on the same port (after `kill`, or in place of the running one).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        self.spawn()
    }

    /// SIGSTOP: the port stays open but nothing answers, the nastiest way for a dependency to fail.
    pub fn freeze(&self) -> std::io::Result<()> {
        self.running.as_ref().map_or(Ok(()), |r| r.signal(Signal::STOP))
    }

    /// SIGCONT after `freeze`.
    pub fn thaw(&self) -> std::io::Result<()> {
        self.running.as_ref().map_or(Ok(()), |r| r.signal(Signal::CONT))
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let log_path = self.dir.path().join("redis.log");
        let log = std::fs::File::create(&log_path).context("redis.log")?;
        let mut cmd = match (&self.taskset, &self.opts.cores) {
            (Some(taskset), Some(cores)) => {
                let mut cmd = Command::new(taskset);
                cmd.args(["-c", cores]).arg(&self.binary);
                cmd
            }
            _ => Command::new(&self.binary),
        };
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("redis.log")?)
            .stderr(log);
        let running = Running::spawn(self.opts.spawner.as_ref(), cmd, "redis-server")
            .with_context(|| format!("could not start {}", self.binary.display()))?;
        let running = self.running.insert(running);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if ping(self.port) {
                return Ok(());
            }
            if let Some(status) = running.exited() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                bail!("redis-server exited during startup ({status}): {}", tail(&log, 15));
            }
            if Instant::now() > deadline {
                bail!("redis-server on :{} did not answer PING within {} s", self.port, READY_TIMEOUT.as_secs());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.thaw();
        if let Some(running) = self.running.as_mut() {
            running.stop(Signal::TERM, STOP_GRACE);
        }
    }
}

/// Whether redis on `port` answers PING with PONG.
fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(stream.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}
