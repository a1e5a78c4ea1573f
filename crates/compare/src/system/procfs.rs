//! What /proc says about a server: the CPU time and RSS of its whole process tree (a Node cluster's primary
//! and workers, a shell wrapper and its child) and how busy the server's cores were.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context;
use oskit::procfs::{self, Stat};

use crate::system::cores::Cores;

/// /proc/<pid>/stat through oskit's reader, `None` when the process is gone.
fn stat(pid: u32) -> Option<Stat> {
    procfs::read_stat(format!("/proc/{pid}/stat"))
}

/// The state letter of a process (R, S, Z…), `None` when it does not exist.
pub fn process_state(pid: u32) -> Option<char> {
    stat(pid).map(|stat| stat.state)
}

/// `pid` and all its descendants, through /proc/<p>/task/*/children (children of every thread).
pub fn process_tree(pid: u32) -> Vec<u32> {
    let mut seen = Vec::new();
    let mut stack = vec![pid];
    while let Some(p) = stack.pop() {
        if seen.contains(&p) {
            continue;
        }
        seen.push(p);
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for task in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                stack.extend(children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
            }
        }
    }
    seen
}

/// CPU time of a process tree, in µs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TreeCpu {
    pub user_us: f64,
    pub sys_us: f64,
}

impl TreeCpu {
    pub fn total_us(&self) -> f64 {
        self.user_us + self.sys_us
    }
}

/// utime + stime of every process in the tree. Processes that exit in between take their time with them,
/// as with any /proc sampling; servers under test do not fork per request.
pub fn tree_cpu(pid: u32) -> TreeCpu {
    let mut cpu = TreeCpu::default();
    for p in process_tree(pid) {
        let own = own_cpu(p);
        cpu.user_us += own.user_us;
        cpu.sys_us += own.sys_us;
    }
    cpu
}

/// utime + stime of one process (all its threads, live and exited), zero when it is gone.
pub fn own_cpu(pid: u32) -> TreeCpu {
    let tick_us = 1e6 / procfs::clock_ticks_per_second() as f64;
    let Some(stat) = stat(pid) else { return TreeCpu::default() };
    TreeCpu { user_us: stat.user_ticks as f64 * tick_us, sys_us: stat.system_ticks as f64 * tick_us }
}

/// VmRSS summed over the tree, KiB (a Node cluster's primary counts too).
pub fn tree_rss_kib(pid: u32) -> u64 {
    process_tree(pid).into_iter().map(|p| status_kib(p, "VmRSS")).sum()
}

/// VmHWM (each process's peak RSS so far) summed over the tree, KiB: the tree's peak when its processes
/// peak together, an upper bound otherwise.
pub fn tree_peak_rss_kib(pid: u32) -> u64 {
    process_tree(pid).into_iter().map(|p| status_kib(p, "VmHWM")).sum()
}

/// One `Name: <n> kB` line of a process's status file; 0 when the process or the line is gone.
fn status_kib(pid: u32, name: &str) -> u64 {
    procfs::status_kib(format!("/proc/{pid}/status"), name).unwrap_or(0)
}

/// Summed /proc/stat counters (ticks) of some cores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreTicks {
    pub total: u64,
    pub idle: u64,
}

pub fn core_ticks(cores: &BTreeSet<usize>) -> anyhow::Result<CoreTicks> {
    core_ticks_from(Path::new("/proc/stat"), cores)
}

fn core_ticks_from(path: &Path, cores: &BTreeSet<usize>) -> anyhow::Result<CoreTicks> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut acc = CoreTicks::default();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let Some(name) = parts.next() else { continue };
        let Some(Ok(cpu)) = name.strip_prefix("cpu").filter(|n| !n.is_empty()).map(str::parse::<usize>) else {
            continue;
        };
        if !cores.contains(&cpu) {
            continue;
        }
        // user nice system idle iowait irq softirq steal (guest time is already inside user and nice).
        let v: Vec<u64> = parts.take(8).map(|x| x.parse().unwrap_or(0)).collect();
        acc.total += v.iter().sum::<u64>();
        acc.idle += v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    }
    Ok(acc)
}

/// Share of the cores' time between two snapshots that was not idle, in percent.
pub fn busy_pct(before: CoreTicks, after: CoreTicks) -> f64 {
    let total = after.total.saturating_sub(before.total).max(1);
    let idle = after.idle.saturating_sub(before.idle);
    100.0 - 100.0 * idle as f64 / total as f64
}

/// Pins the calling thread (and the threads it starts afterwards) to the `taskset -c` list `cores`.
pub fn pin_self(cores: &Cores) -> anyhow::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    for &core in cores.set() {
        set.set(core);
    }
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_tree_is_visible() {
        let me = std::process::id();
        assert!(process_tree(me).contains(&me));
        assert!(tree_rss_kib(me) > 0);
        assert!(process_state(me).is_some());
    }

    #[test]
    fn stat_counters_add_up() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("stat");
        let text = "cpu  1 1 1 1 1 1 1 1 0 0\ncpu0 10 0 5 80 5 0 0 0 0 0\ncpu1 1 2 3 4 5 6 7 8 0 0\nintr 1\n";
        std::fs::write(&path, text).expect("write stat");
        let t = core_ticks_from(&path, &BTreeSet::from([0])).expect("parse stat");
        assert_eq!(t, CoreTicks { total: 100, idle: 85 });
        let before = CoreTicks { total: 0, idle: 0 };
        assert!((busy_pct(before, CoreTicks { total: 100, idle: 25 }) - 75.0).abs() < 1e-9);
    }
}
