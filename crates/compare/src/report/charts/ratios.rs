//! The overview chart: every workload's CPU and req/s ratios to the reference runtime on log axes centred on 1.

use std::fmt::{self, Write};

use super::svg::{WIDTH, colors, esc, legend_layout, open_svg};

/// One runtime's ratio to the reference on one workload, for the overview chart.
#[derive(Debug, Clone, PartialEq)]
pub struct RatioPoint {
    pub workload: String,
    pub runtime: String,
    /// The runtime's CPU-µs per response ÷ the reference's, and its req/s ÷ the reference's (medians of
    /// per-round ratios).
    pub cpu: Option<f64>,
    pub rps: Option<f64>,
    /// The rule's (a), (c) and (d) hold for that metric in every run: a filled dot; hollow otherwise.
    pub cpu_holds: bool,
    pub rps_holds: bool,
}

/// The ratio axis's ends: ratios beyond are drawn at the edge (their tooltip has the figure).
const RATIO_MIN: f64 = 0.125;
const RATIO_MAX: f64 = 8.0;

/// The overview titled `title`: one row per workload, two panels (CPU per response ÷ `reference`, req/s ÷
/// `reference`) on log axes centred on 1, a dot per runtime, the ±10% band the rule's (c) ignores shaded.
pub fn ratios_svg(points: &[RatioPoint], title: &str, reference: &str) -> String {
    render_ratios(points, title, reference).unwrap_or_default()
}

fn render_ratios(points: &[RatioPoint], title: &str, reference: &str) -> Result<String, fmt::Error> {
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
    let mut out = String::with_capacity(4096 + points.len() * 256);
    open_svg(&mut out, height, title)?;
    writeln!(out, r#"<text x="16" y="28" font-size="18" font-weight="bold">{}</text>"#, esc(title))?;
    for ((name, (lx, ly)), color) in runtimes.iter().zip(legend).zip(&palette) {
        writeln!(out, r#"<circle cx="{:.1}" cy="{:.1}" r="5" fill="{color}"/>"#, lx + 8.0, ly - 4.0)?;
        writeln!(out, r#"<text x="{:.1}" y="{ly:.1}" font-size="13">{}</text>"#, lx + 20.0, esc(name))?;
    }
    let panel_w = (WIDTH - LABEL_W - GAP - 16.0) / 2.0;
    let panels = [
        (LABEL_W, format!("CPU ÷ {reference} (right of 1: {reference} cheaper)"), true),
        (LABEL_W + panel_w + GAP, format!("req/s ÷ {reference} (left of 1: {reference} faster)"), false),
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
            esc(&heading)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::well_formed;

    fn point(workload: &str, runtime: &str, cpu: Option<f64>, rps: Option<f64>) -> RatioPoint {
        RatioPoint { workload: workload.into(), runtime: runtime.into(), cpu, rps, cpu_holds: true, rps_holds: false }
    }

    #[test]
    fn every_workload_gets_a_row_and_every_measured_ratio_a_dot() {
        let points = vec![
            point("hello-bare", "bun", Some(1.5), Some(0.8)),
            point("hello-bare", "node & co", Some(3.0), Some(0.4)),
            point("notes <read>", "bun", Some(100.0), Some(0.001)),
            point("metadata", "bun", None, Some(f64::NAN)),
        ];
        let svg = ratios_svg(&points, "Every workload against rust", "rust");
        assert!(svg.contains("CPU ÷ rust (right of 1: rust cheaper)"), "{svg}");
        well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        for label in [">hello-bare</text>", ">notes &lt;read&gt;</text>", ">metadata</text>", ">node &amp; co</text>"] {
            assert!(svg.contains(label), "{label}");
        }
        assert!(svg.contains("<title>hello-bare bun: 1.50</title>"), "{svg}");
        // Beyond the axis a dot sits at its edge and its tooltip keeps the figure.
        assert!(svg.contains("<title>notes &lt;read&gt; bun: 100.00</title>"), "{svg}");
        // Six measured ratios, none for metadata's missing and NaN ones.
        assert_eq!(svg.matches("<circle").count(), 2 + 6, "two legend swatches and six dots: {svg}");
        assert!(!svg.contains("NaN") && !svg.contains("metadata bun"), "{svg}");
    }

    #[test]
    fn filled_where_the_rule_holds_hollow_where_not() {
        let svg = ratios_svg(&[point("hello-bare", "bun", Some(2.0), Some(0.5))], "Bun against Node", "node");
        assert!(svg.contains("req/s ÷ node (left of 1: node faster)"), "{svg}");
        let bun = colors(["bun"])[0];
        assert!(svg.contains(&format!(r#"fill="{bun}" stroke="{bun}""#)), "cpu holds: {svg}");
        assert!(svg.contains(&format!(r##"fill="#fff" stroke="{bun}""##)), "req/s does not: {svg}");
    }

    #[test]
    fn no_points_is_still_a_document() {
        well_formed(&ratios_svg(&[], "t", "rust")).expect("empty chart");
    }
}
