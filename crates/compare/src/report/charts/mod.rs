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
#[cfg(test)]
mod well_formed;

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
