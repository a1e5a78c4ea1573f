//! The open-file limit every process of a run inherits from compare. A sweep to 1,024 connections needs
//! more than the 1,024 descriptors many systems give a login shell by default, in the server (one per client
//! connection, plus its pools and files) and in loadgen (one per connection): both are compare's children,
//! so raising compare's soft limit to its hard limit once, before anything starts, covers every runtime alike
//! (Bun raises its own soft limit at start; Node and the Rust servers do not, so without this the runtimes
//! would not get the same room).

use anyhow::bail;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Descriptors a process needs beyond its connections: its listener, pools, logs, files and the runtime's
/// own (a Node or Bun process opens some dozens at start).
pub const HEADROOM: u64 = 512;

/// What [`ensure`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raised {
    /// The soft limit already allowed `needed`.
    Enough(u64),
    /// The soft limit went from the first figure to the second (the hard limit).
    From(u64, u64),
}

/// Makes sure this process (and so every child it starts from now on) may open `needed` files: raises the
/// soft limit to the hard limit when the soft one is lower, and fails with what to do when even the hard
/// limit is lower.
pub fn ensure(needed: u64) -> anyhow::Result<Raised> {
    let limit = getrlimit(Resource::Nofile);
    let soft = limit.current.unwrap_or(u64::MAX);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    if soft >= needed {
        return Ok(Raised::Enough(soft));
    }
    if hard < needed {
        bail!(
            "{needed} open files are needed (the most connections asked plus {HEADROOM}) but the hard limit is \
             {hard}: raise it (`ulimit -Hn {needed}` as root, or nofile in /etc/security/limits.conf) or ask \
             fewer connections"
        );
    }
    setrlimit(Resource::Nofile, Rlimit { current: limit.maximum, maximum: limit.maximum })
        .map_err(|e| anyhow::anyhow!("raising the open-file limit from {soft} to {hard}: {e}"))?;
    Ok(Raised::From(soft, hard))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_need_within_the_soft_limit_changes_nothing() {
        let soft = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        assert_eq!(ensure(16).expect("16 files"), Raised::Enough(soft));
        assert_eq!(getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX), soft);
    }

    #[test]
    fn a_low_soft_limit_is_raised_to_the_hard_one() {
        let before = getrlimit(Resource::Nofile);
        let hard = before.maximum.unwrap_or(u64::MAX);
        if hard < 1_000 {
            return; // nothing to raise to
        }
        // This test's own process (nextest runs each test in one) with a soft limit too low for the need.
        setrlimit(Resource::Nofile, Rlimit { current: Some(300), maximum: before.maximum }).expect("lowering");
        assert_eq!(ensure(400).expect("raised"), Raised::From(300, hard));
        assert_eq!(getrlimit(Resource::Nofile).current, before.maximum);
    }

    #[test]
    fn a_need_above_the_hard_limit_says_what_to_do() {
        let hard = getrlimit(Resource::Nofile).maximum.unwrap_or(u64::MAX);
        if hard == u64::MAX {
            return; // unlimited: nothing can be above it
        }
        let e = ensure(hard + 1).expect_err("above the hard limit").to_string();
        assert!(e.contains("hard limit is") && e.contains("ulimit -Hn"), "{e}");
    }
}
