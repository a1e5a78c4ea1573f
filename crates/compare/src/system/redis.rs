//! The few Redis commands compare itself sends (PING before a run, FLUSHDB before a cached server starts,
//! INFO around a window for the hit ratio): one short-lived connection per command, RESP written by hand, so
//! compare needs no Redis client library and no runtime of its own for three commands.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{Context, bail};

/// Every connect, write and read is bounded by this.
const WITHIN: Duration = Duration::from_secs(2);

/// `host`, `port` and database index of a `redis://[user@]host:port[/db]` URL.
fn parts(url: &str) -> Option<(String, u16, Option<u32>)> {
    let rest = url.strip_prefix("redis://")?;
    let (authority, db) = match rest.split_once('/') {
        Some((a, db)) if !db.is_empty() => (a, Some(db.parse().ok()?)),
        Some((a, _)) => (a, None),
        None => (rest, None),
    };
    let host_port = authority.rsplit('@').next()?;
    let (host, port) = host_port.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?, db))
}

/// One command's request in RESP: an array of bulk strings.
fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// One reply: a status or integer line as text, a bulk string's bytes; an error reply is an error.
fn reply(reader: &mut impl BufRead) -> anyhow::Result<Vec<u8>> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let line = line.trim_end_matches(['\r', '\n']);
    match line.split_at_checked(1) {
        Some(("+" | ":", rest)) => Ok(rest.as_bytes().to_vec()),
        Some(("-", rest)) => bail!("Redis answered {rest}"),
        Some(("$", len)) => {
            let len: usize = len.parse().with_context(|| format!("bulk length {len:?}"))?;
            let mut body = vec![0; len + 2];
            reader.read_exact(&mut body)?;
            body.truncate(len);
            Ok(body)
        }
        _ => bail!("unexpected Redis reply {line:?}"),
    }
}

/// Sends `args` to the Redis at `url` (on its database, when the URL names one) and returns the reply.
pub fn command(url: &str, args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let (host, port, db) = parts(url).with_context(|| format!("Redis URL {url:?} has no host:port"))?;
    let talk = || -> anyhow::Result<Vec<u8>> {
        let addr = (host.as_str(), port).to_socket_addrs()?.next().context("no address")?;
        let mut conn = TcpStream::connect_timeout(&addr, WITHIN)?;
        conn.set_read_timeout(Some(WITHIN))?;
        conn.set_write_timeout(Some(WITHIN))?;
        let mut request = Vec::new();
        if let Some(db) = db {
            request.extend(encode(&["SELECT", &db.to_string()]));
        }
        request.extend(encode(args));
        conn.write_all(&request)?;
        let mut reader = BufReader::new(conn);
        if db.is_some() {
            reply(&mut reader)?;
        }
        reply(&mut reader)
    };
    talk().with_context(|| format!("Redis at {host}:{port}: {}", args.join(" ")))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(parts("redis://127.0.0.1:6390"), Some(("127.0.0.1".into(), 6390, None)));
        assert_eq!(parts("redis://u:p@h:1/4"), Some(("h".into(), 1, Some(4))));
        assert_eq!(parts("redis://h:1/"), Some(("h".into(), 1, None)));
        assert_eq!(parts("redis://h/4"), None);
        assert_eq!(parts("http://h:1"), None);
    }

    #[test]
    fn replies() {
        let mut r = BufReader::new(&b"+OK\r\n:12\r\n$5\r\nab\r\nc\r\n-ERR no\r\n*1\r\n"[..]);
        assert_eq!(reply(&mut r).expect("status"), b"OK");
        assert_eq!(reply(&mut r).expect("integer"), b"12");
        assert_eq!(reply(&mut r).expect("bulk"), b"ab\r\nc");
        assert!(reply(&mut r).expect_err("error").to_string().contains("ERR no"));
        assert!(reply(&mut r).is_err());
        assert_eq!(encode(&["SET", "k", "v"]), b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
    }
}
