//! Line charts across a ladder's steps (rungs, connection counts…): one line per runtime, steps evenly spaced.

use std::fmt::{self, Write};

use super::svg::{CHAR_W, Plot, WIDTH, colors, esc, legend_layout, measured, open_svg, thousands};

/// One runtime's value (req/s, a latency…) at one step of a ladder (rungs, connections…).
#[derive(Debug, Clone, PartialEq)]
pub struct LadderPoint {
    pub runtime: String,
    pub step: String,
    pub value: f64,
}

/// Throughput per runtime across `steps`, one line each, on a linear axis from zero.
pub fn ladder_svg(steps: &[String], points: &[LadderPoint]) -> String {
    steps_svg("Throughput by step (req/s)", "req/s", steps, points)
}

/// One line per runtime across `steps` (evenly spaced, in the order given), values on a linear axis from
/// zero; `unit` labels each point's tooltip.
pub fn steps_svg(title: &str, unit: &str, steps: &[String], points: &[LadderPoint]) -> String {
    render_ladder(title, unit, steps, points).unwrap_or_default()
}

/// The ladder's tilted step labels are cut to this many characters (the full text is in each point's tooltip).
const TILTED_CHARS: usize = 24;

/// The ladder's runtimes in order of appearance, and per runtime its value at each step (the last one given
/// wins; a step without a measured value is `None`).
fn ladder_series<'a>(steps: &[String], points: &'a [LadderPoint]) -> (Vec<&'a str>, Vec<Vec<Option<f64>>>) {
    let mut runtimes: Vec<&str> = Vec::new();
    for p in points {
        if !runtimes.contains(&p.runtime.as_str()) {
            runtimes.push(&p.runtime);
        }
    }
    let series: Vec<Vec<Option<f64>>> = runtimes
        .iter()
        .map(|rt| {
            steps
                .iter()
                .map(|step| {
                    points.iter().rev().find(|p| p.runtime == *rt && p.step == *step).and_then(|p| measured(p.value))
                })
                .collect()
        })
        .collect();
    (runtimes, series)
}

