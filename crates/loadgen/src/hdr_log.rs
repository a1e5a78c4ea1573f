//! `--hdr-log`: the measured window's latency as an HdrHistogram interval log, one histogram per
//! `--hdr-interval`, every worker's merged into one series. The format is the one HdrHistogram's Java
//! `HistogramLogWriter` writes and its `HistogramLogReader` and `HistogramLogProcessor` read: the
//! hdrhistogram crate's `interval_log` writes the header and the lines (V2 + deflate, base64), and its
//! `IntervalLogIterator` reads them back.
//!
//! ```text
//! #loadgen 0.1.0: latency of the measured window, one histogram per 1s interval, every thread merged
//! #Values are microseconds (us), from each request's write (closed loop)
//! #Interval_Max is in milliseconds (the max in us / 1000: MaxValueDivisor); HistogramLogProcessor …
//! #[Histogram log format version 1.3]
//! #[StartTime: 1700000000.123 (seconds since epoch)]
//! #[BaseTime: 1700000000.123 (seconds since epoch)]
//! #[MaxValueDivisor: 1000.000]
//! "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//! 0.000,1.000,2.345,HISTFAAAA…
//! ```
//!
//! StartTime and BaseTime are both the start of the measured window (the report's `started_unix_ms`), so an
//! interval's timestamp is its offset into the window and logs from several loaders line up by wall clock.
//!
//! Each worker records every latency that goes into its report histogram into a [`Recorder`] too (the same
//! value, at the same moment), and hands the recorder's histogram over when an interval ends. The last
//! interval ends with the window (it is shorter when the window is not a whole number of intervals) and also
//! holds the open loop's sends never sent, as the report's histogram does. So each latency is in exactly one
//! interval and the intervals add up to the report's histogram. A writer thread merges an interval once
//! every worker has sent it, and appends its line then, so the log grows while the run goes on.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, IntervalLogWriterError};

use crate::settings::HdrLogSettings;
use crate::stats::new_histogram;

/// Interval_Max is the interval's max divided by this: loadgen's microseconds shown as milliseconds, as the
/// Java writer's default (1,000,000) shows nanoseconds. The column is for people; readers decode the histogram.
pub const MAX_VALUE_DIVISOR: f64 = 1000.0;

/// The log format version Java's writer states; comments to any reader.
const FORMAT_VERSION: &str = "[Histogram log format version 1.3]";

/// The column names Java's writer puts after the header. The crate's reader skips the line but its writer does
/// not write it, so it is written here.
const LEGEND: &str = "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n";

/// The log cannot be created (bad input, before the load starts) or written (during the run). Each message is
/// one line for the user and quotes its cause, so that is not also a `source`.
#[derive(Debug, thiserror::Error)]
pub enum HdrLogError {
    #[error("cannot write --hdr-log {}: {error}", path.display())]
    Create { path: PathBuf, error: io::Error },
    #[error("writing --hdr-log {} failed: {error}", path.display())]
    Write { path: PathBuf, error: io::Error },
    #[error("--hdr-log {}: an interval's histogram could not be encoded: {reason}", path.display())]
    Encode { path: PathBuf, reason: String },
    #[error("the --hdr-log writer thread panicked")]
    WriterPanicked,
}

/// The log file, created (empty) before the load starts, so that an unwritable path fails then.
#[derive(Debug)]
pub struct HdrLogFile {
    path: PathBuf,
    file: File,
    interval: Duration,
}

/// Creates (or truncates) the file `--hdr-log` names.
pub fn create(settings: &HdrLogSettings) -> Result<HdrLogFile, HdrLogError> {
    let path = settings.path.clone();
    match File::create(&path) {
        Ok(file) => Ok(HdrLogFile { path, file, interval: settings.interval }),
        Err(error) => Err(HdrLogError::Create { path, error }),
    }
}

/// What the header says about the run.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// The start of the measured window on the wall clock: StartTime and BaseTime.
    pub window_start: SystemTime,
    /// Open loop: latencies count from the intended send time.
    pub open_loop: bool,
}

impl Header {
    /// The comment lines above the crate's StartTime, BaseTime and MaxValueDivisor lines.
    fn comments(&self, interval: Duration) -> String {
        let measured = if self.open_loop {
            "from each request's intended send time (open loop: corrected for coordinated omission; sends never \
             sent count their wait to the window's end, in the last interval)"
        } else {
            "from each request's write (closed loop)"
        };
        format!(
            "loadgen {}: latency of the measured window, one histogram per {interval:?} interval, every thread \
             merged\nValues are microseconds (us), {measured}\nInterval_Max is in milliseconds (the max in us / \
             {MAX_VALUE_DIVISOR}: MaxValueDivisor); HistogramLogProcessor prints milliseconds with \
             -outputValueUnitRatio 1000 (its default is for nanoseconds)\n{FORMAT_VERSION}",
            env!("CARGO_PKG_VERSION"),
        )
    }
}

