//! Bring-your-own cells: `--target NAME=URL[,pid=PID]` adds a server that is already running (a user's own
//! service, the original Node or Bun implementation) and `--target NAME=cmd:COMMAND` one that compare starts
//! itself, like every other runtime. Either is checked against the reference answers and measured the same
//! way; what cannot be measured is left empty and said so in the report.

use anyhow::{Context, bail};

/// How a target's server comes to be.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TargetKind {
    /// Already listening on 127.0.0.1:`port`. With its `pid`, CPU and RSS are read from its process tree;
    /// without, they are not measured. It is not restarted between runs and has no cold start.
    Running { port: u16, pid: Option<u32> },
    /// `sh -c COMMAND`, started per run on the server cores with `PORT` set (and `{port}` in the command
    /// replaced) like the built-in runtimes: fresh per run, cold starts timed, CPU and RSS measured.
    Command { command: String },
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    pub name: String,
    pub kind: TargetKind,
}

impl Target {
    /// Whether compare knows the process tree to read CPU and RSS from.
    pub fn has_pid(&self) -> bool {
        !matches!(self.kind, TargetKind::Running { pid: None, .. })
    }

    /// What the report says about it: where it runs and what was not measured.
    pub fn describe(&self) -> String {
        match &self.kind {
            TargetKind::Running { port, pid: Some(pid) } => {
                format!("target: running on 127.0.0.1:{port}, pid {pid}; not restarted per run, no cold starts")
            }
            TargetKind::Running { port, pid: None } => format!(
                "target: running on 127.0.0.1:{port}, pid unknown: CPU and RSS not measured; not restarted per run, \
                 no cold starts"
            ),
            TargetKind::Command { command } => format!("target: sh -c {command:?}, started per run like the others"),
        }
    }

    /// Whether compare starts (and restarts) it.
    pub fn started_by_compare(&self) -> bool {
        matches!(self.kind, TargetKind::Command { .. })
    }
}

/// Names the built-in runtimes use; a target may not take one.
const RESERVED: [&str; 6] = ["rust", "bun", "node", "koa", "floor", "all"];

/// Parses one `--target` value.
pub fn parse(spec: &str) -> anyhow::Result<Target> {
    let Some((name, rest)) = spec.split_once('=') else {
        bail!("--target {spec:?}: expected NAME=URL[,pid=PID] or NAME=cmd:COMMAND");
    };
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        bail!("--target {spec:?}: the name must be letters, digits, '-', '_' or '.'");
    }
    if RESERVED.contains(&name) {
        bail!("--target {spec:?}: {name:?} is a built-in runtime; choose another name");
    }
    let kind = if let Some((_, command)) = started_command(spec) {
        if command.trim().is_empty() {
            bail!("--target {spec:?}: empty command");
        }
        TargetKind::Command { command: command.to_string() }
    } else {
        let mut parts = rest.split(',');
        let url = parts.next().unwrap_or_default();
        let port = loopback_port(url).with_context(|| format!("--target {spec:?}"))?;
        let mut pid = None;
        for part in parts {
            match part.trim().split_once('=') {
                Some(("pid", n)) => {
                    let n: u32 = n.parse().map_err(|_| anyhow::anyhow!("--target {spec:?}: bad pid {n:?}"))?;
                    if !std::path::Path::new(&format!("/proc/{n}")).exists() {
                        bail!("--target {spec:?}: no process {n}");
                    }
                    pid = Some(n);
                }
                _ => bail!("--target {spec:?}: unknown option {part:?} (only pid=PID)"),
            }
        }
        TargetKind::Running { port, pid }
    };
    Ok(Target { name: name.to_string(), kind })
}

/// `NAME=cmd:COMMAND` as (NAME, COMMAND), unchecked; None for any other spec. Also how a report finds a run's
/// started targets in its recorded command line.
pub fn started_command(spec: &str) -> Option<(&str, &str)> {
    let (name, rest) = spec.split_once('=')?;
    Some((name.trim(), rest.strip_prefix("cmd:")?))
}

/// The port of `http://127.0.0.1:PORT` (or `localhost`, with an optional trailing `/`). Only loopback: the
/// loader and the server must share this machine for CPU per response and the core layout to mean anything.
fn loopback_port(url: &str) -> anyhow::Result<u16> {
    let Some(rest) = url.trim().strip_prefix("http://") else {
        bail!("the URL must start with http:// (no TLS), got {url:?}");
    };
    let authority = rest.trim_end_matches('/');
    if authority.contains('/') {
        bail!("give the server's base URL without a path; each workload asks its own paths");
    }
    let Some((host, port)) = authority.rsplit_once(':') else { bail!("the URL needs a port: {url:?}") };
    if !matches!(host, "127.0.0.1" | "localhost") {
        bail!("only a server on 127.0.0.1 can be measured here (got host {host:?})");
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => bail!("bad port {port:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_target_is_a_port_with_an_optional_pid() {
        let t = parse("mine=http://127.0.0.1:8080").expect("url");
        assert_eq!(t, Target { name: "mine".into(), kind: TargetKind::Running { port: 8080, pid: None } });
        assert!(!t.has_pid() && !t.started_by_compare());
        let me = std::process::id();
        let t = parse(&format!("mine=http://localhost:8080/,pid={me}")).expect("url with pid");
        assert_eq!(t.kind, TargetKind::Running { port: 8080, pid: Some(me) });
        assert!(t.has_pid());
    }

    #[test]
    fn a_command_target_is_started_by_compare_with_its_port() {
        let t = parse("orig=cmd:node server.js --port {port}").expect("command");
        assert_eq!(t.kind, TargetKind::Command { command: "node server.js --port {port}".into() });
        assert!(t.has_pid() && t.started_by_compare());
    }

    #[test]
    fn malformed_targets_are_refused() {
        for bad in [
            "mine",
            "=http://127.0.0.1:1",
            "my target=http://127.0.0.1:1",
            "rust=http://127.0.0.1:1",
            "mine=https://127.0.0.1:1",
            "mine=http://10.0.0.1:80",
            "mine=http://127.0.0.1",
            "mine=http://127.0.0.1:0",
            "mine=http://127.0.0.1:80/api",
            "mine=http://127.0.0.1:80,pid=x",
            "mine=http://127.0.0.1:80,pid=4294967295",
            "mine=http://127.0.0.1:80,cores=1",
            "mine=cmd:  ",
        ] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
