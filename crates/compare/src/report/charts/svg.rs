//! The SVG document every chart is drawn on and the pieces charts share: page width and font, one colour per
//! runtime, the legend's layout, a linear axis with round ticks, number formats and XML escaping.

use std::fmt::{self, Write};

// The charts' names for textfmt's: whole numbers with separators ("123,457"), and the escape fit for element
// text and attribute values alike (quotes too; characters XML 1.0 cannot carry dropped).
pub(super) use textfmt::thousands_rounded as thousands;
pub(super) use textfmt::xml::escape_attribute as esc;

pub(super) const WIDTH: f64 = 720.0;
const FONT: &str = "Helvetica, Arial, sans-serif";
/// Every runtime compare knows keeps its own colour in every chart, whichever subset a chart shows, so no two
/// share one even when all of them are drawn (a frameworks run shows a dozen). From Tableau 20: one hue per
/// server or framework, the darker shade on Node and the lighter on Bun; the floor is grey because it is a
/// reference, not a contender. The five most common (rust, bun, node, koa, floor) are Tableau 10's darker
/// shades, distinct under the common colour-vision deficiencies.
const KNOWN: [(&str, &str); 17] = [
    ("rust", "#f28e2b"),
    ("bun", "#4e79a7"),
    ("node", "#59a14f"),
    ("koa", "#e15759"),
    ("floor", "#79706e"),
    ("bun-shipped", "#a0cbe8"),
    ("node-shipped", "#8cd17d"),
    ("koa-bun", "#ff9d9a"),
    ("fastify-node", "#499894"),
    ("fastify-bun", "#86bcb6"),
    ("express-node", "#b6992d"),
    ("express-bun", "#f1ce63"),
    ("flight-node", "#b07aa1"),
    ("flight-bun", "#d4a6c8"),
    ("bun-compiled", "#d37295"),
    ("bun-bytecode", "#fabfd2"),
    ("php", "#9d7660"),
];
/// Other runtimes (`--target` names), in order of appearance: colours no known runtime has.
const OTHERS: [&str; 5] = ["#17becf", "#bcbd22", "#ffbe7d", "#d7b5a6", "#bab0ac"];

/// One colour per entry of `runtimes` (a name listed twice gets the same colour both times).
pub(super) fn colors<'a>(runtimes: impl IntoIterator<Item = &'a str>) -> Vec<&'static str> {
    let mut others: Vec<&str> = Vec::new();
    runtimes
        .into_iter()
        .map(|name| match KNOWN.iter().find(|(known, _)| *known == name) {
            Some((_, color)) => *color,
            None => {
                let slot = others.iter().position(|o| *o == name).unwrap_or_else(|| {
                    others.push(name);
                    others.len() - 1
                });
                OTHERS[slot % OTHERS.len()]
            }
        })
        .collect()
}

/// Rough width of one character of 12–13 px text, for laying out labels without measuring fonts.
pub(super) const CHAR_W: f64 = 7.0;

/// A value worth drawing.
pub(super) fn measured(v: f64) -> Option<f64> {
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// Legend items under the title, in rows wrapped to the width (`right`: the margin kept free): each item's
/// position, and the baseline of the last row (many items push the plot down).
pub(super) fn legend_layout<'a>(names: impl Iterator<Item = &'a str>, right: f64) -> (Vec<(f64, f64)>, f64) {
    let (mut lx, mut ly) = (16.0, 52.0);
    let mut legend = Vec::new();
    for name in names {
        let item_w = 34.0 + name.chars().count() as f64 * CHAR_W + 16.0;
        if lx + item_w > WIDTH - right && lx > 16.0 {
            lx = 16.0;
            ly += 20.0;
        }
        legend.push((lx, ly));
        lx += item_w;
    }
    (legend, ly)
}

/// The plot area of a line chart (a ladder's steps, a time series): from `left` to `right` across, values
/// growing upwards from 0 at `bottom` to the y axis's top at `top`.
pub(super) struct Plot {
    pub(super) left: f64,
    pub(super) right: f64,
    pub(super) top: f64,
    pub(super) bottom: f64,
}

impl Plot {
    /// A linear y axis from 0 to a round number above `max`, over the plot's height.
    pub(super) fn y_axis(&self, max: f64) -> Axis {
        Axis::new(max, 0.0, self.bottom - self.top)
    }

    /// Where `v` sits on `axis` (one made by [`Plot::y_axis`]): 0 at the bottom.
    pub(super) fn y(&self, axis: &Axis, v: f64) -> f64 {
        self.bottom - axis.x(v)
    }

