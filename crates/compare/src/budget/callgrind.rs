//! A callgrind dump read back: its total instructions, each function's own (self) instructions, and the
//! allocator's part: the instructions spent inside it and the allocating calls made into it, by caller. Read from callgrind's documented output format rather than through
//! `callgrind_annotate`, whose text layout is for people and changes between valgrind releases.
//!
//! The format in the parts used here: `fn=(id) name` names a function the first time its id appears and
//! `fn=(id)` refers to it after (`cfn=` shares the table); `ob=`/`cob=` do the same for objects. A cost line
//! is positions then event counts; the cost line right after a `calls=` line is the callee's inclusive cost,
//! charged to the call, not to the caller's own instructions. `totals:` (or `summary:`) is the whole dump's.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, bail};

/// One dump: its total and every function's own instructions, by name (generic arguments elided, so one
/// function's instances add up and a name survives a change of the types it is instantiated with).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Profile {
    pub total: u64,
    pub functions: HashMap<String, u64>,
    /// Instructions inside the allocator: the inclusive cost of every call into it from outside it.
    pub allocator: u64,
    /// Allocating calls into the allocator (malloc, calloc, realloc, the aligned ones, Rust's shims), by the
    /// function outside it that made them.
    pub allocations: HashMap<String, u64>,
}

impl Profile {
    /// Allocating calls into the allocator, all callers.
    pub fn allocation_count(&self) -> u64 {
        self.allocations.values().sum()
    }
}

/// The allocator's entry points: C's (glibc's, and the `__libc_` names its aliases may carry) and the shims
/// Rust's global allocator goes through. A call from outside this set into it is where the allocator starts;
/// everything under that call is the allocator's.
const ALLOCATING: [&str; 22] = [
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "aligned_alloc",
    "posix_memalign",
    "memalign",
    "valloc",
    "pvalloc",
    "__libc_malloc",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
    "__posix_memalign",
    "__rust_alloc",
    "__rust_alloc_zeroed",
    "__rust_realloc",
    "__rdl_alloc",
    "__rdl_alloc_zeroed",
    "__rdl_realloc",
    "__rg_alloc",
    "__rg_realloc",
];
const RELEASING: [&str; 6] = ["free", "cfree", "__libc_free", "__rust_dealloc", "__rdl_dealloc", "__rg_dealloc"];

/// What a function name is to the allocator: `Some(true)` an allocating entry, `Some(false)` a releasing one,
/// None outside it. Symbol versions (`malloc@@GLIBC_2.2.5`) and Rust's `__rustc::` namespace are ignored.
fn allocator_entry(name: &str) -> Option<bool> {
    let bare = name.split('@').next().unwrap_or(name);
    let bare = bare.strip_prefix("__rustc::").unwrap_or(bare);
    if ALLOCATING.contains(&bare) {
        Some(true)
    } else if RELEASING.contains(&bare) {
        Some(false)
    } else {
        None
    }
}

/// Reads the dump at `path`.
pub fn read(path: &Path) -> anyhow::Result<Profile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| format!("{}", path.display()))
}