/// One worker's histogram of one interval, on its way to the writer.
#[derive(Debug)]
pub struct Interval {
    /// 0 for the window's first interval.
    index: u64,
    /// From the start of the measured window.
    start: Duration,
    length: Duration,
    latency: Histogram<u64>,
}

/// The thread writing the log.
#[derive(Debug)]
pub struct Writer(JoinHandle<Result<(), HdrLogError>>);

/// Starts the thread that writes the log: the header, then each interval once all `workers` have sent theirs.
/// Returns the sender the workers' recorders share, and the thread.
pub fn start_writer(log: HdrLogFile, header: Header, workers: usize) -> io::Result<(Sender<Interval>, Writer)> {
    let (to_writer, intervals) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("loadgen-hdr-log".into())
        .spawn(move || write(&log, header, intervals, workers))?;
    Ok((to_writer, Writer(thread)))
}

impl Writer {
    /// Waits for the writer, which ends once every sender is gone: Err when the log could not be written whole.
    pub fn wait(self) -> Result<(), HdrLogError> {
        self.0.join().map_err(|_| HdrLogError::WriterPanicked)?
    }
}

/// The writer thread's work. An interval some worker never sent (it failed, and so does the run) is not written.
fn write(log: &HdrLogFile, header: Header, intervals: Receiver<Interval>, workers: usize) -> Result<(), HdrLogError> {
    let write_failed = |error| HdrLogError::Write { path: log.path.clone(), error };
    let mut builder = IntervalLogWriterBuilder::new();
    builder
        .add_comment(&header.comments(log.interval))
        .with_start_time(header.window_start)
        .with_base_time(header.window_start)
        .with_max_value_divisor(MAX_VALUE_DIVISOR);
    let mut serializer = V2DeflateSerializer::new();
    // The crate's writer holds the handle it writes through for as long as it lives, and the legend goes
    // between its header and its first line: so it writes through one `&File` and the legend through another.
    // Writes to one open file share its offset, so they land in the order they are made (no buffer between).
    let mut through_crate = &log.file;
    let mut lines = builder.begin_log_with(&mut through_crate, &mut serializer).map_err(write_failed)?;
    (&log.file).write_all(LEGEND.as_bytes()).map_err(write_failed)?;
    // Per interval not yet written: how many workers have sent it, and their histograms added up so far.
    let mut pending: BTreeMap<u64, (usize, Interval)> = BTreeMap::new();
    for interval in intervals {
        match pending.entry(interval.index) {
            Entry::Vacant(entry) => {
                entry.insert((1, interval));
            }
            Entry::Occupied(mut entry) => {
                let (sent, merged) = entry.get_mut();
                *sent += 1;
                // Every histogram has new_histogram's bounds, so adding one cannot fail.
                let _ = merged.latency.add(&interval.latency);
            }
        }
        // Each worker sends its intervals in order, so the first pending one is always the next to be complete.
        while let Some(entry) = pending.first_entry()
            && entry.get().0 == workers
        {
            let (_, merged) = entry.remove();
            lines.write_histogram(&merged.latency, merged.start, merged.length, None).map_err(|e| match e {
                IntervalLogWriterError::IoError(error) => write_failed(error),
                IntervalLogWriterError::SerializeError(e) => {
                    HdrLogError::Encode { path: log.path.clone(), reason: e.to_string() }
                }
            })?;
        }
    }
    Ok(())
}

/// One worker's side of the log: the open interval's histogram, recorded into beside the report's, and handed
/// to the writer when the interval ends. One more histogram record per response; a new histogram and a
/// message per interval.
#[derive(Debug)]
pub struct Recorder {
    latency: Histogram<u64>,
    index: u64,
    /// The open interval's start, from the window's start.
    start: Duration,
    interval: Duration,
    /// When the open interval ends, unless the window ends first.
    next_end: Instant,
    window_start: Instant,
    window_end: Instant,
    to_writer: Sender<Interval>,
}

impl Recorder {
    /// A recorder whose first interval starts with the window (`window_start`, after the warmup).
    pub fn new(
        interval: Duration,
        window_start: Instant,
        window_end: Instant,
        to_writer: Sender<Interval>,
    ) -> Recorder {
        Recorder {
            latency: new_histogram(),
            index: 0,
            start: Duration::ZERO,
            interval,
            next_end: window_start + interval,
            window_start,
            window_end,
            to_writer,
        }
    }

    /// A latency (µs) of the open interval.
    pub fn record(&mut self, us: u64) {
        self.latency.saturating_record(us);
    }

    /// When the open interval ends: the worker wakes then to hand it over on time.
    pub fn next_end(&self) -> Instant {
        self.next_end.min(self.window_end)
    }

    /// Hands over every interval that ended by `now`, but not the one that ends with the window: [`finish`]
    /// does, once the last latencies are in.
    ///
    /// [`finish`]: Recorder::finish
    pub fn close_ended(&mut self, now: Instant) {
        while now >= self.next_end && self.next_end < self.window_end {
            let latency = std::mem::replace(&mut self.latency, new_histogram());
            let ended = Interval { index: self.index, start: self.start, length: self.interval, latency };
            // A writer that is gone has failed, and says so when the run ends; the run goes on meanwhile.
            let _ = self.to_writer.send(ended);
            self.index += 1;
            self.start += self.interval;
            self.next_end += self.interval;
        }
    }

