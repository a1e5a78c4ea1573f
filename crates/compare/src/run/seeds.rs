//! The data the workloads are measured on: the notes seeded through the notes API before notes-read, and the
//! generated metadata dataset.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};

use crate::system::http::Conn;

const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// The component notes are seeded into.
const NOTES_COMPONENT: &str = "notes";

/// POSTs notes 1..=count ([`note_body`]), in order, on one keep-alive connection (a new one only when
/// the server closes it) to the notes server at `base_url` (`http://host:port`). Any status but 200 is an
/// error.
pub fn seed_notes(base_url: &str, count: u32) -> anyhow::Result<()> {
    let authority = http_authority(base_url)?;
    let path = format!("/{NOTES_COMPONENT}");
    let mut conn: Option<Conn> = None;
    let mut request = Vec::with_capacity(512);
    for i in 1..=count {
        let body = note_body(i);
        request.clear();
        write!(
            request,
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        )?;
        let c = match conn.as_mut() {
            Some(c) => c,
            None => {
                conn.insert(Conn::connect(&authority, HTTP_TIMEOUT).with_context(|| format!("connect {authority}"))?)
            }
        };
        let response = c.exchange(&request, false).with_context(|| format!("seed POST #{i} to {base_url}{path}"))?;
        if response.status != 200 {
            let shown = String::from_utf8_lossy(&response.body[..response.body.len().min(300)]).into_owned();
            bail!("seed POST #{i} to {base_url}{path}: status {}, body {shown:?}", response.status);
        }
        if response.close {
            conn = None;
        }
    }
    Ok(())
}

/// `host:port` of an `http://host:port[/]` base URL.
fn http_authority(base_url: &str) -> anyhow::Result<String> {
    let rest =
        base_url.strip_prefix("http://").ok_or_else(|| anyhow!("base URL {base_url:?}: expected http://host:port"))?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        bail!("base URL {base_url:?}: no host");
    }
    Ok(authority.to_string())
}

/// Seed note `i` (1-based): compact JSON whose fields vary with `i` (tags, word counts, pinned, authors), the
/// same bytes for every run and every runtime, so notes-read answers can be compared and published figures
/// stay comparable. Note 1's timestamps are not normalized (no milliseconds, an offset) so checks cover the
/// timestamp format.
pub fn note_body(i: u32) -> String {
    let (created, modified) = if i == 1 {
        ("2024-01-02T03:04:05Z".to_string(), "2024-05-06T09:08:07.123+02:00".to_string())
    } else {
        (format!("2024-01-{:02}T10:00:00.250Z", 1 + i % 28), format!("2024-02-{:02}T11:30:00.500Z", 1 + i % 28))
    };
    format!(
        concat!(
            r#"{{"data":{{"title":"Note {i}","body":"Body of note {i}: remember the milk, and the eggs.","#,
            r#""tags":["seed","n{tag}"],"meta":{{"words":{words},"pinned":{pinned},"source":"notes_bench"}}}},"#,
            r#""date_created":"{created}","date_modified":"{modified}","created_by":{by},"modified_by":{mod_by}}}"#
        ),
        i = i,
        tag = i % 10,
        words = 9 + i % 7,
        pinned = i.is_multiple_of(2),
        created = created,
        modified = modified,
        by = 1 + i % 3,
        mod_by = 2 + i % 5,
    )
}

/// The metadata workload's dataset in `dir`: `metadata-<rows>.db` and `sample_ids-<rows>.txt` (seed 1, 10000
/// sample ids, 1% absent), regenerated every time so a change to the generator can never leave stale data.
pub fn metadata_dataset(dir: &Path, rows: u64) -> anyhow::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let args = metadata_dataset::GenDataArgs {
        db: dir.join(format!("metadata-{rows}.db")),
        ids: dir.join(format!("sample_ids-{rows}.txt")),
        rows,
        seed: 1,
        samples: 10_000,
        absent_percent: 1.0,
        force: true,
    };
    metadata_dataset::run(&args).with_context(|| format!("generate the metadata dataset in {}", dir.display()))?;
    Ok((args.db, args.ids))
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn note_bodies_stay_byte_for_byte() {
        // The bytes every published notes-read figure was seeded with.
        assert_eq!(
            note_body(1),
            concat!(
                r#"{"data":{"title":"Note 1","body":"Body of note 1: remember the milk, and the eggs.","#,
                r#""tags":["seed","n1"],"meta":{"words":10,"pinned":false,"source":"notes_bench"}},"#,
                r#""date_created":"2024-01-02T03:04:05Z","date_modified":"2024-05-06T09:08:07.123+02:00","#,
                r#""created_by":2,"modified_by":3}"#
            )
        );
        assert_eq!(
            note_body(37),
            concat!(
                r#"{"data":{"title":"Note 37","body":"Body of note 37: remember the milk, and the eggs.","#,
                r#""tags":["seed","n7"],"meta":{"words":11,"pinned":false,"source":"notes_bench"}},"#,
                r#""date_created":"2024-01-10T10:00:00.250Z","date_modified":"2024-02-10T11:30:00.500Z","#,
                r#""created_by":2,"modified_by":4}"#
            )
        );
    }

    /// A notes server stand-in: answers each POST with 200 (alternating Content-Length and chunked framing,
    /// closing after the third) and records the bodies.
    fn fake_notes_server(fail_at: Option<usize>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let handle = std::thread::spawn(move || {
            let mut bodies = Vec::new();
            while let Ok((stream, _)) = listener.accept() {
                stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
                let mut reader = BufReader::new(stream);
                loop {
                    let mut head = String::new();
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return bodies;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().expect("length");
                        }
                        if line == "\r\n" {
                            break;
                        }
                        head.push_str(&line);
                    }
                    assert!(head.starts_with("POST /notes HTTP/1.1\r\n"), "{head}");
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).expect("body");
                    bodies.push(String::from_utf8(body).expect("utf8"));
                    let n = bodies.len();
                    let out = reader.get_mut();
                    if Some(n) == fail_at {
                        let _ = out.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 11\r\n\r\n{\"error\":1}");
                    } else if n % 2 == 0 {
                        let _ =
                            out.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n");
                    } else if n == 3 {
                        let _ = out.write_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n[]");
                        break;
                    } else {
                        let _ = out.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n[]");
                    }
                }
                if bodies.len() >= 5 || fail_at.is_some_and(|f| bodies.len() >= f) {
                    return bodies;
                }
            }
            bodies
        });
        (base, handle)
    }

    #[test]
    fn seeding_posts_every_note_in_order() {
        let (base, server) = fake_notes_server(None);
        seed_notes(&base, 5).expect("seed");
        let bodies = server.join().expect("server");
        assert_eq!(bodies, (1..=5).map(note_body).collect::<Vec<_>>());

        let (base, server) = fake_notes_server(Some(2));
        let err = seed_notes(&base, 5).expect_err("must fail");
        assert!(err.to_string().contains("seed POST #2") && err.to_string().contains("400"), "{err}");
        drop(server);
    }

    #[test]
    fn metadata_dataset_writes_db_and_ids() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (db, ids) = metadata_dataset(&dir.path().join("data"), 300).expect("dataset");
        assert!(db.is_file());
        assert_eq!(std::fs::read_to_string(&ids).expect("ids").lines().count(), 10_000);
        // Regenerating over existing files works (fresh runs reuse the dir).
        metadata_dataset(&dir.path().join("data"), 300).expect("again");
    }
}