/// Parses a dump's text: the `Ir` event only.
pub fn parse(text: &str) -> anyhow::Result<Profile> {
    let mut positions = 1usize;
    let mut event: Option<usize> = None;
    let mut names: HashMap<String, String> = HashMap::new();
    let mut current: Option<String> = None;
    let mut callee: Option<String> = None;
    // The call whose inclusive cost the next cost line is: how many calls, and whether it enters the
    // allocator from outside it (and allocates).
    let mut after_call: Option<(u64, Option<bool>)> = None;
    let mut total: Option<u64> = None;
    let mut profile = Profile::default();
    for (n, line) in text.lines().enumerate() {
        let at = || format!("line {}", n + 1);
        if let Some(p) = line.strip_prefix("positions:") {
            positions = p.split_whitespace().count().max(1);
        } else if let Some(e) = line.strip_prefix("events:") {
            event = e.split_whitespace().position(|name| name == "Ir");
            if event.is_none() {
                bail!("{}: no Ir event in {line:?}", at());
            }
        } else if let Some(t) = line.strip_prefix("totals:").or_else(|| line.strip_prefix("summary:")) {
            // totals: wins over summary: when both are there (they differ by callgrind's own bookkeeping).
            let value = first_number(t).with_context(at)?;
            if line.starts_with("totals:") || total.is_none() {
                total = Some(value);
            }
        } else if let Some(f) = line.strip_prefix("fn=") {
            current = Some(compressed(f, &mut names).with_context(at)?);
            callee = None;
            after_call = None;
        } else if let Some(f) = line.strip_prefix("cfn=") {
            callee = Some(compressed(f, &mut names).with_context(at)?);
        } else if let Some(c) = line.strip_prefix("calls=") {
            let count = first_number(c).with_context(at)?;
            let from_outside = current.as_deref().is_some_and(|f| allocator_entry(f).is_none());
            let entered = callee.as_deref().and_then(allocator_entry).filter(|_| from_outside);
            after_call = Some((count, entered));
        } else if line.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '*')) {
            let Some(name) = &current else { bail!("{}: a cost line before any fn=", at()) };
            let Some(event) = event else { bail!("{}: a cost line before the events: line", at()) };
            // Missing trailing counts are zeros, as the format allows.
            let cost = line.split_whitespace().nth(positions + event).map_or(Ok(0), parse_count).with_context(at)?;
            match after_call.take() {
                // A call's inclusive cost: the callee's, not the caller's own.
                Some((count, Some(allocates))) => {
                    profile.allocator += cost;
                    if allocates {
                        *profile.allocations.entry(name.clone()).or_default() += count;
                    }
                }
                Some((_, None)) => {}
                None => *profile.functions.entry(name.clone()).or_default() += cost,
            }
        }
    }
    let Some(total) = total else { bail!("no totals: or summary: line (is this a callgrind dump?)") };
    Ok(Profile { total, ..profile })
}

/// `(id) name` defines id as name, `(id)` recalls it, a bare `name` is itself; the name comes back short.
fn compressed(field: &str, names: &mut HashMap<String, String>) -> anyhow::Result<String> {
    let field = field.trim();
    let Some(rest) = field.strip_prefix('(') else { return Ok(short_name(field)) };
    let Some((id, name)) = rest.split_once(')') else { bail!("an unclosed name id in {field:?}") };
    let name = name.trim();
    if name.is_empty() {
        return names.get(id).cloned().with_context(|| format!("name id ({id}) used before it was named"));
    }
    let short = short_name(name);
    names.insert(id.to_string(), short.clone());
    Ok(short)
}

/// A function's name without generic arguments: `drop_in_place<hyper::…<…>>` becomes `drop_in_place<…>`,
/// while a qualified path's `<T as Trait>::f` keeps its types (with their own arguments elided). Rust's
/// monomorphized names run to thousands of characters, and two builds name the same code differently when a
/// type parameter changes.
pub fn short_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(200));
    let mut depth_elided = 0usize;
    let mut prev: Option<char> = None;
    for c in name.chars() {
        if depth_elided > 0 {
            match c {
                '<' => depth_elided += 1,
                '>' => {
                    depth_elided -= 1;
                    if depth_elided == 0 {
                        out.push_str("…>");
                    }
                }
                _ => {}
            }
        } else if c == '<' && prev.is_some_and(|p| p.is_alphanumeric() || p == '_') {
            out.push('<');
            depth_elided = 1;
        } else {
            out.push(c);
        }
        prev = Some(c);
    }
    out
}

fn first_number(s: &str) -> anyhow::Result<u64> {
    s.split_whitespace().next().map_or_else(|| bail!("no number in {s:?}"), parse_count)
}