    /// The window is over: the last interval, from its start to the window's end, goes to the writer.
    pub fn finish(self) {
        let length = self.window_end.saturating_duration_since(self.window_start + self.start);
        let last = Interval { index: self.index, start: self.start, length, latency: self.latency };
        let _ = self.to_writer.send(last);
    }
}

#[cfg(test)]
mod tests {
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    use super::*;

    /// Runs the writer for `workers` recorders of a window `window` long cut into `interval`s, feeding each
    /// recorder's latencies by `feed(worker, window start, recorder)`, and returns the log's text.
    fn log_of(
        workers: usize,
        interval: Duration,
        window: Duration,
        feed: impl Fn(usize, Instant, &mut Recorder),
    ) -> String {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let settings = HdrLogSettings { path: dir.path().join("run.hdr"), interval };
        let log = create(&settings).unwrap_or_else(|e| panic!("{e}"));
        let header =
            Header { window_start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000), open_loop: false };
        let (to_writer, writer) = start_writer(log, header, workers).unwrap_or_else(|e| panic!("{e}"));
        let start = Instant::now();
        for worker in 0..workers {
            let mut recorder = Recorder::new(interval, start, start + window, to_writer.clone());
            feed(worker, start, &mut recorder);
            recorder.close_ended(start + window);
            recorder.finish();
        }
        drop(to_writer);
        writer.wait().unwrap_or_else(|e| panic!("{e}"));
        std::fs::read_to_string(&settings.path).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Each interval line's start, length and histogram.
    fn intervals(text: &str) -> Vec<(Duration, Duration, Histogram<u64>)> {
        let decode = |encoded: &str| {
            let raw = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded)
                .unwrap_or_else(|e| panic!("{e}"));
            Deserializer::new().deserialize::<u64, _>(&mut raw.as_slice()).unwrap_or_else(|e| panic!("{e:?}"))
        };
        IntervalLogIterator::new(text.as_bytes())
            .filter_map(|entry| match entry.unwrap_or_else(|e| panic!("{e:?}")) {
                LogEntry::Interval(i) => Some((i.start_timestamp(), i.duration(), decode(i.encoded_histogram()))),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn workers_intervals_are_merged_and_the_last_one_ends_with_the_window() {
        let interval = Duration::from_millis(400);
        // Worker w records 10 × (w + 1) latencies in each of the 3 intervals of a 1 s window (the last 200 ms).
        let text = log_of(2, interval, Duration::from_secs(1), |worker, start, recorder| {
            for k in 0..3u32 {
                recorder.close_ended(start + interval * k);
                for _ in 0..10 * (worker + 1) {
                    recorder.record(100 * u64::from(k + 1));
                }
            }
        });
        let lines = intervals(&text);
        let starts: Vec<u128> = lines.iter().map(|(s, ..)| s.as_millis()).collect();
        let lengths: Vec<u128> = lines.iter().map(|(_, l, _)| l.as_millis()).collect();
        assert_eq!((starts, lengths), (vec![0, 400, 800], vec![400, 400, 200]), "{text}");
        for (k, (_, _, h)) in lines.iter().enumerate() {
            assert_eq!((h.len(), h.max()), (30, 100 * (k as u64 + 1)), "interval {k}: both workers' values");
        }
    }

    #[test]
    fn the_header_is_java_s_with_the_unit_stated() {
        let text = log_of(1, Duration::from_secs(1), Duration::from_secs(1), |_, _, recorder| recorder.record(2_500));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("#loadgen ") && lines[1].contains("microseconds (us)"), "{text}");
        assert!(lines.contains(&"#[Histogram log format version 1.3]"), "{text}");
        assert!(lines.contains(&"#[StartTime: 1700000000.000 (seconds since epoch)]"), "{text}");
        assert!(lines.contains(&"#[BaseTime: 1700000000.000 (seconds since epoch)]"), "{text}");
        let legend = lines.iter().position(|l| *l == LEGEND.trim_end()).unwrap_or_else(|| panic!("no legend: {text}"));
        assert_eq!(lines.len(), legend + 2, "the legend, then the one interval: {text}");
        // The histogram's max is the top of 2500's bucket (2501 µs at 3 digits), as the report's max_us is.
        assert!(lines[legend + 1].starts_with("0.000,1.000,2.501,"), "max 2501 us as 2.501 ms: {text}");
    }

    #[test]
    fn an_unwritable_path_is_named_with_its_error() {
        let settings = HdrLogSettings { path: "/nonexistent/run.hdr".into(), interval: Duration::from_secs(1) };
        let e = create(&settings).err().unwrap_or_else(|| panic!("created"));
        assert_eq!(
            e.to_string(),
            "cannot write --hdr-log /nonexistent/run.hdr: No such file or directory (os error 2)"
        );
    }
}
