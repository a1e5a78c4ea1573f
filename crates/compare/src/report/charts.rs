//! Charts for the report as standalone SVG, written by hand so the report needs no plotting stack and the
//! files render the same in a browser, on GitHub and in an image viewer. Sized for a 720 px wide page.
//!
//! Non-finite or negative values are drawn as absent ("n/a"), never as a bar: a chart must not show a number
//! that was not measured.

use std::fmt::{self, Write};
use std::path::{Path, PathBuf};

const WIDTH: f64 = 720.0;
const FONT: &str = "Helvetica, Arial, sans-serif";
/// The runtimes compare knows keep one colour in every chart, whichever subset a chart shows; the floor is
/// grey because it is a reference, not a contender. Colours from Tableau 10, distinct under the common
/// colour-vision deficiencies.
const KNOWN: [(&str, &str); 5] =
    [("rust", "#f28e2b"), ("bun", "#4e79a7"), ("node", "#59a14f"), ("koa", "#e15759"), ("floor", "#79706e")];
/// Other runtimes, in order of appearance.
const OTHERS: [&str; 5] = ["#76b7b2", "#b07aa1", "#edc948", "#9c755f", "#ff9da7"];

/// One colour per entry of `runtimes` (a name listed twice gets the same colour both times).
fn colors<'a>(runtimes: impl IntoIterator<Item = &'a str>) -> Vec<&'static str> {
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
const CHAR_W: f64 = 7.0;

/// One runtime in one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub runtime: String,
    /// Median over runs; `req_per_s_min` and `req_per_s_max` give the whisker.
    pub req_per_s: f64,
    pub req_per_s_min: f64,
    pub req_per_s_max: f64,
    /// Server CPU time per response, when it was measured.
    pub cpu_us_per_resp: Option<f64>,
    /// The figure is only a lower bound (the loader ran out of CPU first): its label says "≥".
    pub lower_bound: bool,
}

/// One runtime's value (req/s, a latency…) at one step of a ladder (rungs, connections…).
#[derive(Debug, Clone, PartialEq)]
pub struct LadderPoint {
    pub runtime: String,
    pub step: String,
    pub value: f64,
}

/// Two horizontal bar panels for one workload: throughput (median with min–max whiskers) and CPU-µs per
/// response.
pub fn workload_svg(workload: &str, bars: &[Bar]) -> String {
    render_workload(workload, bars).unwrap_or_default()
}

