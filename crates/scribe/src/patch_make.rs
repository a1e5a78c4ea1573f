//! Making a patch as npm diff-match-patch 1.0.5's `patch_toText(patch_make(from, to))` does: the crate's patch_make
//! on [`U16`] units, split surrogate pairs repaired where JS would write a patch `encodeURI` throws on, and every
//! patch checked to rebuild its target before it is stored.

use diff_match_patch_rs::{DiffMatchPatch, Ops, PatchInput};

use crate::js_unit::{U16, is_high, is_low, units};
use crate::patch::{Hunk, MARGIN, parse_header, patch_to_text};
use crate::patch_apply::patch_apply;

/// `patch_toText(patch_make(from, to))` as npm diff-match-patch writes it, or, where that throws, the repaired
/// equivalent. Every patch is checked to rebuild `to` from `from`; should one not (a bug), the patch is the
/// whole-text replacement, which is always correct.
pub(crate) fn make_patch(from: &str, to: &str) -> String {
    if from == to {
        return String::new();
    }
    let from16: Vec<u16> = from.encode_utf16().collect();
    let to16: Vec<u16> = to.encode_utf16().collect();
    let made = dmp_patch_make(from, to).and_then(|mut hunks| {
        if hunks.iter().any(|h| h.diffs.iter().any(|(_, t)| has_lone_surrogate(t))) {
            repair_split_surrogates(&mut hunks, &from16)?;
        }
        let (rebuilt, results) = patch_apply(&hunks, &from16)?;
        (rebuilt == to16 && results.iter().all(|ok| *ok)).then_some(hunks)
    });
    made.and_then(|hunks| patch_to_text(&hunks)).unwrap_or_else(|| whole_text_patch(&from16, &to16))
}

/// The crate's patch_make on UTF-16 units (diff_main with line mode, cleanupSemantic, cleanupEfficiency, context).
fn dmp_patch_make(from: &str, to: &str) -> Option<Vec<Hunk>> {
    let patches = DiffMatchPatch::new().patch_make::<U16>(PatchInput::new_text_text(from, to)).ok()?;
    patches
        .iter()
        .map(|p| {
            // The crate keeps the coordinates private; its Display writes them in the header line.
            let shown = p.to_string();
            let (start1, length1, start2, length2) = parse_header(shown.lines().next()?)?;
            let diffs = p.diffs().iter().map(|d| (d.op(), units(d.data()))).collect();
            Some(Hunk { start1, start2, length1, length2, diffs })
        })
        .collect()
}

fn has_lone_surrogate(t: &[u16]) -> bool {
    char::decode_utf16(t.iter().copied()).any(|c| c.is_err())
}