fn parse_count(s: &str) -> anyhow::Result<u64> {
    s.parse().with_context(|| format!("{s:?} is not a count"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npositions: line\nevents: Ir\n\
summary: 1000\n\nob=(1) /bin/server\nfl=(1) src/main.rs\nfn=(1) server::main\n10 100\n+2 50\ncfn=(2) \
alloc::vec::Vec<T,A>::push\ncalls=3 20\n20 400\nfn=(2)\n20 380\n* 20\ncfn=(3) core::ptr::drop_in_place<a::B<c::D>>\n\
calls=1 5\n21 0\nfn=(3)\n5 450\n\ntotals: 1000\n";

    #[test]
    fn self_costs_leave_out_what_a_call_line_charges_and_add_to_the_total() {
        let p = parse(DUMP).expect("parses");
        assert_eq!(p.total, 1000);
        assert_eq!(p.functions["server::main"], 150, "the 400 after calls= is the callee's");
        assert_eq!(p.functions["alloc::vec::Vec<…>::push"], 400, "a recalled id, and a cost line with * position");
        assert_eq!(p.functions["core::ptr::drop_in_place<…>"], 450);
        assert_eq!(p.functions.values().sum::<u64>(), p.total);
    }

    const ALLOCATING_DUMP: &str = "events: Ir\nfn=(1) server::main\n10 100\ncfn=(2) __rustc::__rust_alloc\n\
calls=2 30\n11 60\ncfn=(3) free@@GLIBC_2.2.5\ncalls=2 40\n12 30\nfn=(2)\n30 10\ncfn=(4) malloc\ncalls=2 50\n31 50\n\
fn=(4)\n50 50\nfn=(3)\n40 30\nfn=(5) server::idle\n60 7\ncfn=(2)\ncalls=1 30\n61 25\ntotals: 222\n";

    #[test]
    fn the_allocator_is_what_calls_into_it_from_outside_cost_and_allocations_are_counted_by_caller() {
        let p = parse(ALLOCATING_DUMP).expect("parses");
        assert_eq!(p.total, 222);
        // main's two allocations (60) and two frees (30), idle's one allocation (25); __rust_alloc's own call
        // into malloc is inside the allocator, already in the 60 and 25.
        assert_eq!(p.allocator, 115);
        assert_eq!(p.total - p.allocator, 107, "main's and idle's own instructions");
        assert_eq!(p.allocations, [("server::main".to_string(), 2), ("server::idle".to_string(), 1)].into());
        assert_eq!(p.allocation_count(), 3, "frees are not allocations");
        assert_eq!(p.functions["malloc"], 50, "the allocator's functions keep their own instructions");
    }

    #[test]
    fn allocator_entries_are_known_by_name_whatever_their_version_or_namespace() {
        assert_eq!(allocator_entry("malloc"), Some(true));
        assert_eq!(allocator_entry("realloc@@GLIBC_2.2.5"), Some(true));
        assert_eq!(allocator_entry("__rustc::__rust_alloc_zeroed"), Some(true));
        assert_eq!(allocator_entry("__rust_dealloc"), Some(false));
        assert_eq!(allocator_entry("_int_malloc"), None, "an internal: reached through an entry");
        assert_eq!(allocator_entry("alloc::raw_vec::finish_grow"), None);
    }

    #[test]
    fn generic_arguments_are_elided_but_a_qualified_path_keeps_its_types() {
        assert_eq!(short_name("core::ptr::drop_in_place<a::B<c::D>>"), "core::ptr::drop_in_place<…>");
        assert_eq!(
            short_name("<hyper::proto::h1::role::Server as hyper::proto::h1::Http1Transaction>::parse"),
            "<hyper::proto::h1::role::Server as hyper::proto::h1::Http1Transaction>::parse"
        );
        assert_eq!(
            short_name("<alloc::vec::Vec<u8> as core::clone::Clone>::clone"),
            "<alloc::vec::Vec<…> as core::clone::Clone>::clone"
        );
        assert_eq!(short_name("serve::server::worker::{{closure}}"), "serve::server::worker::{{closure}}");
    }

    #[test]
    fn a_file_that_is_not_a_dump_is_refused_with_why() {
        let err = parse("hello\n").expect_err("no totals").to_string();
        assert!(err.contains("no totals"), "{err}");
        let err = parse("events: Ir\nfn=(7)\n").expect_err("unnamed id").to_string();
        assert!(format!("{err:#}").contains("line 2"), "{err}");
        let err = parse("events: Dr\n").expect_err("no Ir").to_string();
        assert!(err.contains("no Ir event"), "{err}");
    }
}
