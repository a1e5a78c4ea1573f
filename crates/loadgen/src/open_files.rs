//! The open-file limit (RLIMIT_NOFILE) against the connections asked for. Each connection is a socket, so
//! `-c 1024` needs over a thousand descriptors, and the usual soft limit is 1,024 (the hard one often far
//! higher: it is what the soft limit may be raised to without privilege). Without this, the connections past
//! the soft limit would fail to connect one by one (`EMFILE`) and the run would end "only N of M connections
//! were established". So the soft limit is raised to the hard one when the run needs more, said once on
//! stderr; a hard limit that is too low is bad input, said before anything starts.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Descriptors a run holds besides its connections: stdio, each thread's epoll or io_uring and send timer,
/// the probe connection, the report and log files. Generous: the cost of too many is nothing.
const RESERVE: u64 = 64;

/// What was done about the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The soft limit was enough already.
    Enough,
    /// The soft limit was raised from `from` to `to`.
    Raised { from: u64, to: u64 },
}

/// Why the connections cannot have their open files. Each message is one line for the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenFilesError {
    /// Only root may raise the hard limit, so the user is told how.
    #[error(
        "{connections} connections need about {needed} open files, but the hard limit (RLIMIT_NOFILE) is \
         {hard}: raise it (ulimit -Hn as root, LimitNOFILE= for a systemd unit, --ulimit nofile= for a \
         container) or ask for fewer connections"
    )]
    HardLimitTooLow { connections: usize, needed: u64, hard: u64 },
    /// setrlimit refused (the errno is in the message, so it is not also a `source`).
    #[error("cannot raise the open-file limit (RLIMIT_NOFILE) from {from} to {to}: {errno}")]
    CannotRaise { from: u64, to: u64, errno: rustix::io::Errno },
}

/// The descriptors a run of `connections` over `threads` threads needs.
pub fn needed(connections: usize, threads: usize) -> u64 {
    connections as u64 + 2 * threads as u64 + RESERVE
}

/// Makes room for `needed` open files: raises the soft limit (to the hard one) when it is lower.
pub fn ensure(needed: u64, connections: usize) -> Result<Outcome, OpenFilesError> {
    let limit = getrlimit(Resource::Nofile);
    // None is "unlimited".
    let soft = limit.current.unwrap_or(u64::MAX);
    if soft >= needed {
        return Ok(Outcome::Enough);
    }
    let hard = limit.maximum.unwrap_or(u64::MAX);
    if hard < needed {
        return Err(OpenFilesError::HardLimitTooLow { connections, needed, hard });
    }
    // An unlimited hard limit is still capped by the kernel (fs.nr_open): ask for what is needed, not more.
    let to = if limit.maximum.is_none() { needed } else { hard };
    setrlimit(Resource::Nofile, Rlimit { current: Some(to), maximum: limit.maximum })
        .map_err(|errno| OpenFilesError::CannotRaise { from: soft, to, errno })?;
    Ok(Outcome::Raised { from: soft, to })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hard_limit_too_low_says_how_to_raise_it() {
        let e = OpenFilesError::HardLimitTooLow { connections: 500, needed: 566, hard: 200 };
        assert_eq!(
            e.to_string(),
            "500 connections need about 566 open files, but the hard limit (RLIMIT_NOFILE) is 200: raise it \
             (ulimit -Hn as root, LimitNOFILE= for a systemd unit, --ulimit nofile= for a container) or ask for \
             fewer connections"
        );
        let refused = OpenFilesError::CannotRaise { from: 1024, to: 4096, errno: rustix::io::Errno::PERM };
        assert!(
            refused.to_string().starts_with("cannot raise the open-file limit (RLIMIT_NOFILE) from 1024 to 4096: ")
        );
    }

    #[test]
    fn enough_files_change_nothing() {
        assert_eq!(ensure(1, 1), Ok(Outcome::Enough));
    }
}