/// Makes every diff of every hunk whole UTF-16 without changing what the patch does (npm diff-match-patch 1.0.5
/// splits surrogate pairs, then `encodeURI` throws). Walking the hunks as patch_make built them (each `start2` is
/// a position in `text` with the earlier hunks applied): 1) a hunk boundary inside a pair moves out by one unit;
/// 2) inside the hunk, an equality that starts with a low surrogate gives it to the edit before it, one that ends
/// with a high surrogate gives it to the edit after it (to both deletion and insertion, creating either); emptied
/// equalities vanish and their edits merge; 3) the edge contexts grow back to at least [`MARGIN`] units, by whole
/// characters, where the text has them. generate.mjs has the same function, and checks that Node applies each
/// repaired patch exactly (no fuzzy matching) to the expected text.
fn repair_split_surrogates(hunks: &mut [Hunk], text: &[u16]) -> Option<()> {
    enum Item {
        Equal(Vec<u16>),
        Edit(Vec<u16>, Vec<u16>),
    }
    let mut cur = text.to_vec();
    for h in hunks.iter_mut() {
        let old = h.text1();
        if cur.get(h.start2..h.start2 + old.len())? != old.as_slice() {
            return None;
        }
        let mut old_len = old.len();
        let splits_pair = |at: usize| at > 0 && at < cur.len() && is_high(cur[at - 1]) && is_low(cur[at]);
        if splits_pair(h.start2) {
            let u = cur[h.start2 - 1];
            match h.diffs.first_mut() {
                Some((Ops::Equal, t)) => t.insert(0, u),
                _ => h.diffs.insert(0, (Ops::Equal, vec![u])),
            }
            h.start1 = h.start1.checked_sub(1)?;
            h.start2 -= 1;
            h.length1 += 1;
            h.length2 += 1;
            old_len += 1;
        }
        let end = h.start2 + old_len;
        if splits_pair(end) {
            let u = cur[end];
            match h.diffs.last_mut() {
                Some((Ops::Equal, t)) => t.push(u),
                _ => h.diffs.push((Ops::Equal, vec![u])),
            }
            h.length1 += 1;
            h.length2 += 1;
            old_len += 1;
        }

        let mut items: Vec<Item> = Vec::new();
        for (op, t) in h.diffs.drain(..) {
            match (op, items.last_mut()) {
                (Ops::Equal, Some(Item::Equal(e))) => e.extend(t),
                (Ops::Equal, _) => items.push(Item::Equal(t)),
                (Ops::Delete, Some(Item::Edit(d, _))) => d.extend(t),
                (Ops::Insert, Some(Item::Edit(_, i))) => i.extend(t),
                (Ops::Delete, _) => items.push(Item::Edit(t, Vec::new())),
                (Ops::Insert, _) => items.push(Item::Edit(Vec::new(), t)),
            }
        }
        for k in 0..items.len() {
            let (before, rest) = items.split_at_mut(k);
            let Some((Item::Equal(eq), after)) = rest.split_first_mut() else { continue };
            if let (Some(Item::Edit(d, i)), Some(&u)) = (before.last_mut(), eq.first())
                && is_low(u)
            {
                d.push(u);
                i.push(u);
                eq.remove(0);
            }
            if let (Some(Item::Edit(d, i)), Some(&u)) = (after.first_mut(), eq.last())
                && is_high(u)
            {
                d.insert(0, u);
                i.insert(0, u);
                eq.pop();
            }
        }
        let mut merged: Vec<Item> = Vec::new();
        for item in items {
            match (item, merged.last_mut()) {
                (Item::Equal(e), _) if e.is_empty() => {}
                (Item::Edit(d, i), Some(Item::Edit(md, mi))) => {
                    md.extend(d);
                    mi.extend(i);
                }
                (item, _) => merged.push(item),
            }
        }
        for item in merged {
            match item {
                Item::Equal(e) => h.diffs.push((Ops::Equal, e)),
                Item::Edit(d, i) => {
                    if !d.is_empty() {
                        h.diffs.push((Ops::Delete, d));
                    }
                    if !i.is_empty() {
                        h.diffs.push((Ops::Insert, i));
                    }
                }
            }
        }
        // Keep Patch_Margin units of context on each side where the text has them, as patch_make does: Node's
        // patch_apply pads a shorter edge context with \x01..\x04, and the hunk would no longer fit exactly.
        let mut lead = match h.diffs.first() {
            Some((Ops::Equal, t)) => t.len(),
            _ => 0,
        };
        while lead < MARGIN && h.start2 > 0 {
            let n = if h.start2 >= 2 && is_low(cur[h.start2 - 1]) && is_high(cur[h.start2 - 2]) { 2 } else { 1 };
            let grown = cur[h.start2 - n..h.start2].to_vec();
            match h.diffs.first_mut() {
                Some((Ops::Equal, t)) => drop(t.splice(0..0, grown)),
                _ => h.diffs.insert(0, (Ops::Equal, grown)),
            }
            h.start1 = h.start1.checked_sub(n)?;
            h.start2 -= n;
            h.length1 += n;
            h.length2 += n;
            old_len += n;
            lead += n;
        }
        let mut trail = match h.diffs.last() {
            Some((Ops::Equal, t)) => t.len(),
            _ => 0,
        };
        let mut end = h.start2 + old_len;
        while trail < MARGIN && end < cur.len() {
            let n = if end + 1 < cur.len() && is_high(cur[end]) && is_low(cur[end + 1]) { 2 } else { 1 };
            let grown = &cur[end..end + n];
            match h.diffs.last_mut() {
                Some((Ops::Equal, t)) => t.extend_from_slice(grown),
                _ => h.diffs.push((Ops::Equal, grown.to_vec())),
            }
            h.length1 += n;
            h.length2 += n;
            old_len += n;
            trail += n;
            end += n;
        }
        let after = h.text2();
        cur.splice(h.start2..h.start2 + old_len, after);
    }
    Some(())
}

/// The patch that replaces all of `from` with `to`: one hunk, no context. Correct in either runtime.
fn whole_text_patch(from: &[u16], to: &[u16]) -> String {
    if from == to {
        return String::new();
    }
    let mut diffs = Vec::new();
    if !from.is_empty() {
        diffs.push((Ops::Delete, from.to_vec()));
    }
    if !to.is_empty() {
        diffs.push((Ops::Insert, to.to_vec()));
    }
    let hunk = Hunk { start1: 0, start2: 0, length1: from.len(), length2: to.len(), diffs };
    // `from` and `to` come from Rust strings, so they are whole UTF-16 and always encode.
    patch_to_text(&[hunk]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::dmp_fixtures::{apply_patch_text, fixtures};

    /// Rust writes exactly the patch text Node writes, including for non-ASCII and astral text. Where the
    /// original throws (split surrogate pair), Rust writes the repaired patch that generate.mjs checked in Node.
    #[test]
    fn history_patches_match_node_byte_for_byte() {
        for p in fixtures().pairs {
            assert_eq!(make_patch(&p.new, ""), p.creation_patch, "creation patch: {}", p.name);
            assert_eq!(make_patch(&p.new, &p.old), p.update_patch, "update patch: {}", p.name);
        }
        for h in fixtures().histories {
            assert_eq!(make_patch(&h.rows[0], ""), h.patches[0], "{}", h.name);
            for i in 1..h.rows.len() {
                assert_eq!(make_patch(&h.rows[i], &h.rows[i - 1]), h.patches[i], "{} step {i}", h.name);
            }
        }
    }

    /// The fallback for a patch that fails its self-check is a plain replacement; it must apply too.
    #[test]
    fn history_whole_text_fallback_applies() {
        for p in fixtures().pairs.iter().take(20) {
            let from: Vec<u16> = p.new.encode_utf16().collect();
            let to: Vec<u16> = p.old.encode_utf16().collect();
            assert_eq!(apply_patch_text(&whole_text_patch(&from, &to), &p.new), p.old, "{}", p.name);
            assert_eq!(apply_patch_text(&whole_text_patch(&from, &[]), &p.new), "", "{}", p.name);
        }
        assert_eq!(whole_text_patch(&[0x61], &[0x62]), "@@ -1 +1 @@\n-a\n+b\n");
    }
}
