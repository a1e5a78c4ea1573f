//! One server of a cell, as its [`ServerSpec`] describes it: started pinned in its own process group with
//! a scrubbed environment and a log file, polled until its first 200, and stopped. The cells, the seeding and
//! calibrate all start servers through here.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::plan::server_spec::ServerSpec;
use crate::run::setup::Bench;
use crate::system::http::Endpoint;
use crate::system::process::Spawned;
use crate::system::procfs;

/// A just-started runtime finishes lazy initialization before its idle RSS is read.
pub const SETTLE: Duration = Duration::from_millis(500);
/// Readiness polls are this far apart: fine enough for a 5 ms startup, from the loader's core.
const READY_POLL: Duration = Duration::from_micros(500);

/// Variables in compare's own environment that would change what a server does (a Redis URL, a worker
/// count, a debug filter, Node flags): never passed on.
fn scrubbed(key: &str) -> bool {
    ["FLIGHT_", "SCRIBE_", "METADATA_", "LADDER_", "UPSTREAM_", "PEER_", "COMPARE_"].iter().any(|p| key.starts_with(p))
        || ["DATABASE_URL", "REDIS_URL", "RUST_LOG", "NODE_OPTIONS", "NODE_ENV", "PORT", "HOSTNAME"].contains(&key)
        || ["TLS_CERT", "TLS_KEY", "TLS_RESUME", "HTTP2"].contains(&key)
}

/// Where started servers keep temp files (their TMPDIR): beside their logs, inside the run's temp dir.
fn server_tmp_dir(logdir: &std::path::Path) -> PathBuf {
    logdir.join("tmp")
}

/// A started server: pinned with taskset, in its own process group, output to a log file. Or one that was
/// already running (`--target NAME=URL`): never signalled, with a pid only when the user gave it.
#[derive(Debug)]
pub struct Server {
    proc: Option<Spawned>,
    pid: Option<u32>,
    name: String,
    pub port: u16,
    /// HTTPS: the client configuration polls and probes use.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// Polls and probes speak h2c.
    h2c: bool,
    started: Instant,
    log: PathBuf,
}

impl Server {
    pub fn start(spec: &ServerSpec, cores: &str, logdir: &std::path::Path) -> anyhow::Result<Server> {
        let tls = spec.tls_ca.as_deref().map(crate::plan::tls::probe_client).transpose()?;
        if let Some((port, pid)) = spec.attach {
            let (name, started, log) = (spec.name.clone(), Instant::now(), PathBuf::new());
            return Ok(Server { proc: None, pid, name, port, tls, h2c: spec.h2c, started, log });
        }
        // A fresh port per start (no TIME_WAIT left from the last load), below the ephemeral range.
        let port = localdeps::free_port()?;
        let subst = |s: &str| s.replace("{port}", &port.to_string());
        let log = logdir.join(format!("{}-{port}.log", spec.name));
        // A file, never a pipe: a pipe nobody drains would block the server.
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = Command::new("taskset");
        cmd.arg("-c").arg(cores).arg(&spec.program).args(spec.args.iter().map(|a| subst(a)));
        for (key, _) in std::env::vars_os() {
            if key.to_str().is_some_and(scrubbed) {
                cmd.env_remove(&key);
            }
        }
        cmd.envs(spec.env.iter().map(|(k, v)| (k, subst(v))));
        // Temp files into the run's own temp dir, removed with it: a server is stopped with SIGKILL, so what
        // it would remove at a clean exit stays (the PHP peer's php-fpm and nginx configuration dir did, in
        // /tmp, at every start).
        let tmp = server_tmp_dir(logdir);
        std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        cmd.env("TMPDIR", &tmp);
        let stdout = if spec.discard_stdout { Stdio::null() } else { Stdio::from(out.try_clone()?) };
        cmd.current_dir(&spec.cwd).stdin(Stdio::null()).stdout(stdout).stderr(out);
        // taskset execs the server, so the child's pid is the server's own.
        let started = Instant::now();
        let proc = Spawned::spawn(cmd, &spec.name).with_context(|| format!("starting {}", spec.program.display()))?;
        let pid = Some(proc.pid());
        Ok(Server { proc: Some(proc), pid, name: spec.name.clone(), port, tls, h2c: spec.h2c, started, log })
    }

