//! Horizontal bar charts: a workload's throughput and CPU per response, and its capacity at a latency
//! objective; medians with min–max whiskers.

use std::fmt::{self, Write};

use super::svg::{Axis, CHAR_W, WIDTH, colors, esc, measured, micros, open_svg, thousands};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::well_formed;

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
}
