//! npm diff-match-patch 1.0.5's patch_apply, step for step on UTF-16 code units: padding, patch_splitMax,
//! match_main with its bitap search, and the rediff of an imperfect match. The crate's fuzzy matcher differs from
//! JS's in its search window and float precision, so this port, not the crate, applies stored patches: fuzzy
//! results are Node's too.

use diff_match_patch_rs::Ops;

use crate::diff::{Diffs, cleanup_semantic_lossless, diff_main, levenshtein, text1, text2, x_index};
use crate::patch::{Hunk, MARGIN};

// diff-match-patch's settings, left at their defaults by the original.
const MATCH_MAX_BITS: usize = 32;
const MATCH_THRESHOLD: f64 = 0.5;
const MATCH_DISTANCE: f64 = 1000.0;
const PATCH_DELETE_THRESHOLD: f64 = 0.5;

/// A hunk inside patch_apply: `start1` plays no part in applying, and splitting may make it negative in JS.
#[derive(Debug, Clone)]
struct Piece {
    start2: isize,
    length1: usize,
    length2: usize,
    diffs: Diffs,
}

/// JS `s.substring(a, b)`: bounds clamped to the string, swapped when reversed.
fn substring(s: &[u16], a: isize, b: isize) -> &[u16] {
    let clamp = |x: isize| usize::try_from(x).unwrap_or(0).min(s.len());
    let (a, b) = (clamp(a), clamp(b));
    &s[a.min(b)..a.max(b)]
}

/// npm diff-match-patch 1.0.5's patch_apply, step for step on UTF-16 code units (padding, splitMax, match_main
/// with its bitap search, the imperfect-match rediff), so fuzzy results are Node's too. Returns the text and one
/// flag per (split) hunk. `None` only where the crate's diff fails, which it should not.
pub(crate) fn patch_apply(hunks: &[Hunk], text: &[u16]) -> Option<(Vec<u16>, Vec<bool>)> {
    const PAD: [u16; MARGIN] = [1, 2, 3, 4];
    if hunks.is_empty() {
        return Some((text.to_vec(), Vec::new()));
    }
    let mut pieces: Vec<Piece> = hunks
        .iter()
        .map(|h| Piece {
            start2: h.start2 as isize + MARGIN as isize,
            length1: h.length1,
            length2: h.length2,
            diffs: h.diffs.clone(),
        })
        .collect();
    // patch_addPadding
    if let Some(first) = pieces.first_mut() {
        match first.diffs.first_mut() {
            Some((Ops::Equal, t)) if t.len() < MARGIN => {
                let extra = MARGIN - t.len();
                let grown = [&PAD[t.len()..], t.as_slice()].concat();
                *t = grown;
                first.start2 -= extra as isize;
                first.length1 += extra;
                first.length2 += extra;
            }
            Some((Ops::Equal, _)) => {}
            _ => {
                first.diffs.insert(0, (Ops::Equal, PAD.to_vec()));
                first.start2 -= MARGIN as isize;
                first.length1 += MARGIN;
                first.length2 += MARGIN;
            }
        }
    }
    if let Some(last) = pieces.last_mut() {
        match last.diffs.last_mut() {
            Some((Ops::Equal, t)) if t.len() < MARGIN => {
                let extra = MARGIN - t.len();
                t.extend_from_slice(&PAD[..extra]);
                // Sic: JS grows length1 only here.
                last.length1 += extra;
            }
            Some((Ops::Equal, _)) => {}
            _ => {
                last.diffs.push((Ops::Equal, PAD.to_vec()));
                last.length1 += MARGIN;
                last.length2 += MARGIN;
            }
        }
    }
    let mut text: Vec<u16> = PAD.iter().chain(text).chain(&PAD).copied().collect();
    let pieces = split_max(pieces);

    let max = MATCH_MAX_BITS as isize;
    let mut delta: isize = 0;
    let mut results = Vec::with_capacity(pieces.len());
    for p in &pieces {
        let expected = p.start2 + delta;
        let old = text1(&p.diffs);
        let len1 = old.len() as isize;
        let mut end_loc = None;
        let start_loc = if old.len() > MATCH_MAX_BITS {
            // Only a monster delete is still this long after split_max: match its two ends.
            match_main(&text, &old[..MATCH_MAX_BITS], expected).and_then(|start| {
                end_loc = match_main(&text, &old[old.len() - MATCH_MAX_BITS..], expected + len1 - max);
                end_loc.filter(|end| start < *end).map(|_| start)
            })
        } else {
            match_main(&text, &old, expected)
        };
        let Some(start) = start_loc else {
            results.push(false);
            delta -= p.length2 as isize - p.length1 as isize;
            continue;
        };
        results.push(true);
        let start = start as isize;
        delta = start - expected;
        let found = match end_loc {
            None => substring(&text, start, start + len1),
            Some(end) => substring(&text, start, end as isize + max),
        }
        .to_vec();
        let end = text.len() as isize;
        if old == found {
            text = [substring(&text, 0, start), &text2(&p.diffs), substring(&text, start + len1, end)].concat();
            continue;
        }
        let mut diffs = diff_main(&old, &found)?;
        if old.len() > MATCH_MAX_BITS && levenshtein(&diffs) as f64 / old.len() as f64 > PATCH_DELETE_THRESHOLD {
            if let Some(r) = results.last_mut() {
                *r = false;
            }
            continue;
        }
        cleanup_semantic_lossless(&mut diffs);
        let mut index1 = 0;
        let mut index2 = 0;
        for (op, t) in &p.diffs {
            if *op != Ops::Equal {
                index2 = x_index(&diffs, index1) as isize;
            }
            let end = text.len() as isize;
            match op {
                Ops::Insert => {
                    text = [substring(&text, 0, start + index2), t, substring(&text, start + index2, end)].concat();
                }
                Ops::Delete => {
                    let to = start + x_index(&diffs, index1 + t.len()) as isize;
                    text = [substring(&text, 0, start + index2), substring(&text, to, end)].concat();
                }
                Ops::Equal => {}
            }
            if *op != Ops::Delete {
                index1 += t.len();
            }
        }
    }
    let end = text.len() as isize;
    Some((substring(&text, MARGIN as isize, end - MARGIN as isize).to_vec(), results))
}

