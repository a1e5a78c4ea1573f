//! The diff engine under npm diff-match-patch 1.0.5's patch_apply, on UTF-16 code units: diff_main through
//! diff-match-patch-rs, and ports of the helpers patch_apply calls (diff_text1/2, diff_levenshtein, diff_xIndex,
//! diff_cleanupSemanticLossless with JS's character classes), so a fuzzy apply rediffs as Node does.

use diff_match_patch_rs::traits::DType;
use diff_match_patch_rs::{DiffMatchPatch, Ops};

use crate::js_unit::{U16, ends_with_blank_line, starts_with_blank_line};

/// Diffs as diff-match-patch keeps them: an operation and its UTF-16 code units.
pub(crate) type Diffs = Vec<(Ops, Vec<u16>)>;

/// The text a list of diffs starts from (diff_text1).
pub(crate) fn text1(diffs: &[(Ops, Vec<u16>)]) -> Vec<u16> {
    diffs.iter().filter(|(op, _)| *op != Ops::Insert).flat_map(|(_, t)| t.iter().copied()).collect()
}

/// The text a list of diffs leads to (diff_text2).
pub(crate) fn text2(diffs: &[(Ops, Vec<u16>)]) -> Vec<u16> {
    diffs.iter().filter(|(op, _)| *op != Ops::Delete).flat_map(|(_, t)| t.iter().copied()).collect()
}

/// diff_main(a, b, false) on code units. The crate's Compat mode diffs `char`s; mapping each unit to one char
/// (surrogates to plane-15 private use, which no unit maps to otherwise) makes it diff units. Without line mode
/// the diff itself uses no character classes, so this is JS's diff.
pub(crate) fn diff_main(a: &[u16], b: &[u16]) -> Option<Diffs> {
    fn to_chars(units: &[u16]) -> String {
        units
            .iter()
            .filter_map(|&u| {
                let c = if (0xD800..=0xDFFF).contains(&u) { 0xF0000 + u32::from(u - 0xD800) } else { u32::from(u) };
                char::from_u32(c)
            })
            .collect()
    }
    fn to_unit(c: char) -> u16 {
        let c = u32::from(c);
        let u = if c >= 0xF0000 { c - 0xF0000 + 0xD800 } else { c };
        u16::try_from(u).unwrap_or(0xFFFD)
    }
    let mut dmp = DiffMatchPatch::new();
    dmp.set_checklines(false);
    let diffs = dmp.diff_main::<diff_match_patch_rs::Compat>(&to_chars(a), &to_chars(b)).ok()?;
    Some(diffs.iter().map(|d| (d.op(), d.data().iter().map(|&c| to_unit(c)).collect())).collect())
}

/// diff_levenshtein.
pub(crate) fn levenshtein(diffs: &[(Ops, Vec<u16>)]) -> usize {
    let (mut total, mut inserted, mut deleted) = (0, 0, 0);
    for (op, t) in diffs {
        match op {
            Ops::Insert => inserted += t.len(),
            Ops::Delete => deleted += t.len(),
            Ops::Equal => {
                total += inserted.max(deleted);
                inserted = 0;
                deleted = 0;
            }
        }
    }
    total + inserted.max(deleted)
}

/// diff_xIndex: the position in the second text of position `loc` of the first.
pub(crate) fn x_index(diffs: &[(Ops, Vec<u16>)], loc: usize) -> usize {
    let (mut chars1, mut chars2, mut last1, mut last2) = (0, 0, 0, 0);
    let mut overshot = None;
    for (op, t) in diffs {
        if *op != Ops::Insert {
            chars1 += t.len();
        }
        if *op != Ops::Delete {
            chars2 += t.len();
        }
        if chars1 > loc {
            overshot = Some(*op);
            break;
        }
        last1 = chars1;
        last2 = chars2;
    }
    if overshot == Some(Ops::Delete) {
        // The location was deleted.
        return last2;
    }
    last2 + (loc - last1)
}

/// diff_cleanupSemanticLossless: slides single edits between equalities to word and line boundaries.
pub(crate) fn cleanup_semantic_lossless(diffs: &mut Diffs) {
    let mut pointer = 1;
    while pointer + 1 < diffs.len() {
        if diffs[pointer - 1].0 == Ops::Equal && diffs[pointer + 1].0 == Ops::Equal {
            let mut equality1 = diffs[pointer - 1].1.clone();
            let mut edit = diffs[pointer].1.clone();
            let mut equality2 = diffs[pointer + 1].1.clone();
            // Shift the edit as far left as possible.
            let common = equality1.iter().rev().zip(edit.iter().rev()).take_while(|(a, b)| a == b).count();
            if common > 0 {
                let shared = edit[edit.len() - common..].to_vec();
                equality1.truncate(equality1.len() - common);
                edit = [&shared[..], &edit[..edit.len() - common]].concat();
                equality2 = [&shared[..], &equality2[..]].concat();
            }
            // Step right one unit at a time, keeping the best-scoring position.
            let mut best = (equality1.clone(), edit.clone(), equality2.clone());
            let mut best_score = semantic_score(&equality1, &edit) + semantic_score(&edit, &equality2);
            while !edit.is_empty() && edit.first() == equality2.first() {
                equality1.push(edit[0]);
                edit.remove(0);
                edit.push(equality2.remove(0));
                let score = semantic_score(&equality1, &edit) + semantic_score(&edit, &equality2);
                // >= prefers trailing to leading whitespace on edits.
                if score >= best_score {
                    best_score = score;
                    best = (equality1.clone(), edit.clone(), equality2.clone());
                }
            }
            if diffs[pointer - 1].1 != best.0 {
                let (best1, best_edit, best2) = best;
                if best1.is_empty() {
                    diffs.remove(pointer - 1);
                    pointer -= 1;
                } else {
                    diffs[pointer - 1].1 = best1;
                }
                diffs[pointer].1 = best_edit;
                if best2.is_empty() {
                    diffs.remove(pointer + 1);
                    pointer -= 1;
                } else {
                    diffs[pointer + 1].1 = best2;
                }
            }
        }
        pointer += 1;
    }
}

/// diff_cleanupSemanticScore_: 6 (edge) .. 0 (mid-word), with JS's character classes.
fn semantic_score(one: &[u16], two: &[u16]) -> u8 {
    let (Some(&c1), Some(&c2)) = (one.last(), two.first()) else { return 6 };
    let (u1, u2) = (U16(c1), U16(c2));
    let non_alnum1 = !u1.is_alphanum();
    let non_alnum2 = !u2.is_alphanum();
    let space1 = non_alnum1 && u1.is_whitespace();
    let space2 = non_alnum2 && u2.is_whitespace();
    let break1 = space1 && (u1.is_newline() || u1.is_carriage());
    let break2 = space2 && (u2.is_newline() || u2.is_carriage());
    let blank1 = break1 && ends_with_blank_line(one);
    let blank2 = break2 && starts_with_blank_line(two);
    if blank1 || blank2 {
        5
    } else if break1 || break2 {
        4
    } else if non_alnum1 && !space1 && space2 {
        3
    } else if space1 || space2 {
        2
    } else if non_alnum1 || non_alnum2 {
        1
    } else {
        0
    }
}
