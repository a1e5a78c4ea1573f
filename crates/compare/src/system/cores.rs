//! A set of CPU cores in taskset's list syntax (`0`, `0,2`, `1-3`), parsed once where the flag is read: the
//! set for /proc readings, overlap checks and pinning; the text as given for `taskset -c` and the records.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fmt;

use anyhow::bail;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cores {
    set: BTreeSet<usize>,
    text: String,
}

impl Cores {
    /// oskit's one rule for CPU lists (loadgen's `--pin` takes the same): an empty item such as `1,` is refused.
    pub fn parse(text: &str) -> anyhow::Result<Cores> {
        let Ok(cpus) = oskit::cpu_list::parse_cpu_list(text) else {
            bail!("bad core list {text:?} (use e.g. 0, 0,2 or 1-3)")
        };
        Ok(Cores { set: cpus.into_iter().collect(), text: text.to_string() })
    }

    pub fn set(&self) -> &BTreeSet<usize> {
        &self.set
    }

    /// How many cores.
    pub fn count(&self) -> usize {
        self.set.len()
    }

    pub fn is_disjoint(&self, other: &Cores) -> bool {
        self.set.is_disjoint(&other.set)
    }

    /// The list as given, for `taskset -c`.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Cores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// So a `Command` takes it as an argument as it is (`cmd.arg(&cores)`).
impl AsRef<OsStr> for Cores {
    fn as_ref(&self) -> &OsStr {
        OsStr::new(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_lists_parse_to_a_set_and_keep_their_text() {
        let c = Cores::parse("0,2-3").expect("cores");
        assert_eq!((c.set(), c.as_str(), c.count()), (&BTreeSet::from([0, 2, 3]), "0,2-3", 3));
        assert!(c.is_disjoint(&Cores::parse("1").expect("cores")));
        assert!(!c.is_disjoint(&Cores::parse("3-4").expect("cores")));
        for bad in ["", "3-1", "a", "1,", ",1"] {
            assert!(Cores::parse(bad).is_err(), "{bad:?}");
        }
    }
}
