//! What is measured, before anything runs: the workloads (what each loads, which answers count, its probes),
//! the runtimes and how each is started per workload, `--target` cells and the built SPA. Plain data and
//! pure decisions; starting and measuring is `run`'s.

pub mod dataset;
pub mod load_spec;
pub mod paths;
pub mod prerequisites;
pub mod probe;
pub mod runtimes;
pub mod server_spec;
pub mod site;
pub mod stacks;
pub mod target;
pub mod tls;
pub mod versions;
pub mod workload_plan;
pub mod workloads;
