//! The diff-match-patch fixtures made by the npm package (tests/fixtures/dmp), shared by the tests of the
//! modules that make, apply and walk patches. Test-only.

#![allow(clippy::unwrap_used)]

use crate::patch::parse_patch_text;
use crate::patch_apply::patch_apply;

#[derive(serde::Deserialize)]
pub(crate) struct Fixtures {
    pub(crate) pairs: Vec<Pair>,
    pub(crate) histories: Vec<History>,
    pub(crate) drifts: Vec<Drift>,
}

#[derive(serde::Deserialize)]
pub(crate) struct Pair {
    pub(crate) name: String,
    pub(crate) old: String,
    pub(crate) new: String,
    pub(crate) creation_patch: String,
    pub(crate) update_patch: String,
    pub(crate) versions: Vec<String>,
    #[serde(default)]
    pub(crate) original_error: Option<String>,
}

#[derive(serde::Deserialize)]
pub(crate) struct History {
    pub(crate) name: String,
    pub(crate) rows: Vec<String>,
    pub(crate) patches: Vec<String>,
    pub(crate) versions: Vec<String>,
}

#[derive(serde::Deserialize)]
pub(crate) struct Drift {
    pub(crate) name: String,
    pub(crate) patch: String,
    pub(crate) text: String,
    #[serde(default)]
    pub(crate) result: Option<String>,
    #[serde(default)]
    pub(crate) result_units: Option<Vec<u16>>,
    pub(crate) results: Vec<bool>,
}

pub(crate) fn fixtures() -> Fixtures {
    serde_json::from_str(include_str!("../tests/fixtures/dmp/fixtures.json")).unwrap()
}

/// Applies a patch text that must fit exactly: every hunk applies.
pub(crate) fn apply_patch_text(patch: &str, text: &str) -> String {
    let hunks = parse_patch_text(patch).unwrap();
    let (out, results) = patch_apply(&hunks, &text.encode_utf16().collect::<Vec<_>>()).unwrap();
    assert!(results.iter().all(|ok| *ok));
    String::from_utf16(&out).unwrap()
}

#[test]
fn history_fixtures_cover_the_hard_cases() {
    let f = fixtures();
    let astral = |s: &str| s.chars().any(|c| u32::from(c) > 0xFFFF);
    assert!(f.pairs.len() >= 50 && f.histories.len() >= 5);
    assert!(f.pairs.iter().filter(|p| astral(&p.new) && p.original_error.is_none()).count() >= 10);
    assert!(f.pairs.iter().filter(|p| p.original_error.is_some()).count() >= 3);
    assert!(f.pairs.iter().any(|p| p.update_patch.matches("@@ -").count() >= 3));
}
