//! Readers of a process's (or a thread's) `/proc/…/stat` and `/proc/…/status`: its CPU time and state, and
//! its memory sizes. Files that are gone (the process exited) or fields that do not parse read as absent or
//! zero, as any /proc sampling has to allow for.

use std::path::Path;

/// Clock ticks per second (USER_HZ), the unit of the CPU times in /proc/…/stat and of /proc/stat's counters.
/// Asked of the system (the auxiliary vector's AT_CLKTCK, what `sysconf(_SC_CLK_TCK)` returns) rather than
/// assumed to be 100: it is 100 on the common ABIs, but a kernel ABI, not a law.
pub fn clock_ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second().max(1)
}

/// What the tools read of a /proc/…/stat line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// R, S, D, Z…
    pub state: char,
    /// utime, in clock ticks ([`clock_ticks_per_second`]); 0 when it does not parse.
    pub user_ticks: u64,
    /// stime, in clock ticks; 0 when it does not parse.
    pub system_ticks: u64,
}

/// The stat file at `path` (`/proc/<pid>/stat`, `/proc/self/stat`, `/proc/thread-self/stat`), `None` when it
/// cannot be read (the process is gone) or holds no state.
pub fn read_stat(path: impl AsRef<Path>) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

/// One stat line. The command name may hold spaces and parentheses, so the fixed fields are counted from
/// after its last ')'.
pub fn parse_stat(line: &str) -> Option<Stat> {
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    // Counting from the state (field 3) as 0, utime (field 14) and stime (field 15) are at 11 and 12.
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Some(Stat { state, user_ticks: ticks(11), system_ticks: ticks(12) })
}

/// The kB value of one `Name:  <n> kB` line of the status file at `path` (`/proc/<pid>/status`), e.g. `VmRSS`
/// or `VmHWM`; `None` when the file or the line is gone.
pub fn status_kib(path: impl AsRef<Path>, name: &str) -> Option<u64> {
    parse_status_kib(&std::fs::read_to_string(path).ok()?, name)
}

/// [`status_kib`] of a status file's text.
pub fn parse_status_kib(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|value| value.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_ticks_are_asked_of_the_system_and_positive() {
        assert!(clock_ticks_per_second() > 0);
    }

    #[test]
    fn stat_fields_count_from_the_last_parenthesis_of_the_name() {
        let line = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 100 1000 10\n";
        assert_eq!(parse_stat(line), Some(Stat { state: 'S', user_ticks: 250, system_ticks: 75 }));
        assert_eq!(parse_stat("42 (short) R 1"), Some(Stat { state: 'R', user_ticks: 0, system_ticks: 0 }));
        assert_eq!(parse_stat("42 (no fields)"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn own_stat_and_status_are_readable() {
        assert!(read_stat(format!("/proc/{}/stat", std::process::id())).is_some());
        // This thread is running while it reads its own stat.
        assert_eq!(read_stat("/proc/thread-self/stat").map(|stat| stat.state), Some('R'));
        assert!(status_kib("/proc/self/status", "VmRSS").is_some_and(|kib| kib > 0));
        assert_eq!(read_stat("/proc/0/stat"), None);
    }

    #[test]
    fn status_lines_match_the_whole_name() {
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nVmRSSx:\t1 kB\n";
        assert_eq!(parse_status_kib(status, "VmRSS"), Some(1024));
        assert_eq!(parse_status_kib(status, "VmHWM"), Some(2048));
        assert_eq!(parse_status_kib(status, "VmSwap"), None);
        assert_eq!(parse_status_kib(status, "VmRS"), None);
    }
}
