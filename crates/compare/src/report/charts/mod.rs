//! Charts for the report as standalone SVG, written by hand so the report needs no plotting stack and the
//! files render the same in a browser, on GitHub and in an image viewer. Sized for a 720 px wide page.
//!
//! Non-finite or negative values are drawn as absent ("n/a"), never as a bar: a chart must not show a number
//! that was not measured.

mod bars;
mod ladder;
mod lines;
mod ratios;
mod svg;

use std::path::{Path, PathBuf};

pub use bars::{Bar, capacity_svg, workload_svg};
pub use ladder::{LadderPoint, ladder_svg, steps_svg};
pub use lines::{Series, line_svg};
pub use ratios::{RatioPoint, ratios_svg};

/// The SVG file `name` (a workload, or a workload and its chart) gets next to the Markdown `md`.
pub fn svg_path(md: &Path, name: &str) -> PathBuf {
    let stem = md.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    md.with_file_name(format!("{stem}-{name}.svg"))
}

/// The chart tests read every SVG with an XML parser, as a browser does: well-formed, and its one root an `svg`
/// element in the SVG namespace (without it a browser shows the markup as text, not as a picture).
#[cfg(test)]
fn well_formed(doc: &str) -> Result<(), String> {
    let parsed = roxmltree::Document::parse(doc).map_err(|e| e.to_string())?;
    let root = parsed.root_element().tag_name();
    match (root.namespace(), root.name()) {
        (Some("http://www.w3.org/2000/svg"), "svg") => Ok(()),
        (namespace, name) => Err(format!("the root is <{name}> in namespace {namespace:?}, not an SVG")),
    }
}

#[cfg(test)]
mod tests {
    use super::well_formed;

    #[test]
    fn the_chart_check_refuses_what_a_browser_would_not_draw() {
        assert_eq!(well_formed(r#"<svg xmlns="http://www.w3.org/2000/svg"><text>a &amp; b</text></svg>"#), Ok(()));
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
}