/// One bar panel for one workload: each runtime's capacity at the latency objective `objective` ("p99 ≤
/// 10 ms"), median of its searches with min–max whiskers; `cpu_us_per_resp` is not drawn.
pub fn capacity_svg(workload: &str, objective: &str, bars: &[Bar]) -> String {
    render_capacity(workload, objective, bars).unwrap_or_default()
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

/// One runtime's ratio to rust on one workload, for the overview chart.
#[derive(Debug, Clone, PartialEq)]
pub struct RatioPoint {
    pub workload: String,
    pub runtime: String,
    /// The runtime's CPU-µs per response ÷ rust's, and its req/s ÷ rust's (medians of per-round ratios).
    pub cpu: Option<f64>,
    pub rps: Option<f64>,
    /// The rule's (a), (c) and (d) hold for that metric in every run: a filled dot; hollow otherwise.
    pub cpu_holds: bool,
    pub rps_holds: bool,
}

/// The ratio axis's ends: ratios beyond are drawn at the edge (their tooltip has the figure).
const RATIO_MIN: f64 = 0.125;
const RATIO_MAX: f64 = 8.0;

/// The overview: one row per workload, two panels (CPU per response ÷ rust, req/s ÷ rust) on log axes
/// centred on 1, a dot per runtime, the ±10% band the rule's (c) ignores shaded.
pub fn ratios_svg(points: &[RatioPoint]) -> String {
    render_ratios(points).unwrap_or_default()
}

fn render_ratios(points: &[RatioPoint]) -> Result<String, fmt::Error> {
    const ROW: f64 = 20.0;
    const LABEL_W: f64 = 150.0;
    const GAP: f64 = 40.0;
    // Room inside each panel for the end ticks' labels.
    const PAD: f64 = 14.0;
    let workloads = crate::records::ordered(points.iter().map(|p| p.workload.as_str()));
    let runtimes = crate::records::ordered(points.iter().map(|p| p.runtime.as_str()));
    let palette = colors(runtimes.iter().map(String::as_str));
    let (legend, ly) = legend_layout(runtimes.iter().map(String::as_str), 24.0);
    let panel_top = ly + 30.0;
    let rows_top = panel_top + 22.0;
    let rows_bottom = rows_top + workloads.len().max(1) as f64 * ROW;
    let height = rows_bottom + 56.0;
    let title = "Every workload against rust";
    let mut out = String::with_capacity(4096 + points.len() * 256);
    open_svg(&mut out, height, title)?;
    writeln!(out, r#"<text x="16" y="28" font-size="18" font-weight="bold">{}</text>"#, esc(title))?;
    for ((name, (lx, ly)), color) in runtimes.iter().zip(legend).zip(&palette) {
        writeln!(out, r#"<circle cx="{:.1}" cy="{:.1}" r="5" fill="{color}"/>"#, lx + 8.0, ly - 4.0)?;
        writeln!(out, r#"<text x="{:.1}" y="{ly:.1}" font-size="13">{}</text>"#, lx + 20.0, esc(name))?;
    }
    let panel_w = (WIDTH - LABEL_W - GAP - 16.0) / 2.0;
    let panels = [
        (LABEL_W, "CPU ÷ rust (right of 1: rust cheaper)", true),
        (LABEL_W + panel_w + GAP, "req/s ÷ rust (left of 1: rust faster)", false),
    ];
    let span = (RATIO_MAX / RATIO_MIN).log2();
    for (i, w) in workloads.iter().enumerate() {
        let mid = rows_top + (i as f64 + 0.5) * ROW;
        if i % 2 == 0 {
            let y = mid - ROW / 2.0;
            writeln!(out, r##"<rect x="8" y="{y:.1}" width="{:.1}" height="{ROW}" fill="#f6f6f6"/>"##, WIDTH - 16.0)?;
        }
        writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"#,
            LABEL_W - 10.0,
            mid + 4.0,
            esc(w)
        )?;
    }
    for (x0, heading, cpu) in panels {
        let width = panel_w - 2.0 * PAD;
        let x_of = |r: f64| x0 + PAD + (r.clamp(RATIO_MIN, RATIO_MAX) / RATIO_MIN).log2() / span * width;
        writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" font-weight="bold" text-anchor="middle">{}</text>"#,
            x0 + panel_w / 2.0,
            panel_top + 8.0,
            esc(heading)
        )?;
        let (band0, band1) = (x_of(1.0 / (1.0 + 0.10)), x_of(1.0 + 0.10));
        writeln!(
            out,
            r##"<rect x="{band0:.1}" y="{rows_top:.1}" width="{:.1}" height="{:.1}" fill="#e8e8e8"/>"##,
            band1 - band0,
            rows_bottom - rows_top
        )?;
        for tick in [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0] {
            let x = x_of(tick);
            let stroke = if tick == 1.0 { "#888" } else { "#e3e3e3" };
            writeln!(out, r#"<path d="M{x:.1} {rows_top:.1}V{rows_bottom:.1}" stroke="{stroke}"/>"#)?;
            let label = if tick < 1.0 { format!("{tick}") } else { format!("{tick:.0}") };
            writeln!(
                out,
                r##"<text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#444">{label}</text>"##,
                rows_bottom + 14.0
            )?;
        }
        for (k, name) in runtimes.iter().enumerate() {
            // Each runtime a little above or below the row's middle, so equal ratios stay visible.
            let offset = (k as f64 - (runtimes.len() as f64 - 1.0) / 2.0) * (ROW - 8.0) / runtimes.len().max(1) as f64;
            for p in points.iter().filter(|p| &p.runtime == name) {
                let (ratio, holds) = if cpu { (p.cpu, p.cpu_holds) } else { (p.rps, p.rps_holds) };
                let Some(ratio) = ratio.filter(|r| r.is_finite() && *r > 0.0) else { continue };
                let row = workloads.iter().position(|w| *w == p.workload).unwrap_or(0);
                let y = rows_top + (row as f64 + 0.5) * ROW + offset;
                let color = palette[k];
                let fill = if holds { color } else { "#fff" };
                write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{y:.1}" r="4.5" fill="{fill}" stroke="{color}" stroke-width="1.8">"#,
                    x_of(ratio)
                )?;
                writeln!(out, "<title>{}</title></circle>", esc(&format!("{} {}: {ratio:.2}", p.workload, p.runtime)))?;
            }
        }
    }
    writeln!(
        out,
        r##"<text x="16" y="{:.1}" font-size="11" fill="#555">Filled: separated rounds and over 10% apart in every run, no void record; hollow: not. Shaded: within 10%.</text>"##,
        rows_bottom + 36.0
    )?;
    out.push_str("</svg>\n");
    Ok(out)
}

/// A value worth drawing.
fn measured(v: f64) -> Option<f64> {
    (v.is_finite() && v >= 0.0).then_some(v)
}

fn render_workload(workload: &str, bars: &[Bar]) -> Result<String, fmt::Error> {
    const ROW: f64 = 26.0;
    const BAR: f64 = 16.0;
    let x0 = label_column(bars);
    // Room right of the longest bar for its value label.
    let x1 = WIDTH - 100.0;
    let rows = bars.len().max(1) as f64;
    let panel_h = 28.0 + rows * ROW + 30.0;
    let top1 = 64.0;
    let top2 = top1 + panel_h + 12.0;
    let height = top2 + panel_h + 8.0;

    let palette = colors(bars.iter().map(|b| b.runtime.as_str()));
    let mut out = String::with_capacity(4096 + bars.len() * 1024);
    let title = format!("{workload}: throughput and CPU per response");
    let subtitle = "median of runs, whiskers min–max; CPU-µs per response: lower is better";
    open_chart(&mut out, height, &title, workload, subtitle)?;

    // Throughput.
    let axis = rate_axis(bars, x0, x1);
    let first_row = panel_frame(&mut out, top1, "Throughput (req/s, higher is better)", &axis, rows * ROW)?;
    rate_rows(&mut out, bars, &axis, (first_row, ROW, BAR), x0, &palette)?;
    empty_note(&mut out, bars.is_empty(), x0, first_row + ROW / 2.0)?;

    // CPU per response.
    let max = bars.iter().filter_map(|b| b.cpu_us_per_resp.and_then(measured)).fold(0.0, f64::max);
    let axis = Axis::new(max, x0, x1);
    let first_row = panel_frame(&mut out, top2, "Server CPU-µs per response (lower is better)", &axis, rows * ROW)?;
    for (i, bar) in bars.iter().enumerate() {
        let y = first_row + i as f64 * ROW;
        let mid = y + ROW / 2.0;
        runtime_label(&mut out, x0, mid, &bar.runtime)?;
        let color = palette[i];
        match bar.cpu_us_per_resp.and_then(measured) {
            Some(v) => {
                let end = axis.x(v);
                let tip = format!("{}: {} CPU-µs per response", bar.runtime, micros(v));
                bar_rect(&mut out, x0, end, mid - BAR / 2.0, BAR, color, &tip)?;
                value_label(&mut out, end + 6.0, mid, &format!("{} µs", micros(v)))?;
            }
            None => value_label(&mut out, x0 + 6.0, mid, "n/a")?,
        }
    }
    empty_note(&mut out, bars.is_empty(), x0, first_row + ROW / 2.0)?;
    out.push_str("</svg>\n");
    Ok(out)
}

fn render_capacity(workload: &str, objective: &str, bars: &[Bar]) -> Result<String, fmt::Error> {
    const ROW: f64 = 26.0;
    const BAR: f64 = 16.0;
    let x0 = label_column(bars);
    let x1 = WIDTH - 110.0;
    let rows = bars.len().max(1) as f64;
    let top = 64.0;
    let height = top + 28.0 + rows * ROW + 30.0 + 8.0;
    let palette = colors(bars.iter().map(|b| b.runtime.as_str()));
    let mut out = String::with_capacity(2048 + bars.len() * 768);
    let title = format!("{workload}: capacity at {objective}");
    let subtitle = "highest open-loop rate whose p99 met the objective; median of searches, whiskers min–max";
    open_chart(&mut out, height, &title, workload, subtitle)?;
    let axis = rate_axis(bars, x0, x1);
    let heading = format!("Capacity at {objective} (req/s, higher is better)");
    let first_row = panel_frame(&mut out, top, &heading, &axis, rows * ROW)?;
    rate_rows(&mut out, bars, &axis, (first_row, ROW, BAR), x0, &palette)?;
    empty_note(&mut out, bars.is_empty(), x0, first_row + ROW / 2.0)?;
    out.push_str("</svg>\n");
    Ok(out)
}

/// Where the bars start: right of the longest runtime label.
fn label_column(bars: &[Bar]) -> f64 {
    let longest = bars.iter().map(|b| b.runtime.chars().count()).max().unwrap_or(0) as f64;
    (longest * CHAR_W + 24.0).clamp(90.0, 220.0)
}

/// The document, its tooltip title, and the workload's name over a grey subtitle.
fn open_chart(out: &mut String, height: f64, title: &str, workload: &str, subtitle: &str) -> fmt::Result {
    open_svg(out, height, title)?;
    writeln!(out, r#"<text x="16" y="28" font-size="18" font-weight="bold">{}</text>"#, esc(workload))?;
    writeln!(out, r##"<text x="16" y="48" font-size="12" fill="#555">{}</text>"##, esc(subtitle))
}

/// A req/s axis reaching every bar and whisker.
fn rate_axis(bars: &[Bar], x0: f64, x1: f64) -> Axis {
    let max = bars
        .iter()
        .flat_map(|b| [b.req_per_s, b.req_per_s_max, b.req_per_s_min])
        .filter_map(measured)
        .fold(0.0, f64::max);
    Axis::new(max, x0, x1)
}

/// A req/s panel's rows: per runtime a bar to its median, a min–max whisker, the value beside it ("≥" before
/// a lower bound). `rows` is (first row's y, row height, bar height).
fn rate_rows(
    out: &mut String,
    bars: &[Bar],
    axis: &Axis,
    (first_row, row, bar_h): (f64, f64, f64),
    x0: f64,
    palette: &[&str],
) -> fmt::Result {
    for (i, bar) in bars.iter().enumerate() {
        let y = first_row + i as f64 * row;
        let mid = y + row / 2.0;
        runtime_label(out, x0, mid, &bar.runtime)?;
        let color = palette[i];
        let mut label_x = x0 + 6.0;
        let label = match measured(bar.req_per_s) {
            Some(v) => {
                let end = axis.x(v);
                let tip = format!(
                    "{}: {} req/s (min {}, max {})",
                    bar.runtime,
                    thousands(v),
                    measured(bar.req_per_s_min).map_or("n/a".to_string(), thousands),
                    measured(bar.req_per_s_max).map_or("n/a".to_string(), thousands),
                );
                bar_rect(out, x0, end, mid - bar_h / 2.0, bar_h, color, &tip)?;
                label_x = end + 6.0;
                if bar.lower_bound { format!("≥ {}", thousands(v)) } else { thousands(v) }
            }
            None => "n/a".to_string(),
        };
        if let (Some(lo), Some(hi)) = (measured(bar.req_per_s_min), measured(bar.req_per_s_max)) {
            let (lo, hi) = (axis.x(lo.min(hi)), axis.x(lo.max(hi)));
            let (top, bottom) = (mid - 5.0, mid + 5.0);
            write!(
                out,
                r#"<path d="M{lo:.1} {mid:.1}H{hi:.1}M{lo:.1} {top:.1}V{bottom:.1}M{hi:.1} {top:.1}V{bottom:.1}""#
            )?;
            writeln!(out, r##" stroke="#222" stroke-width="1.5" fill="none"/>"##)?;
            label_x = label_x.max(hi + 6.0);
        }
        value_label(out, label_x, mid, &label)?;
    }
    Ok(())
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

    let max = series.iter().flatten().flatten().copied().fold(0.0, f64::max);
    // The y axis: the same tick logic as the bar charts, turned upright (value 0 at the bottom).
    let axis = Axis::new(max, 0.0, plot_bottom - plot_top);
    let y_of = |v: f64| plot_bottom - axis.x(v);
    for &tick in &axis.ticks {
        let y = y_of(tick);
        write!(out, r##"<path d="M{LEFT:.1} {y:.1}H{:.1}" stroke="#e3e3e3"/>"##, WIDTH - RIGHT)?;
        let (label_x, label_y) = (LEFT - 8.0, y + 4.0);
        write!(out, r##"<text x="{label_x:.1}" y="{label_y:.1}" font-size="12" text-anchor="end" fill="#444">"##)?;
        writeln!(out, "{}</text>", esc(&axis.label(tick)))?;
    }
    writeln!(
        out,
        r##"<path d="M{LEFT:.1} {plot_top:.1}V{plot_bottom:.1}H{:.1}" stroke="#888" fill="none"/>"##,
        WIDTH - RIGHT
    )?;

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
    if runtimes.is_empty() || steps.is_empty() {
        no_data(&mut out, (LEFT + WIDTH - RIGHT) / 2.0, (plot_top + plot_bottom) / 2.0)?;
    }
    out.push_str("</svg>\n");
    Ok(out)
}

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
    let y_axis = Axis::new(max_y, 0.0, plot_bottom - plot_top);
    let x_axis = Axis::new(max_x, LEFT, WIDTH - RIGHT);
    let y_of = |v: f64| plot_bottom - y_axis.x(v);
    for &tick in &y_axis.ticks {
        let y = y_of(tick);
        write!(out, r##"<path d="M{LEFT:.1} {y:.1}H{:.1}" stroke="#e3e3e3"/>"##, WIDTH - RIGHT)?;
        write!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end" fill="#444">"##,
            LEFT - 8.0,
            y + 4.0
        )?;
        writeln!(out, "{}</text>", esc(&y_axis.label(tick)))?;
    }
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
    writeln!(
        out,
        r##"<path d="M{LEFT:.1} {plot_top:.1}V{plot_bottom:.1}H{:.1}" stroke="#888" fill="none"/>"##,
        WIDTH - RIGHT
    )?;
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
    if series.iter().all(|s| !s.points.iter().any(ok)) {
        no_data(&mut out, (LEFT + WIDTH - RIGHT) / 2.0, (plot_top + plot_bottom) / 2.0)?;
    }
    out.push_str("</svg>\n");
    Ok(out)
}

/// Legend items under the title, in rows wrapped to the width (`right`: the margin kept free): each item's
/// position, and the baseline of the last row (many items push the plot down).
fn legend_layout<'a>(names: impl Iterator<Item = &'a str>, right: f64) -> (Vec<(f64, f64)>, f64) {
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

/// "no data" centred at (x, y): an empty plot says so rather than showing bare axes.
fn no_data(out: &mut String, x: f64, y: f64) -> fmt::Result {
    writeln!(out, r##"<text x="{x:.1}" y="{y:.1}" font-size="14" text-anchor="middle" fill="#777">no data</text>"##)
}

fn open_svg(out: &mut String, height: f64, title: &str) -> fmt::Result {
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    write!(out, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}""#)?;
    writeln!(out, r##" viewBox="0 0 {WIDTH} {height:.0}" font-family="{FONT}" fill="#222">"##)?;
    writeln!(out, "<title>{}</title>", esc(title))?;
    writeln!(out, r##"<rect width="100%" height="100%" fill="#fff"/>"##)
}

/// Heading, vertical grid lines and tick labels for one bar panel; returns the y of the first row.
fn panel_frame(out: &mut String, top: f64, heading: &str, axis: &Axis, rows_h: f64) -> Result<f64, fmt::Error> {
    writeln!(out, r#"<text x="16" y="{:.1}" font-size="14" font-weight="bold">{}</text>"#, top + 16.0, esc(heading))?;
    let first_row = top + 28.0;
    let axis_y = first_row + rows_h + 4.0;
    for &tick in &axis.ticks {
        let x = axis.x(tick);
        let (grid_top, label_y) = (first_row - 4.0, axis_y + 16.0);
        write!(out, r##"<path d="M{x:.1} {grid_top:.1}V{axis_y:.1}" stroke="#e3e3e3"/>"##)?;
        write!(out, r##"<text x="{x:.1}" y="{label_y:.1}" font-size="12" text-anchor="middle" fill="#444">"##)?;
        writeln!(out, "{}</text>", esc(&axis.label(tick)))?;
    }
    writeln!(
        out,
        r##"<path d="M{:.1} {:.1}V{axis_y:.1}H{:.1}" stroke="#888" fill="none"/>"##,
        axis.from,
        first_row - 4.0,
        axis.to
    )?;
    Ok(first_row)
}

/// A bar from `x0` to `end`, with its exact figures as a tooltip.
fn bar_rect(out: &mut String, x0: f64, end: f64, y: f64, height: f64, color: &str, tip: &str) -> fmt::Result {
    write!(out, r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{height}" fill="{color}">"#, end - x0)?;
    writeln!(out, "<title>{}</title></rect>", esc(tip))
}

fn runtime_label(out: &mut String, x0: f64, mid: f64, runtime: &str) -> fmt::Result {
    writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="13" text-anchor="end">{}</text>"#,
        x0 - 8.0,
        mid + 4.5,
        esc(runtime)
    )
}

fn value_label(out: &mut String, x: f64, mid: f64, text: &str) -> fmt::Result {
    writeln!(out, r#"<text x="{x:.1}" y="{:.1}" font-size="12">{}</text>"#, mid + 4.0, esc(text))
}

fn empty_note(out: &mut String, empty: bool, x0: f64, mid: f64) -> fmt::Result {
    if empty {
        writeln!(out, r##"<text x="{:.1}" y="{:.1}" font-size="12" fill="#777">no data</text>"##, x0 + 6.0, mid + 4.0)?;
    }
    Ok(())
}

/// A linear axis from 0 to a round number above `max`, mapped onto `from..to`.
struct Axis {
    top: f64,
    step: f64,
    from: f64,
    to: f64,
    ticks: Vec<f64>,
}

impl Axis {
    fn new(max: f64, from: f64, to: f64) -> Axis {
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

    fn x(&self, v: f64) -> f64 {
        self.from + (v.clamp(0.0, self.top) / self.top) * (self.to - self.from)
    }

    /// "0", "250k", "1.5M", "0.25": as many decimals as the step needs, in the step's unit.
    fn label(&self, v: f64) -> String {
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

/// 123456.7 → "123,457".
fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// CPU-µs with precision where it matters: "3.42", "12.3", "215".
fn micros(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Text and attribute values for XML; characters XML 1.0 cannot carry at all are dropped.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The SVG file `name` (a workload, or a workload and its chart) gets next to the Markdown `md`.
pub fn svg_path(md: &Path, name: &str) -> PathBuf {
    let stem = md.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    md.with_file_name(format!("{stem}-{name}.svg"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small well-formedness check: one root `svg` element with the SVG namespace, balanced tags, quoted
    /// attributes without `<`, no duplicate attributes, and every `&` starting a known entity.
    fn well_formed(doc: &str) -> Result<(), String> {
        let mut stack: Vec<String> = Vec::new();
        let mut roots = 0;
        let mut rest = doc;
        while !rest.is_empty() {
            let Some(lt) = rest.find('<') else {
                check_text(rest)?;
                break;
            };
            check_text(&rest[..lt])?;
            if stack.is_empty() && !rest[..lt].trim().is_empty() {
                return Err(format!("text outside the root: {:?}", &rest[..lt]));
            }
            rest = &rest[lt..];
            if let Some(body) = rest.strip_prefix("<?") {
                let end = body.find("?>").ok_or("unterminated <?")?;
                rest = &body[end + 2..];
                continue;
            }
            if let Some(body) = rest.strip_prefix("<!--") {
                let end = body.find("-->").ok_or("unterminated comment")?;
                rest = &body[end + 3..];
                continue;
            }
            let gt = rest.find('>').ok_or("unterminated tag")?;
            let tag = &rest[1..gt];
            rest = &rest[gt + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or_else(|| format!("</{name}> closes nothing"))?;
                if open != name.trim() {
                    return Err(format!("<{open}> closed by </{name}>"));
                }
                continue;
            }
            let (tag, self_closing) = match tag.strip_suffix('/') {
                Some(t) => (t, true),
                None => (tag, false),
            };
            let name_end = tag.find(|c: char| c.is_whitespace()).unwrap_or(tag.len());
            let name = &tag[..name_end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':') {
                return Err(format!("bad tag name {name:?}"));
            }
            let attrs = parse_attrs(&tag[name_end..])?;
            if stack.is_empty() {
                roots += 1;
                if name != "svg" || !attrs.iter().any(|(k, v)| k == "xmlns" && v == "http://www.w3.org/2000/svg") {
                    return Err(format!("root is <{name}> without the SVG namespace"));
                }
            }
            if !self_closing {
                stack.push(name.to_string());
            }
        }
        if !stack.is_empty() {
            return Err(format!("unclosed: {stack:?}"));
        }
        if roots != 1 {
            return Err(format!("{roots} root elements"));
        }
        Ok(())
    }

    fn parse_attrs(mut s: &str) -> Result<Vec<(String, String)>, String> {
        let mut attrs: Vec<(String, String)> = Vec::new();
        loop {
            s = s.trim_start();
            if s.is_empty() {
                return Ok(attrs);
            }
            let eq = s.find('=').ok_or_else(|| format!("attribute without value: {s:?}"))?;
            let name = s[..eq].trim().to_string();
            let value_part = s[eq + 1..].strip_prefix('"').ok_or_else(|| format!("unquoted attribute {name}"))?;
            let close = value_part.find('"').ok_or_else(|| format!("unterminated attribute {name}"))?;
            let value = &value_part[..close];
            if value.contains('<') {
                return Err(format!("'<' in attribute {name}"));
            }
            check_text(value)?;
            if attrs.iter().any(|(k, _)| *k == name) {
                return Err(format!("duplicate attribute {name}"));
            }
            attrs.push((name, value.to_string()));
            s = &value_part[close + 1..];
        }
    }

    fn check_text(text: &str) -> Result<(), String> {
        let mut rest = text;
        while let Some(amp) = rest.find('&') {
            rest = &rest[amp..];
            let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].iter().any(|e| rest.starts_with(e));
            if !ok {
                return Err(format!("bare & in {text:?}"));
            }
            rest = &rest[1..];
        }
        if text.contains('>') {
            return Err(format!("unescaped > in {text:?}"));
        }
        Ok(())
    }

    fn bar(runtime: &str, rps: f64, cpu: Option<f64>) -> Bar {
        Bar {
            lower_bound: false,
            runtime: runtime.into(),
            req_per_s: rps,
            req_per_s_min: rps * 0.9,
            req_per_s_max: rps * 1.1,
            cpu_us_per_resp: cpu,
        }
    }

    #[test]
    fn the_checker_catches_broken_documents() {
        let ok = r#"<svg xmlns="http://www.w3.org/2000/svg"><text>a &amp; b</text></svg>"#;
        assert!(well_formed(ok).is_ok());
        for bad in [
            r#"<svg xmlns="http://www.w3.org/2000/svg"><text>a & b</text></svg>"#,
            r#"<svg xmlns="http://www.w3.org/2000/svg"><g></svg>"#,
            r#"<svg><text/></svg>"#,
            r#"<svg xmlns="http://www.w3.org/2000/svg" a="1" a="2"/>"#,
            r#"<svg xmlns="http://www.w3.org/2000/svg"/><svg xmlns="http://www.w3.org/2000/svg"/>"#,
        ] {
            assert!(well_formed(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn workload_chart_is_well_formed_and_labels_every_runtime() {
        let bars = vec![
            bar("rust", 182_345.0, Some(5.4)),
            bar("bun", 95_000.0, Some(10.25)),
            bar("node <cluster> & \"friends\"", 41_000.0, None),
            bar("floor", 250_000.0, Some(3.1)),
        ];
        let svg = workload_svg("hello & <json>", &bars);
        well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        for name in ["rust", "bun", "floor", "node &lt;cluster&gt; &amp; &quot;friends&quot;"] {
            assert!(svg.contains(&format!(">{name}</text>")), "label {name}");
        }
        assert!(svg.contains("hello &amp; &lt;json&gt;"));
        assert!(svg.contains("182,345"));
        assert!(svg.contains("5.40 µs"));
        assert!(svg.contains(">n/a</text>"), "node has no CPU figure");
    }

    #[test]
    fn capacity_chart_marks_lower_bounds() {
        let mut loader_bound = bar("floor", 250_000.0, None);
        loader_bound.lower_bound = true;
        let svg = capacity_svg("hello-bare", "p99 ≤ 10 ms", &[bar("rust", 182_345.0, None), loader_bound]);
        well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert!(svg.contains("Capacity at p99 ≤ 10 ms (req/s, higher is better)"), "{svg}");
        assert!(svg.contains(">182,345</text>") && svg.contains(">≥ 250,000</text>"), "{svg}");
        assert!(!svg.contains("CPU"), "no CPU panel: {svg}");
    }

    #[test]
    fn single_zero_and_nan_bars_do_not_panic() {
        for bars in [
            vec![bar("only", 1234.0, Some(7.0))],
            vec![bar("zero", 0.0, Some(0.0))],
            vec![
                Bar {
                    runtime: "nan".into(),
                    req_per_s: f64::NAN,
                    req_per_s_min: f64::NAN,
                    req_per_s_max: f64::INFINITY,
                    cpu_us_per_resp: Some(f64::NAN),
                    lower_bound: true,
                },
                bar("neg", -5.0, Some(-1.0)),
            ],
            Vec::new(),
        ] {
            for svg in [workload_svg("edge", &bars), capacity_svg("edge", "p99 ≤ 10 ms", &bars)] {
                well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
                assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
                for b in &bars {
                    assert!(svg.contains(&format!(">{}</text>", b.runtime)));
                }
            }
        }
    }

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
