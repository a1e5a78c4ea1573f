//! A TCP proxy that adds a fixed round trip between its clients and one upstream (a database), in user
//! space, for a kernel without netem: every segment read from one side is written to the other no earlier
//! than one half of the round trip after it was read, in order, and a segment's delay never adds to the
//! next one's. Ends of stream (half-closes) and resets pass through after the bytes before them; each
//! direction holds a bounded number of bytes. See the README for accuracy, costs and limits.
//!
//! ```no_run
//! let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
//! let settings = delay_proxy::Settings::new("127.0.0.1:5432".parse()?, std::time::Duration::from_millis(10));
//! let proxy = delay_proxy::spawn(listener, settings)?;
//! println!("connect to {}", proxy.local_addr());
//! eprint!("{}", proxy.join());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cli;
mod connection;
mod direction;
mod proxy;
mod report;
mod settings;
mod worker;

pub use proxy::{Proxy, spawn};
pub use report::{ConnectionReport, End, LISTED_CONNECTIONS, Report};
pub use settings::{DEFAULT_QUEUE_LIMIT, Settings};
