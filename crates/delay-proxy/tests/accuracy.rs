//! The round trip a small request sees through the proxy: at least the setting, and within 10% + 0.2 ms of
//! it (the median of a run of ping-pongs to an echo server of the test's own), at 1, 10 and 40 ms.

mod common;

use std::time::Duration;

use common::{connect, echo_server, median, proxy, round_trips};

/// The median round trip of `count` ping-pongs through a proxy set to `rtt`, checked against the bounds.
fn check(rtt: Duration, count: usize) {
    let proxy = proxy(echo_server(), rtt);
    let mut client = connect(proxy.local_addr());
    let times = round_trips(&mut client, count);
    let (fastest, median) = (*times.iter().min().expect("round trips"), median(times));
    let ceiling = rtt.mul_f64(1.1) + Duration::from_micros(200);
    eprintln!("rtt {rtt:?}: median {median:?}, fastest {fastest:?} over {count} round trips (ceiling {ceiling:?})");
    assert!(fastest >= rtt, "a round trip of {fastest:?} is under the {rtt:?} asked for: the delay is a minimum");
    assert!(median <= ceiling, "median round trip {median:?} for {rtt:?}: over {ceiling:?}");
}

#[test]
fn one_millisecond() {
    check(Duration::from_millis(1), 200);
}

#[test]
fn ten_milliseconds() {
    check(Duration::from_millis(10), 40);
}

#[test]
fn forty_milliseconds() {
    check(Duration::from_millis(40), 10);
}

#[test]
fn zero_is_a_plain_proxy() {
    let proxy = proxy(echo_server(), Duration::ZERO);
    let mut client = connect(proxy.local_addr());
    let median = median(round_trips(&mut client, 200));
    eprintln!("rtt 0: median {median:?} over 200 round trips");
    assert!(median < Duration::from_millis(1), "median round trip {median:?} through a proxy adding nothing");
}