    /// A light line across the plot at each of `axis`'s ticks, its value to the left of the plot.
    pub(super) fn y_grid(&self, out: &mut String, axis: &Axis) -> fmt::Result {
        for &tick in &axis.ticks {
            let y = self.y(axis, tick);
            write!(out, r##"<path d="M{:.1} {y:.1}H{:.1}" stroke="#e3e3e3"/>"##, self.left, self.right)?;
            let (label_x, label_y) = (self.left - 8.0, y + 4.0);
            write!(out, r##"<text x="{label_x:.1}" y="{label_y:.1}" font-size="12" text-anchor="end" fill="#444">"##)?;
            writeln!(out, "{}</text>", esc(&axis.label(tick)))?;
        }
        Ok(())
    }

    /// The axes: up the plot's left side and along its bottom.
    pub(super) fn axes(&self, out: &mut String) -> fmt::Result {
        let Plot { left, right, top, bottom } = self;
        writeln!(out, r##"<path d="M{left:.1} {top:.1}V{bottom:.1}H{right:.1}" stroke="#888" fill="none"/>"##)
    }

    /// Ends the document: an empty plot says "no data" in its middle rather than showing bare axes.
    pub(super) fn finish(&self, mut out: String, empty: bool) -> Result<String, fmt::Error> {
        if empty {
            let (x, y) = ((self.left + self.right) / 2.0, (self.top + self.bottom) / 2.0);
            writeln!(
                out,
                r##"<text x="{x:.1}" y="{y:.1}" font-size="14" text-anchor="middle" fill="#777">no data</text>"##
            )?;
        }
        out.push_str("</svg>\n");
        Ok(out)
    }
}

pub(super) fn open_svg(out: &mut String, height: f64, title: &str) -> fmt::Result {
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    write!(out, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}""#)?;
    writeln!(out, r##" viewBox="0 0 {WIDTH} {height:.0}" font-family="{FONT}" fill="#222">"##)?;
    writeln!(out, "<title>{}</title>", esc(title))?;
    writeln!(out, r##"<rect width="100%" height="100%" fill="#fff"/>"##)
}

/// A linear axis from 0 to a round number above `max`, mapped onto `from..to`.
pub(super) struct Axis {
    pub(super) top: f64,
    pub(super) step: f64,
    pub(super) from: f64,
    pub(super) to: f64,
    pub(super) ticks: Vec<f64>,
}

impl Axis {
    pub(super) fn new(max: f64, from: f64, to: f64) -> Axis {
        let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
        // About five ticks, on 1-2-2.5-5 steps, so labels read as round numbers.
        let raw = max / 5.0;
        let magnitude = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|m| m * magnitude)
            .find(|s| *s >= raw * (1.0 - 1e-9))
            .unwrap_or(10.0 * magnitude);
        let count = (max / step * (1.0 - 1e-9)).ceil().max(1.0);
        let ticks = (0..=count as usize).map(|k| k as f64 * step).collect();
        Axis { top: count * step, step, from, to, ticks }
    }

    pub(super) fn x(&self, v: f64) -> f64 {
        self.from + (v.clamp(0.0, self.top) / self.top) * (self.to - self.from)
    }

    /// "0", "250k", "1.5M", "0.25": as many decimals as the step needs, in the step's unit.
    pub(super) fn label(&self, v: f64) -> String {
        if v == 0.0 {
            return "0".to_string();
        }
        let (div, suffix) = if self.step >= 1e6 {
            (1e6, "M")
        } else if self.step >= 1e3 {
            (1e3, "k")
        } else {
            (1.0, "")
        };
        let (x, s) = (v / div, self.step / div);
        let decimals = if s.fract() == 0.0 {
            0
        } else if (s * 10.0).fract().abs() < 1e-9 {
            1
        } else {
            2
        };
        format!("{x:.decimals$}{suffix}")
    }
}

/// CPU-µs with precision where it matters: "3.42", "12.3", "215".
pub(super) fn micros(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::runtimes::{ALL, by_name_only};

    #[test]
    fn every_known_runtime_and_the_first_others_have_distinct_colours() {
        let names: Vec<&str> = KNOWN.iter().map(|(name, _)| *name).chain(["x", "y", "z", "v", "w"]).collect();
        let mut colours = colors(names.iter().copied());
        colours.sort_unstable();
        colours.dedup();
        assert_eq!(colours.len(), names.len(), "a colour used twice");
        for runtime in ALL.into_iter().chain(by_name_only()) {
            let name = runtime.name();
            assert!(KNOWN.iter().any(|(k, _)| *k == name), "{name} has no colour of its own");
        }
    }

    #[test]
    fn colours_follow_the_runtime_not_its_position() {
        assert_eq!(colors(["node", "rust"]), vec!["#59a14f", "#f28e2b"]);
        assert_eq!(colors(["rust", "node"]), vec!["#f28e2b", "#59a14f"]);
        let others = colors(["x", "rust", "y", "x"]);
        assert_eq!((others[0], others[2], others[3]), (OTHERS[0], OTHERS[1], OTHERS[0]));
    }

    #[test]
    fn axis_ticks_are_round() {
        let axis = Axis::new(182_345.0, 0.0, 100.0);
        assert_eq!(axis.step, 50_000.0);
        assert_eq!(axis.ticks.last().copied(), Some(200_000.0));
        assert_eq!((axis.label(150_000.0).as_str(), axis.label(0.0).as_str()), ("150k", "0"));
        let axis = Axis::new(12.0, 0.0, 100.0);
        assert_eq!((axis.step, axis.label(2.5).as_str()), (2.5, "2.5"));
        let axis = Axis::new(0.0, 0.0, 100.0);
        assert_eq!(axis.top, 1.0);
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(12.0), "12");
    }
}
