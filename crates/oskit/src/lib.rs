//! The Linux helpers loadgen, compare and delay-proxy share: one home each, so their rules cannot drift apart.
//! Each module is one noun and imports none of the others.

pub mod cpu_list;
pub mod procfs;
pub mod timer;