    /// Where it listens and how to speak to it, for probes and priming.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint { port: self.port, tls: self.tls.clone(), h2c: self.h2c }
    }

    /// The server's pid, when known: its process tree is what CPU and RSS are read from.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// RSS of the server's process tree; `None` without a pid.
    pub fn rss_kib(&self) -> Option<u64> {
        self.pid.map(procfs::tree_rss_kib)
    }

    /// Each process's peak RSS so far (VmHWM), summed over the tree; `None` without a pid.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        self.pid.map(procfs::tree_peak_rss_kib)
    }

    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.proc.as_mut().and_then(|p| p.try_wait().ok().flatten())
    }

    /// Polls GET `path` until a 200; the time since exec.
    pub fn wait_ready(&mut self, path: &str, timeout: Duration) -> anyhow::Result<Duration> {
        let mut last = None;
        loop {
            if let Some(status) = self.exited() {
                bail!("{} exited ({status}) before answering{}", self.name, self.log_tail(12));
            }
            match crate::system::http::request(&self.endpoint(), "GET", path, None, &[], Duration::from_secs(2)) {
                Ok(r) if r.status == 200 => return Ok(self.started.elapsed()),
                Ok(r) => last = Some(r.status),
                Err(_) => {}
            }
            crate::system::process::check_interrupted()?;
            if self.started.elapsed() > timeout {
                let last = last.map_or("none".to_string(), |s| s.to_string());
                bail!("{}: no 200 on {path} within {timeout:?} (last status {last}){}", self.name, self.log_tail(12));
            }
            std::thread::sleep(READY_POLL);
        }
    }

    /// The server's last output lines, each on its own indented line.
    pub fn log_tail(&self, n: usize) -> String {
        if self.proc.is_none() {
            return String::new();
        }
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].iter().map(|l| format!("\n    | {l}")).collect()
    }

    /// Kills the server's whole process group and reaps it; a server compare did not start is left alone.
    pub fn stop(self) {
        if let Some(mut proc) = self.proc {
            proc.kill();
        }
    }
}

/// Starts a server and waits for its first 200 on `ready_path`; stopped again on failure.
pub fn start_ready(spec: &ServerSpec, bench: &Bench, ready_path: &str) -> anyhow::Result<(Server, Duration)> {
    let mut server = Server::start(spec, bench.server_cores.as_str(), &bench.logdir)?;
    match server.wait_ready(ready_path, bench.ready_timeout) {
        Ok(elapsed) => Ok((server, elapsed)),
        Err(e) => {
            server.stop();
            Err(e)
        }
    }
}

/// A duration in milliseconds, as records hold them.
pub fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One cold start: exec→first 200 on `ready_path`, in ms.
pub fn startup(spec: &ServerSpec, bench: &Bench, ready_path: &str) -> anyhow::Result<f64> {
    let (server, elapsed) = start_ready(spec, bench, ready_path)?;
    server.stop();
    Ok(millis(elapsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A started server's TMPDIR is the run's, so what a SIGKILLed server leaves there goes with the run.
    #[test]
    fn a_started_server_keeps_its_temp_files_in_the_run_dir() {
        let logdir = tempfile::tempdir().expect("temp dir");
        let mut spec = ServerSpec::new("tmpdir", PathBuf::from("/bin/sh"));
        spec.args = vec!["-c".into(), "echo \"$TMPDIR\"; exec sleep 30".into()];
        let server = Server::start(&spec, "0", logdir.path()).expect("start");
        let log = server.log.clone();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut text = String::new();
        while !text.ends_with('\n') && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            text = std::fs::read_to_string(&log).unwrap_or_default();
        }
        server.stop();
        let tmp = server_tmp_dir(logdir.path());
        assert_eq!(text.trim_end(), tmp.to_str().expect("UTF-8 path"));
        assert!(tmp.is_dir(), "{} not created", tmp.display());
    }
}
