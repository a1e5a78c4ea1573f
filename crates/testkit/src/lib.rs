//! Test-only helpers that start real dependencies: `redis-server` and PostgreSQL (`initdb` + `postgres`) from
//! PATH (or Debian's /usr/lib/postgresql/*/bin), in temp dirs, on free loopback ports. No mocks: tests talk to
//! the real thing, and can kill, pause and restart it to inject faults.
//!
//! ```no_run
//! let redis = testkit::Redis::start();
//! println!("{}", redis.url());
//! ```

pub mod http;
pub mod process;
pub mod shared;
pub mod wait;
pub mod workspace;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-server child process. Killed when dropped.
pub struct Redis {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl Redis {
    /// Starts redis-server on a free port and waits until it answers PING. Panics with a clear message when
    /// redis-server is not installed (the README's test command installs it).
    pub fn start() -> Redis {
        let dir = tempfile::tempdir().expect("temp dir for redis");
        let mut redis = Redis { child: None, port: free_port(), dir };
        redis.spawn();
        redis
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port (after `kill`).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// SIGSTOP: the port stays open but nothing answers, the nastiest way for a dependency to fail.
    pub fn freeze(&self) {
        self.signal("STOP");
    }

    /// SIGCONT after `freeze`.
    pub fn thaw(&self) {
        self.signal("CONT");
    }

    fn signal(&self, name: &str) {
        if let Some(pid) = self.pid() {
            let status = Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status();
            assert!(status.is_ok_and(|s| s.success()), "kill -{name} {pid} failed");
        }
    }

    fn spawn(&mut self) {
        let binary = find_binary("redis-server");
        let child = Command::new(&binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {}: {e}", binary.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if ping(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server on port {} did not answer PING within 10 s", self.port);
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.thaw();
        self.kill();
    }
}

fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(stream.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
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
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("bind 127.0.0.1:0")
}

/// Looks a binary up on PATH (and in the usual dirs Debian puts servers in, PostgreSQL's versioned one too).
pub fn find_binary(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut postgres_dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dirs| dirs.filter_map(|d| d.ok()).map(|d| d.path().join("bin")).collect())
        .unwrap_or_default();
    postgres_dirs.sort();
    postgres_dirs.reverse(); // newest major version first
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/usr/bin"].map(PathBuf::from))
        .chain(postgres_dirs)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{name} not found on PATH; run the README's test command, which installs it"))
}

mod postgres;
pub use postgres::Postgres;
