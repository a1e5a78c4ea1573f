//! Version history: the diff-match-patch patch texts stored in `<component>_history.patches`.
//!
//! The original Scribe stores, per record, a JSON array of patch texts made by npm `diff-match-patch` 1.0.5:
//! index 0 turns the first row's JSON into "", each later entry turns the updated row's JSON into the previous one.
//! Both runtimes may read and write the same rows, so patch texts must be byte-compatible in both directions.
//!
//! JavaScript strings are UTF-16 and npm diff-match-patch's offsets count code units, so everything below works on
//! them: patches are made by diff-match-patch-rs's algorithms running on a UTF-16 unit with JS's character classes
//! (`patch_make.rs`, `js_unit.rs`), applied by a port of the JS `patch_apply` (`patch_apply.rs`, with the diff
//! helpers it calls in `diff.rs`), and written and read as patch text (`patch.rs`) with JS's
//! `encodeURI`/`decodeURI` rules (`js_uri.rs`). Fixtures made by the npm package prove it
//! (`tests/fixtures/dmp/README.md`): Rust writes Node's patch text byte for byte and applies Node's patches to
//! Node's result, fuzzy matches included.
//!
//! Where we differ from the original, on purpose:
//! - npm diff-match-patch 1.0.5 splits surrogate pairs (an emoji replaced by one sharing half its code units, or a
//!   hunk's context cutting one); `encodeURI` then throws and the original fails the update. We write the same
//!   edit with pairs kept whole (`repair_split_surrogates` in `patch_make.rs`); Node 1.0.5 applies it to the same
//!   text.
//! - The walk stops at a hunk that fails to apply (the original goes on with that hunk skipped, producing a version
//!   that never existed) and at a result that is not JSON (where the original's `JSON.parse` throws).
//! - Diffs that reach diff-match-patch's 1 s deadline (rows of megabytes) depend on timing in either runtime; the
//!   patches stay correct, their text may differ.

use crate::patch::parse_patch_text;
use crate::patch_apply::patch_apply;
use crate::patch_make::make_patch;

/// The creation patch: turns `row_json` into "".
pub fn creation_patch(row_json: &str) -> String {
    make_patch(row_json, "")
}

/// The patch appended on update: turns `new_json` into `previous_json`.
pub fn update_patch(new_json: &str, previous_json: &str) -> String {
    make_patch(new_json, previous_json)
}

/// Versions newest first: `current_json` then each older version rebuilt from `patches[len-1..=1]`
/// (index 0, the creation patch, is skipped as the original does).
///
/// The walk stops, returning what was rebuilt so far, at a patch that does not parse, has a hunk that does not
/// apply, or yields text that is not JSON (where the original would throw from `JSON.parse`).
pub fn versions(current_json: &str, patches: &[String]) -> Vec<String> {
    let mut out = vec![current_json.to_owned()];
    for patch in patches.iter().skip(1).rev() {
        let Some(older) = out.last().and_then(|current| apply_patch(patch, current)) else { break };
        out.push(older);
    }
    out
}