/// patch_splitMax: cuts hunks longer than the bitap width into pieces with rolling context.
fn split_max(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut out = Vec::with_capacity(pieces.len());
    for big in pieces {
        if big.length1 <= MATCH_MAX_BITS {
            out.push(big);
            continue;
        }
        let mut start2 = big.start2;
        let mut rest: std::collections::VecDeque<(Ops, Vec<u16>)> = big.diffs.into();
        let mut precontext: Vec<u16> = Vec::new();
        while !rest.is_empty() {
            let mut piece =
                Piece { start2: start2 - precontext.len() as isize, length1: 0, length2: 0, diffs: Vec::new() };
            let mut empty = true;
            if !precontext.is_empty() {
                piece.length1 = precontext.len();
                piece.length2 = precontext.len();
                piece.diffs.push((Ops::Equal, precontext.clone()));
            }
            while piece.length1 < MATCH_MAX_BITS - MARGIN {
                let Some((op, t)) = rest.front_mut() else { break };
                if *op == Ops::Insert {
                    piece.length2 += t.len();
                    start2 += t.len() as isize;
                    empty = false;
                    piece.diffs.extend(rest.pop_front());
                } else if *op == Ops::Delete
                    && piece.diffs.len() == 1
                    && piece.diffs[0].0 == Ops::Equal
                    && t.len() > 2 * MATCH_MAX_BITS
                {
                    // A large deletion goes in one chunk.
                    piece.length1 += t.len();
                    empty = false;
                    piece.diffs.extend(rest.pop_front());
                } else {
                    let take = t.len().min(MATCH_MAX_BITS - piece.length1 - MARGIN);
                    piece.length1 += take;
                    if *op == Ops::Equal {
                        piece.length2 += take;
                        start2 += take as isize;
                    } else {
                        empty = false;
                    }
                    let taken: Vec<u16> = t.drain(..take).collect();
                    piece.diffs.push((*op, taken));
                    if t.is_empty() {
                        rest.pop_front();
                    }
                }
            }
            precontext = text2(&piece.diffs);
            precontext.drain(..precontext.len().saturating_sub(MARGIN));
            let mut postcontext = text1(rest.make_contiguous());
            postcontext.truncate(MARGIN);
            if !postcontext.is_empty() {
                piece.length1 += postcontext.len();
                piece.length2 += postcontext.len();
                match piece.diffs.last_mut() {
                    Some((Ops::Equal, t)) => t.extend(postcontext),
                    _ => piece.diffs.push((Ops::Equal, postcontext)),
                }
            }
            if !empty {
                out.push(piece);
            }
        }
    }
    out
}

/// match_main: `pattern` near `loc` in `text`, exactly there if possible, else by bitap.
fn match_main(text: &[u16], pattern: &[u16], loc: isize) -> Option<usize> {
    let loc = usize::try_from(loc).unwrap_or(0).min(text.len());
    if text == pattern {
        Some(0)
    } else if text.is_empty() {
        None
    } else if substring(text, loc as isize, (loc + pattern.len()) as isize) == pattern {
        Some(loc)
    } else {
        match_bitap(text, pattern, loc)
    }
}

