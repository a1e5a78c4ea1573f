//! A real PostgreSQL and a real Redis behind the proxy (started by testkit from the installed binaries): a
//! query and a PING work through it and take at least the round trip added.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{connect, proxy};

const RTT: Duration = Duration::from_millis(10);

/// A query or a PING is one round trip: under this much on top of the delay (the server's own work and a
/// busy test machine's scheduling).
const SLACK: Duration = Duration::from_millis(5);

#[test]
fn a_postgres_query_works_through_the_proxy_and_takes_the_round_trip() {
    let pg = testkit::Postgres::start();
    let proxy = proxy(SocketAddr::from(([127, 0, 0, 1], pg.port())), RTT);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(proxy.local_addr().port())
            .user("postgres")
            .dbname("postgres")
            .connect_timeout(Duration::from_secs(10));
        let started = Instant::now();
        let (client, connection) = config.connect(tokio_postgres::NoTls).await.expect("connect through the proxy");
        let connected = started.elapsed();
        let driver = tokio::spawn(connection);
        // Startup and authentication are at least one round trip.
        assert!(connected >= RTT, "connected in {connected:?}, under the {RTT:?} round trip");
        let mut times = Vec::new();
        for i in 0..5 {
            let started = Instant::now();
            let rows = tokio::time::timeout(Duration::from_secs(10), client.simple_query(&format!("SELECT {i} + 1")))
                .await
                .expect("the query answers within 10 s")
                .expect("query");
            times.push(started.elapsed());
            let value = rows.iter().find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
                _ => None,
            });
            assert_eq!(value.as_deref(), Some((i + 1).to_string().as_str()));
        }
        times.sort();
        eprintln!("SELECT through a {RTT:?} proxy: {times:?}");
        assert!(times[0] >= RTT, "a query took {:?}, under the round trip", times[0]);
        assert!(times[2] < RTT + SLACK, "median query {:?}", times[2]);
        drop(client);
        let _ = tokio::time::timeout(Duration::from_secs(10), driver).await;
    });
}

#[test]
fn a_redis_ping_works_through_the_proxy_and_takes_the_round_trip() {
    let redis = testkit::Redis::start();
    let proxy = proxy(SocketAddr::from(([127, 0, 0, 1], redis.port())), RTT);
    let mut client = connect(proxy.local_addr());
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        client.write_all(b"*1\r\n$4\r\nPING\r\n").expect("PING");
        let mut pong = [0u8; 7];
        client.read_exact(&mut pong).expect("the answer");
        times.push(started.elapsed());
        assert_eq!(&pong, b"+PONG\r\n");
    }
    times.sort();
    eprintln!("PING through a {RTT:?} proxy: {times:?}");
    assert!(times[0] >= RTT, "a PING took {:?}, under the round trip", times[0]);
    assert!(times[2] < RTT + SLACK, "median PING {:?}", times[2]);
}