/// Applies one stored patch text to `current` as the original's history walk does, and checks that every hunk
/// applied and the result is JSON.
fn apply_patch(patch: &str, current: &str) -> Option<String> {
    let hunks = parse_patch_text(patch)?;
    let (older, results) = patch_apply(&hunks, &current.encode_utf16().collect::<Vec<_>>())?;
    if !results.iter().all(|ok| *ok) {
        return None;
    }
    let older = String::from_utf16(&older).ok()?;
    serde_json::from_str::<serde::de::IgnoredAny>(&older).is_ok().then_some(older)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::dmp_fixtures::fixtures;

    #[test]
    fn history_versions_match_node_walk() {
        for p in fixtures().pairs {
            let patches = vec![creation_patch(&p.old), p.update_patch.clone()];
            assert_eq!(versions(&p.new, &patches), p.versions, "{}", p.name);
        }
        for h in fixtures().histories {
            assert_eq!(versions(h.rows.last().unwrap(), &h.patches), h.versions, "{}", h.name);
            let mut oldest_first = h.versions.clone();
            oldest_first.reverse();
            assert_eq!(oldest_first, h.rows, "{}", h.name);
        }
    }

    #[test]
    fn history_round_trip_through_rust_only() {
        let rows = [
            r#"{"id":1,"data":{"title":"メモ 📝"},"date_created":"2026-11-29T20:00:00.000Z","modified_by":1}"#,
            r#"{"id":1,"data":{"title":"メモ 📞"},"date_created":"2026-11-29T20:00:00.000Z","modified_by":2}"#,
            r#"{"id":1,"data":{"title":"メモ 📞🐀","x":[1]},"date_created":"2026-11-29T20:00:00.000Z","modified_by":2}"#,
            r#"{"id":1,"data":{"title":"🀀","x":[1]},"date_created":"2026-11-29T20:00:00.000Z","modified_by":3}"#,
        ];
        let mut patches = vec![creation_patch(rows[0])];
        for w in rows.windows(2) {
            patches.push(update_patch(w[1], w[0]));
        }
        let mut expected: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
        expected.reverse();
        assert_eq!(versions(rows[3], &patches), expected);
        assert_eq!(creation_patch(""), "");
        assert_eq!(update_patch(rows[1], rows[1]), "");
        assert_eq!(versions(rows[0], &[creation_patch(rows[0])]), vec![rows[0].to_string()]);
    }

    #[test]
    fn history_walk_stops_at_a_bad_patch() {
        let v1 = r#"{"a":"one"}"#;
        let v2 = r#"{"a":"two"}"#;
        let v3 = r#"{"a":"three"}"#;
        let good = [creation_patch(v1), update_patch(v2, v1), update_patch(v3, v2)];
        assert_eq!(versions(v3, &good), vec![v3, v2, v1]);
        for bad in ["@@ nonsense @@\n", "@@ -1,3 +1,3 @@\n-%E3%81\n", "@@ -1,3 +1,3 @@\n*abc\n", "@@ -0 +1 @@\n-a\n"] {
            let patches = [good[0].clone(), bad.to_owned(), good[2].clone()];
            assert_eq!(versions(v3, &patches), vec![v3, v2], "{bad:?}");
        }
        // A hunk whose text is nowhere in the row: no fuzzy match, the walk ends without panicking.
        let elsewhere = update_patch(r#"{"zzzzzzzzzzzzzzzzzzzz":"qqqqqqqqqqqqqqqq"}"#, r#"{"b":1}"#);
        let patches = [good[0].clone(), elsewhere, good[2].clone()];
        assert_eq!(versions(v3, &patches), vec![v3, v2]);
        // A patch that applies but leaves something that is not JSON ends the walk too.
        let broken = update_patch(v2, r#"{"a":"one""#);
        assert_eq!(versions(v3, &[good[0].clone(), broken, good[2].clone()]), vec![v3, v2]);
    }

    #[test]
    fn history_fuzzy_apply_tolerates_a_drifted_row() {
        // The stored row was changed without a history entry (or serialised differently) far from the hunk:
        // the hunk still fits exactly where it says.
        let v1 = r#"{"title":"first","body":"0123456789abcdefghijklmnop","n":1}"#;
        let v2 = r#"{"title":"second","body":"0123456789abcdefghijklmnop","n":1}"#;
        let drifted = r#"{"title":"second","body":"0123456789abcdefghijklmnop","n":1.0}"#;
        let patches = [creation_patch(v1), update_patch(v2, v1)];
        assert_eq!(versions(drifted, &patches)[1], r#"{"title":"first","body":"0123456789abcdefghijklmnop","n":1.0}"#);
        // Changed inside the hunk's context: exact fit fails and fuzzy matching takes over.
        let drifted = r#"{"title":"second!","body":"0123456789abcdefghijklmnop","n":1}"#;
        let rebuilt = versions(drifted, &patches);
        assert_eq!(rebuilt.len(), 2);
        assert!(rebuilt[1].contains("first"), "{rebuilt:?}");
    }
}