/// match_bitap_, with JS's int32 bit arithmetic (u32 here) and double scores.
fn match_bitap(text: &[u16], pattern: &[u16], loc: usize) -> Option<usize> {
    let plen = pattern.len();
    if plen == 0 || plen > MATCH_MAX_BITS {
        // JS throws on a long pattern; patch_apply never makes one. An empty one matched exactly above.
        return None;
    }
    let mut alphabet: std::collections::HashMap<u16, u32> = std::collections::HashMap::new();
    for (i, &c) in pattern.iter().enumerate() {
        *alphabet.entry(c).or_insert(0) |= 1 << (plen - i - 1);
    }
    let loc = loc as isize;
    let tlen = text.len() as isize;
    let score = |errors: usize, x: isize| errors as f64 / plen as f64 + (loc - x).abs() as f64 / MATCH_DISTANCE;

    let mut threshold = MATCH_THRESHOLD;
    if let Some(best) = index_of(text, pattern, loc as usize) {
        threshold = score(0, best as isize).min(threshold);
        if let Some(best) = last_index_of(text, pattern, loc as usize + plen) {
            threshold = score(0, best as isize).min(threshold);
        }
    }

    let matchmask: u32 = 1 << (plen - 1);
    let mut best_loc = None;
    let mut bin_max = plen as isize + tlen;
    let mut last_rd: Vec<u32> = Vec::new();
    for d in 0..plen {
        let mut bin_min = 0;
        let mut bin_mid = bin_max;
        while bin_min < bin_mid {
            if score(d, loc + bin_mid) <= threshold {
                bin_min = bin_mid;
            } else {
                bin_max = bin_mid;
            }
            bin_mid = (bin_max - bin_min) / 2 + bin_min;
        }
        bin_max = bin_mid;
        let mut start = (loc - bin_mid + 1).max(1);
        let finish = (loc + bin_mid).min(tlen) + plen as isize;
        let size = usize::try_from(finish + 2).ok()?;
        let mut rd = vec![0u32; size];
        rd[size - 1] = (1u32 << d).wrapping_sub(1);
        let last = |j: isize| usize::try_from(j).ok().and_then(|j| last_rd.get(j)).copied().unwrap_or(0);
        let mut j = finish;
        while j >= start {
            let ju = j as usize;
            let char_match = text.get(ju - 1).and_then(|c| alphabet.get(c)).copied().unwrap_or(0);
            rd[ju] = ((rd[ju + 1] << 1) | 1) & char_match;
            if d > 0 {
                rd[ju] |= (((last(j + 1) | last(j)) << 1) | 1) | last(j + 1);
            }
            if rd[ju] & matchmask != 0 {
                let s = score(d, j - 1);
                if s <= threshold {
                    threshold = s;
                    best_loc = Some(ju - 1);
                    if j - 1 > loc {
                        // Passing loc: don't go further from it than this match is.
                        start = (2 * loc - (j - 1)).max(1);
                    } else {
                        break;
                    }
                }
            }
            j -= 1;
        }
        if score(d + 1, loc) > threshold {
            break;
        }
        last_rd = rd;
    }
    best_loc
}

/// JS `text.indexOf(pattern, from)` for a non-empty pattern.
fn index_of(text: &[u16], pattern: &[u16], from: usize) -> Option<usize> {
    text.get(from..)?.windows(pattern.len()).position(|w| w == pattern).map(|i| i + from)
}

/// JS `text.lastIndexOf(pattern, from)` for a non-empty pattern: the last match starting at or before `from`.
fn last_index_of(text: &[u16], pattern: &[u16], from: usize) -> Option<usize> {
    let last_start = text.len().checked_sub(pattern.len())?.min(from);
    (0..=last_start).rev().find(|&k| &text[k..k + pattern.len()] == pattern)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::dmp_fixtures::{apply_patch_text, fixtures};
    use crate::patch::parse_patch_text;

    /// Patches written by Node apply in Rust to the exact text.
    #[test]
    fn history_node_patches_apply_in_rust() {
        for p in fixtures().pairs {
            assert_eq!(apply_patch_text(&p.creation_patch, &p.new), "", "creation: {}", p.name);
            assert_eq!(apply_patch_text(&p.update_patch, &p.new), p.old, "update: {}", p.name);
        }
    }

    /// Where the text is not what the patch expects, Rust's patch_apply does what Node's does: the same fuzzy
    /// matches, the same rediffs, the same failed hunks, the same resulting text.
    #[test]
    fn history_fuzzy_apply_matches_node() {
        let f = fixtures();
        assert!(f.drifts.iter().any(|d| d.results.contains(&false)));
        assert!(f.drifts.iter().any(|d| d.results.iter().all(|ok| *ok) && d.result.as_deref() != Some(&d.text)));
        for d in f.drifts {
            let hunks = parse_patch_text(&d.patch).unwrap();
            let (out, results) = patch_apply(&hunks, &d.text.encode_utf16().collect::<Vec<_>>()).unwrap();
            let expected = d.result_units.unwrap_or_else(|| d.result.unwrap_or_default().encode_utf16().collect());
            assert_eq!(String::from_utf16_lossy(&out), String::from_utf16_lossy(&expected), "{}", d.name);
            assert_eq!(out, expected, "{}", d.name);
            assert_eq!(results, d.results, "{}", d.name);
        }
    }
}
