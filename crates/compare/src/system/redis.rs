//! The few Redis commands compare itself sends (PING before a run, FLUSHDB before a cached server starts,
//! INFO around a window for the hit ratio), through the `redis` crate's blocking client: one short-lived
//! connection per command, which sends the URL's credentials (AUTH) and database (SELECT) first.

use std::time::Duration;

use anyhow::{Context, bail};
use redis::{IntoConnectionInfo, Value};

/// Every connect, write and read (AUTH's and SELECT's included) is bounded by this, so a Redis that accepts
/// connections and never answers (a frozen server) cannot hang compare.
const WITHIN: Duration = Duration::from_secs(2);

/// Sends `args` to the Redis at `url` (a `redis://[[user]:password@]host[:port][/db]` URL) and returns the
/// reply: a status or an integer as its text, a bulk string's bytes. An error reply is an error.
pub fn command(url: &str, args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let (name, rest) = args.split_first().context("no Redis command to send")?;
    // The URL is left out of the errors: it may carry a password.
    let info = url.into_connection_info().context("Redis URL is not redis://[[user]:password@]host[:port][/db]")?;
    // No CLIENT SETINFO: two more round trips, each with a read timeout of its own, on a one-command connection.
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    let client = redis::Client::open(info.set_redis_settings(settings))?;
    let talk = || -> anyhow::Result<Vec<u8>> {
        let mut conn = client.get_connection_with_timeout(WITHIN)?;
        conn.set_read_timeout(Some(WITHIN))?;
        conn.set_write_timeout(Some(WITHIN))?;
        reply_bytes(redis::cmd(name).arg(rest).query(&mut conn)?)
    };
    let server = client.get_connection_info().addr();
    talk().with_context(|| format!("Redis at {server}: {}", args.join(" ")))
}

/// The reply as compare's callers read it: PING's PONG and FLUSHDB's OK as text, an integer in decimal, a bulk
/// string (INFO, GET) as it came.
fn reply_bytes(reply: Value) -> anyhow::Result<Vec<u8>> {
    Ok(match reply {
        Value::Okay => b"OK".to_vec(),
        Value::SimpleString(text) => text.into_bytes(),
        Value::Int(n) => n.to_string().into_bytes(),
        Value::BulkString(bytes) => bytes,
        other => bail!("unexpected Redis reply {other:?}"),
    })
}

/// Lookups that found their key and lookups that did not, since the server started (INFO stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keyspace {
    pub hits: u64,
    pub misses: u64,
}

pub fn keyspace(url: &str) -> anyhow::Result<Keyspace> {
    let info = String::from_utf8_lossy(&command(url, &["INFO", "stats"])?).into_owned();
    let field = |name: &str| -> anyhow::Result<u64> {
        let value = info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':'));
        value.and_then(|v| v.trim().parse().ok()).with_context(|| format!("INFO stats has no {name}"))
    };
    Ok(Keyspace { hits: field("keyspace_hits")?, misses: field("keyspace_misses")? })
}
