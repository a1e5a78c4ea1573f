//! Test-only helpers. Real dependencies, `redis-server` and PostgreSQL (`initdb` + `postgres`), come from
//! the localdeps crate (temp dirs, free loopback ports); testkit's [`Redis`] and [`Postgres`] put them in the
//! shape tests want: failures are panics. No mocks: tests talk to the real thing, and can kill, pause and
//! restart it to inject faults.
//!
//! ```no_run
//! let redis = testkit::Redis::start();
//! println!("{}", redis.url());
//! ```

pub mod h2;
pub mod http;
mod in_process;
pub mod peers;
pub mod process;
pub mod shared;
pub mod tls;
pub mod wait;
pub mod workspace;

use std::path::PathBuf;
use std::time::Duration;

/// A redis-server of its own ([`localdeps::Redis`]) with failures as panics, as tests want them. Stopped
/// when dropped.
pub struct Redis(localdeps::Redis);

impl Redis {
    /// Starts redis-server on a free port and waits until it answers PING. Panics with a clear message when
    /// redis-server is not installed (the README's test command installs it).
    pub fn start() -> Redis {
        Redis(localdeps::Redis::start(&localdeps::Options::default()).unwrap_or_else(|e| panic!("{e:#}")))
    }

    pub fn port(&self) -> u16 {
        self.0.port()
    }

    pub fn url(&self) -> String {
        self.0.url()
    }

    pub fn pid(&self) -> Option<u32> {
        self.0.pid()
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        self.0.kill();
    }

    /// Starts it again on the same port (after `kill`).
    pub fn restart(&mut self) {
        self.0.restart().unwrap_or_else(|e| panic!("restarting redis-server: {e:#}"));
    }

    /// SIGSTOP: the port stays open but nothing answers, the nastiest way for a dependency to fail.
    pub fn freeze(&self) {
        self.0.freeze().unwrap_or_else(|e| panic!("SIGSTOP to redis-server: {e}"));
    }

    /// SIGCONT after `freeze`.
    pub fn thaw(&self) {
        self.0.thaw().unwrap_or_else(|e| panic!("SIGCONT to redis-server: {e}"));
    }
}

/// The first line a child printed on stdout, or `None` if none came within `within` (a server's
/// "listening on …" line). Reads on a helper thread so a silent child cannot hang the test.
pub fn first_line(stdout: std::process::ChildStdout, within: Duration) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(within).ok().filter(|line| !line.is_empty())
}

/// A port that was free a moment ago. Good enough for tests: the kernel does not hand the same ephemeral
/// port out again right away.
pub fn free_port() -> u16 {
    localdeps::free_port().expect("bind 127.0.0.1:0")
}

/// Looks a binary up on PATH (and in the usual dirs Debian puts servers in, PostgreSQL's versioned one too).
pub fn find_binary(name: &str) -> PathBuf {
    localdeps::find_in(name, &localdeps::search_dirs())
        .unwrap_or_else(|| panic!("{name} not found on PATH; run the README's test command, which installs it"))
}

mod postgres;
pub use postgres::Postgres;
