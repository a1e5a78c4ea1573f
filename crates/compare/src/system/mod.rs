//! What compare needs from the operating system: child processes in process groups that die with compare
//! (the reaper), /proc readings (CPU, RSS, core busy shares), a small raw HTTP/1.1 client for probes, and the
//! three Redis commands compare sends.

pub mod cores;
pub mod http;
pub mod process;
pub mod procfs;
pub mod redis;
