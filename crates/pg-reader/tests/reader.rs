//! The reader against a real PostgreSQL: concurrent reads share one backend, a dropped and recreated table
//! reads again, an outage fails fast and recovers, a server that never answers costs one deadline.

use std::net::TcpListener;
use std::rc::Rc;
use std::time::{Duration, Instant};

use pg_reader::{ReadError, Reader};
use testkit::Postgres;

const READ: &str = "SELECT v FROM t WHERE k = $1";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

fn reader(url: &str, application: &str, deadline: Duration) -> Reader {
    let mut config: tokio_postgres::Config = url.parse().expect("url");
    config.application_name(application).connect_timeout(deadline);
    Reader::new(config, deadline)
}

fn seeded(pg: &Postgres, name: &str) -> String {
    let url = pg.create_database(name);
    pg.psql(name, "CREATE TABLE t (k integer PRIMARY KEY, v text); INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g");
    url
}

async fn value(reader: &Reader, key: i32) -> Result<Option<String>, ReadError> {
    Ok(reader.query_opt(READ, &[&key]).await?.map(|row| row.get(0)))
}

#[test]
fn concurrent_reads_share_one_backend_and_one_prepared_statement() {
    let pg = Postgres::start();
    let url = seeded(&pg, "t_shared");
    let reader = Rc::new(reader(&url, "pg_reader_shared", Duration::from_secs(5)));
    let (rt, local) = (runtime(), tokio::task::LocalSet::new());
    let values = local.block_on(&rt, async {
        let reads: Vec<_> = (1..=500)
            .map(|i| {
                let reader = reader.clone();
                tokio::task::spawn_local(async move { value(&reader, i % 100 + 1).await })
            })
            .collect();
        let mut values = Vec::new();
        for read in reads {
            values.push(read.await.expect("task").expect("read"));
        }
        values
    });
    for (i, v) in values.iter().enumerate() {
        assert_eq!(v.as_deref(), Some(format!("v{}", (i + 1) % 100 + 1).as_str()));
    }
    let backends =
        pg.psql("t_shared", "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_reader_shared'");
    assert_eq!(backends, "1", "500 concurrent reads on one backend");
    // Prepared once (pg_prepared_statements is per session, so ask through the reader itself).
    let prepared = local.block_on(&rt, async {
        reader.query("SELECT count(*)::int FROM pg_prepared_statements WHERE statement = $1", &[&READ]).await
    });
    let prepared: i32 = prepared.expect("count")[0].get(0);
    assert_eq!(prepared, 1, "the read prepared once on the connection");
}

#[test]
fn a_table_dropped_and_made_again_reads_again() {
    let pg = Postgres::start();
    let url = seeded(&pg, "t_dropped");
    let reader = reader(&url, "pg_reader_dropped", Duration::from_secs(5));
    let rt = runtime();
    assert_eq!(rt.block_on(value(&reader, 7)).expect("read").as_deref(), Some("v7"));
    pg.psql("t_dropped", "DROP TABLE t");
    match rt.block_on(value(&reader, 7)) {
        Err(ReadError::Query(e)) => {
            assert_eq!(e.code(), Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE), "{e}");
        }
        other => panic!("a missing table is PostgreSQL's answer, not an outage: {other:?}"),
    }
    pg.psql("t_dropped", "CREATE TABLE t (k integer PRIMARY KEY, v text); INSERT INTO t VALUES (7, 'again')");
    assert_eq!(rt.block_on(value(&reader, 7)).expect("read after re-creation").as_deref(), Some("again"));
}

#[test]
fn an_outage_fails_fast_and_the_next_reads_reconnect() {
    let mut pg = Postgres::start();
    let url = seeded(&pg, "t_outage");
    let reader = reader(&url, "pg_reader_outage", Duration::from_secs(2));
    let rt = runtime();
    assert_eq!(rt.block_on(value(&reader, 1)).expect("read").as_deref(), Some("v1"));

    pg.stop_immediate();
    let began = Instant::now();
    for _ in 0..20 {
        match rt.block_on(value(&reader, 1)) {
            Err(ReadError::Unreachable(_)) => {}
            other => panic!("PostgreSQL is down: {other:?}"),
        }
    }
    assert!(began.elapsed() < Duration::from_secs(2), "20 reads in an outage took {:?}", began.elapsed());

    pg.restart();
    let began = Instant::now();
    let back = loop {
        match rt.block_on(value(&reader, 2)) {
            Ok(v) => break v,
            Err(ReadError::Unreachable(_)) if began.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("no read within {:?} of PostgreSQL's return: {e}", began.elapsed()),
        }
    };
    assert_eq!(back.as_deref(), Some("v2"));
}

#[test]
fn a_server_that_never_answers_costs_one_deadline_then_fails_at_once() {
    // Accepts connections (the kernel's backlog does) and never says a word: a frozen PostgreSQL.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("postgres://postgres@127.0.0.1:{}/none", silent.local_addr().expect("addr").port());
    let deadline = Duration::from_millis(300);
    let reader = reader(&url, "pg_reader_silent", deadline);
    let rt = runtime();
    let began = Instant::now();
    assert!(matches!(rt.block_on(value(&reader, 1)), Err(ReadError::Unreachable(_))));
    let first = began.elapsed();
    assert!(first >= deadline && first < deadline * 3, "the first read waited {first:?}");
    let began = Instant::now();
    assert!(matches!(rt.block_on(value(&reader, 1)), Err(ReadError::Unreachable(_))));
    assert!(began.elapsed() < Duration::from_millis(50), "a read right after waited {:?}", began.elapsed());
}
