//! Text the tools share. Each module is one noun, with no dependencies, and none imports another.

pub mod duration;
pub mod thousands;
pub mod xml;

pub use duration::{DurationError, parse_duration};
pub use thousands::{group_digits, thousands, thousands_rounded};
