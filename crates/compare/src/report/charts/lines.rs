//! Time-series line charts (the soak's RSS and p99 over time): x and y both linear from zero.

use std::fmt::{self, Write};

use super::svg::{Axis, Plot, WIDTH, colors, esc, legend_layout, measured, open_svg};

/// One line of a time-series chart: `(x, y)` points in x order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart of `series` over x (`x_unit` names it), y from 0, one colour per series as in every other
/// chart; a gap in x is drawn as a gap only when a point is missing (non-finite or negative values).
pub fn line_svg(title: &str, x_unit: &str, series: &[Series]) -> String {
    render_lines(title, x_unit, series).unwrap_or_default()
}

fn render_lines(title: &str, x_unit: &str, series: &[Series]) -> Result<String, fmt::Error> {
    const LEFT: f64 = 76.0;
    const RIGHT: f64 = 24.0;
    const PLOT_H: f64 = 280.0;
    let mut out = String::with_capacity(4096 + series.iter().map(|s| s.points.len() * 16).sum::<usize>());
    // Legend rows under the title, wrapped to the width.
    let (legend, ly) = legend_layout(series.iter().map(|s| s.name.as_str()), RIGHT);
    let plot_top = ly + 22.0;
    let plot_bottom = plot_top + PLOT_H;
    let height = plot_bottom + 48.0;
    open_svg(&mut out, height, title)?;
    writeln!(out, r#"<text x="16" y="28" font-size="18" font-weight="bold">{}</text>"#, esc(title))?;
    let palette = colors(series.iter().map(|s| s.name.as_str()));
    for ((s, (lx, ly)), color) in series.iter().zip(legend).zip(&palette) {
        write!(out, r#"<path d="M{lx:.1} {:.1}h24" stroke="{color}" stroke-width="2.5"/>"#, ly - 4.0)?;
        writeln!(out, r#"<text x="{:.1}" y="{ly:.1}" font-size="13">{}</text>"#, lx + 30.0, esc(&s.name))?;
    }
    let ok = |(x, y): &(f64, f64)| measured(*x).is_some() && measured(*y).is_some();
    let max_x = series.iter().flat_map(|s| &s.points).filter(|p| ok(p)).map(|p| p.0).fold(0.0, f64::max);
    let max_y = series.iter().flat_map(|s| &s.points).filter(|p| ok(p)).map(|p| p.1).fold(0.0, f64::max);
    let plot = Plot { left: LEFT, right: WIDTH - RIGHT, top: plot_top, bottom: plot_bottom };
    let y_axis = plot.y_axis(max_y);
    let x_axis = Axis::new(max_x, LEFT, WIDTH - RIGHT);
    let y_of = |v: f64| plot.y(&y_axis, v);
    plot.y_grid(&mut out, &y_axis)?;
    for &tick in &x_axis.ticks {
        let x = x_axis.x(tick);
        write!(
            out,
            r##"<text x="{x:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#444">"##,
            plot_bottom + 18.0
        )?;
        writeln!(out, "{}</text>", esc(&x_axis.label(tick)))?;
    }
    writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#444">{}</text>"##,
        (LEFT + WIDTH - RIGHT) / 2.0,
        plot_bottom + 38.0,
        esc(x_unit)
    )?;
    plot.axes(&mut out)?;
    for (s, color) in series.iter().zip(&palette) {
        let mut d = String::new();
        let mut joined = false;
        for p in &s.points {
            if ok(p) {
                write!(d, "{}{:.1} {:.1}", if joined { "L" } else { "M" }, x_axis.x(p.0), y_of(p.1))?;
                joined = true;
            } else {
                joined = false;
            }
        }
        if !d.is_empty() {
            writeln!(
                out,
                r#"<path d="{d}" stroke="{color}" stroke-width="2" fill="none"><title>{}</title></path>"#,
                esc(&s.name)
            )?;
        }
    }
    plot.finish(out, series.iter().all(|s| !s.points.iter().any(ok)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::well_formed;

    #[test]
    fn a_missing_point_breaks_the_line() {
        let series = vec![
            Series { name: "rust".into(), points: vec![(0.0, 10.0), (1.0, 12.0), (2.0, f64::NAN), (3.0, 11.0)] },
            Series { name: "bun <1.4>".into(), points: vec![(0.0, 20.0), (3.0, 25.0)] },
        ];
        let svg = line_svg("RSS & p99", "seconds", &series);
        well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert!(svg.contains(">RSS &amp; p99</text>") && svg.contains(">bun &lt;1.4&gt;</text>"), "{svg}");
        let rust = svg.lines().find(|l| l.contains("<title>rust</title>")).expect("rust's line");
        assert_eq!(rust.matches('M').count(), 2, "the NaN splits it: {rust}");
        assert!(!svg.contains("NaN") && !svg.contains("no data"), "{svg}");
    }

    #[test]
    fn nothing_measured_says_no_data() {
        for series in [Vec::new(), vec![Series { name: "x".into(), points: vec![(f64::NAN, 1.0), (1.0, -1.0)] }]] {
            let svg = line_svg("empty", "s", &series);
            well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
            assert!(svg.contains(">no data</text>"), "{svg}");
        }
    }
}