/// The step names under the ladder's x axis, side by side or tilted by 30°.
fn step_labels(out: &mut String, steps: &[String], x_of: &dyn Fn(usize) -> f64, y: f64, tilt: bool) -> fmt::Result {
    for (i, step) in steps.iter().enumerate() {
        let x = x_of(i);
        if tilt {
            write!(out, r##"<text x="{x:.1}" y="{y:.1}" font-size="12" text-anchor="end" fill="#444""##)?;
            let shown: String = if step.chars().count() > TILTED_CHARS {
                step.chars().take(TILTED_CHARS - 1).chain(['…']).collect()
            } else {
                step.clone()
            };
            writeln!(out, r#" transform="rotate(-30 {x:.1} {y:.1})">{}</text>"#, esc(&shown))?;
        } else {
            writeln!(
                out,
                r##"<text x="{x:.1}" y="{y:.1}" font-size="12" text-anchor="middle" fill="#444">{}</text>"##,
                esc(step)
            )?;
        }
    }
    Ok(())
}

/// One runtime's line across the ladder's steps, with a point (and its tooltip) at each measured step.
fn ladder_line(
    out: &mut String,
    (rt, unit): (&str, &str),
    values: &[Option<f64>],
    color: &str,
    steps: &[String],
    x_of: &dyn Fn(usize) -> f64,
    y_of: &dyn Fn(f64) -> f64,
) -> fmt::Result {
    // A step without a value breaks the line rather than bridging the gap with a made-up slope.
    let mut d = String::new();
    let mut joined = false;
    for (s, v) in values.iter().enumerate() {
        match v {
            Some(v) => {
                write!(d, "{}{:.1} {:.1}", if joined { "L" } else { "M" }, x_of(s), y_of(*v))?;
                joined = true;
            }
            None => joined = false,
        }
    }
    if !d.is_empty() {
        writeln!(out, r#"<path d="{d}" stroke="{color}" stroke-width="2.5" fill="none"/>"#)?;
    }
    for (s, v) in values.iter().enumerate() {
        if let Some(v) = v {
            write!(out, r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}">"#, x_of(s), y_of(*v))?;
            // Latencies in ms are small: their decimals matter where a rate's do not.
            let value = if *v >= 100.0 { thousands(*v) } else { format!("{v:.3}") };
            writeln!(out, "<title>{} at {}: {value} {}</title></circle>", esc(rt), esc(&steps[s]), esc(unit))?;
        }
    }
    Ok(())
}

fn render_ladder(title: &str, unit: &str, steps: &[String], points: &[LadderPoint]) -> Result<String, fmt::Error> {
    const PLOT_BOTTOM: f64 = 376.0;
    const LEFT: f64 = 76.0;
    const RIGHT: f64 = 24.0;
    const PAD: f64 = 30.0;

    let (runtimes, series) = ladder_series(steps, points);

    // Step labels sit side by side when they fit, else tilted by 30°, which needs room below the plot and,
    // for the first label, to the left of it.
    let gaps = steps.len().saturating_sub(1).max(1) as f64;
    let slot = (WIDTH - RIGHT - LEFT - 2.0 * PAD) / gaps;
    let longest = steps.iter().map(|s| s.chars().count()).max().unwrap_or(0);
    let tilt = steps.len() > 1 && longest as f64 * CHAR_W > slot - 4.0;
    let label_w = longest.min(TILTED_CHARS) as f64 * CHAR_W;
    let (pad_left, bottom) =
        if tilt { (PAD.max(label_w * 0.87 - LEFT + 12.0), 34.0 + label_w * 0.5) } else { (PAD, 40.0) };

    // Legend items under the title, in rows wrapped to the width; many runtimes push the plot down.
    let (legend, ly) = legend_layout(runtimes.iter().copied(), RIGHT);
    let plot_top = ly + 22.0;
    let plot_bottom = PLOT_BOTTOM.max(plot_top + 120.0);
    let height = plot_bottom + bottom;

    let palette = colors(runtimes.iter().copied());
    let mut out = String::with_capacity(4096 + points.len() * 256);
    open_svg(&mut out, height, title)?;
    writeln!(out, r#"<text x="16" y="28" font-size="18" font-weight="bold">{}</text>"#, esc(title))?;
    for ((rt, (lx, ly)), color) in runtimes.iter().zip(legend).zip(&palette) {
        let (swatch_y, text_x) = (ly - 4.0, lx + 30.0);
        write!(out, r#"<path d="M{lx:.1} {swatch_y:.1}h24" stroke="{color}" stroke-width="2.5"/>"#)?;
        write!(out, r#"<circle cx="{:.1}" cy="{swatch_y:.1}" r="3.5" fill="{color}"/>"#, lx + 12.0)?;
        writeln!(out, r#"<text x="{text_x:.1}" y="{ly:.1}" font-size="13">{}</text>"#, esc(rt))?;
    }

    let plot = Plot { left: LEFT, right: WIDTH - RIGHT, top: plot_top, bottom: plot_bottom };
    let max = series.iter().flatten().flatten().copied().fold(0.0, f64::max);
    // The y axis: the same tick logic as the bar charts, turned upright (value 0 at the bottom).
    let axis = plot.y_axis(max);
    let y_of = |v: f64| plot.y(&axis, v);
    plot.y_grid(&mut out, &axis)?;
    plot.axes(&mut out)?;

    let x_of = |i: usize| {
        if steps.len() <= 1 {
            (LEFT + WIDTH - RIGHT) / 2.0
        } else {
            LEFT + pad_left + i as f64 * (WIDTH - RIGHT - LEFT - pad_left - PAD) / gaps
        }
    };
    step_labels(&mut out, steps, &x_of, plot_bottom + 18.0, tilt)?;

    for ((rt, values), color) in runtimes.iter().zip(&series).zip(&palette) {
        ladder_line(&mut out, (rt, unit), values, color, steps, &x_of, &y_of)?;
    }
    plot.finish(out, runtimes.is_empty() || steps.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::well_formed;

    #[test]
    fn ladder_chart_is_well_formed_with_a_legend() {
        let steps: Vec<String> = ["16 conns", "64 conns", "256 conns"].map(String::from).to_vec();
        let mut points = Vec::new();
        for (rt, base) in [("rust", 100_000.0), ("bun", 60_000.0), ("node & co", 30_000.0)] {
            for (i, step) in steps.iter().enumerate() {
                points.push(LadderPoint { runtime: rt.into(), step: step.clone(), value: base * (1.0 + i as f64) });
            }
        }
        // A gap and a value for an unknown step.
        points.retain(|p| !(p.runtime == "bun" && p.step == "64 conns"));
        points.push(LadderPoint { runtime: "rust".into(), step: "nope".into(), value: 1.0 });
        let svg = ladder_svg(&steps, &points);
        well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        for name in ["rust", "bun", "node &amp; co", "16 conns", "256 conns"] {
            assert!(svg.contains(&format!(">{name}</text>")), "label {name}");
        }
        assert!(!svg.contains(">nope<"));
        // bun's gap splits its line into two subpaths.
        let bun_color = colors(["bun"])[0];
        let bun_path = svg.lines().find(|l| {
            l.starts_with("<path d=\"M") && l.contains(&format!("stroke=\"{bun_color}\" stroke-width=\"2.5\" fill"))
        });
        assert_eq!(bun_path.map(|l| l.matches('M').count()), Some(2), "{svg}");
    }

    #[test]
    fn ladder_edge_cases_do_not_panic() {
        let one = vec!["c1".to_string()];
        let cases: Vec<(Vec<String>, Vec<LadderPoint>)> = vec![
            (Vec::new(), Vec::new()),
            (one.clone(), Vec::new()),
            (one.clone(), vec![LadderPoint { runtime: "x".into(), step: "c1".into(), value: 0.0 }]),
            (one, vec![LadderPoint { runtime: "y".into(), step: "c1".into(), value: f64::NAN }]),
            (
                (0..30).map(|i| format!("a long step name {i}")).collect(),
                vec![LadderPoint { runtime: "z".into(), step: "a long step name 3".into(), value: 5.0 }],
            ),
        ];
        for (steps, points) in cases {
            let svg = ladder_svg(&steps, &points);
            well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
            assert!(!svg.contains("NaN"));
        }
    }
}
