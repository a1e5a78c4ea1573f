//! The recorder: where every measured record goes. Each record is appended to the run's JSONL file as soon as
//! it is measured (an interrupted or crashed comparison keeps everything measured so far), kept for the
//! report, and announced on the progress bar. One value instead of a sink, a progress bar and a record list
//! threaded through every function that measures.

use std::path::{Path, PathBuf};

use crate::records::{Record, Sink};
use crate::run::progress::Progress;

pub struct Recorder {
    sink: Sink,
    progress: Progress,
    records: Vec<Record>,
}

impl Recorder {
    pub fn new(sink: Sink, progress: Progress) -> Recorder {
        Recorder { sink, progress, records: Vec::new() }
    }

    /// A measurement starts: its label on the progress bar.
    pub fn begin(&mut self, label: &str) {
        self.progress.begin(label);
    }

    /// The measurement begun last ended after about `estimate_s`: its result on the progress bar.
    pub fn end(&mut self, estimate_s: f64, result: &str) {
        self.progress.end(estimate_s, result);
    }

    /// Steps that will not run (a void cell's rounds), with the seconds they were expected to take.
    pub fn skip(&mut self, steps: usize, estimate_s: f64) {
        self.progress.skip(steps, estimate_s);
    }

    /// A line of its own above the progress bar.
    pub fn line(&mut self, msg: &str) {
        self.progress.line(msg);
    }

    /// Appends `rec` to the JSONL file and keeps it.
    pub fn append(&mut self, rec: Record) -> anyhow::Result<()> {
        self.sink.append(&rec)?;
        self.records.push(rec);
        Ok(())
    }

    /// Every record so far, in the order measured.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// The JSONL file the records go to.
    pub fn jsonl(&self) -> &Path {
        self.sink.path()
    }

    /// Clears the progress bar; the JSONL file and the records.
    pub fn finish(mut self) -> (PathBuf, Vec<Record>) {
        self.progress.clear();
        (self.sink.path().to_path_buf(), self.records)
    }
}
