//! `ServeArgs` as flattened into a binary's config, and the limits it resolves to. (`parse_or_exit` reads the
//! real environment and exits the process, so it is exercised through the binaries, not here.)

use std::time::Duration;

use clap::Parser;
use clap::error::ErrorKind;

#[derive(Debug, Parser)]
struct Config {
    #[command(flatten)]
    serve: serve::ServeArgs,
}

fn parse(args: &[&str]) -> Result<Config, clap::Error> {
    Config::try_parse_from(std::iter::once("test").chain(args.iter().copied()))
}

fn limits(args: &[&str]) -> serve::Limits {
    parse(args).unwrap_or_else(|e| panic!("{args:?} rejected: {e}")).serve.limits()
}

fn rejected(args: &[&str]) -> ErrorKind {
    parse(args).err().unwrap_or_else(|| panic!("{args:?} accepted")).kind()
}

#[test]
fn defaults_match_limits_default() {
    let limits = limits(&[]);
    let default = serve::Limits::default();
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    assert_eq!(limits.workers, cpus);
    assert_eq!(default.workers, cpus);
    assert_eq!(limits.header_timeout, Duration::from_secs(10));
    assert_eq!(limits.keep_alive_timeout, Duration::from_secs(5));
    assert_eq!(limits.max_header_bytes, 16 * 1024);
    assert_eq!(limits.body_limit, 1024 * 1024);
    assert_eq!(limits.shutdown_timeout, Duration::from_secs(10));
    assert!(!limits.peer_addr);
    assert_eq!(format!("{limits:?}"), format!("{default:?}"), "CLI defaults and Limits::default agree");
}

#[test]
fn explicit_values_are_used() {
    let limits = limits(&[
        "--workers",
        "3",
        "--header-timeout",
        "2",
        "--keep-alive-timeout",
        "7",
        "--max-header-bytes",
        "8192",
        "--body-limit",
        "10",
        "--shutdown-timeout",
        "4",
    ]);
    assert_eq!(limits.workers, 3);
    assert_eq!(limits.header_timeout, Duration::from_secs(2));
    assert_eq!(limits.keep_alive_timeout, Duration::from_secs(7));
    assert_eq!(limits.max_header_bytes, 8192);
    assert_eq!(limits.body_limit, 10);
    assert_eq!(limits.shutdown_timeout, Duration::from_secs(4));
}

#[test]
fn zero_timeouts_resolve_sensibly() {
    // A zero header or idle timeout would close every connection at once; it is raised to one second. Zero
    // shutdown time is meaningful (cut at once) and kept.
    let limits = limits(&["--header-timeout", "0", "--keep-alive-timeout", "0", "--shutdown-timeout", "0"]);
    assert_eq!(limits.header_timeout, Duration::from_secs(1));
    assert_eq!(limits.keep_alive_timeout, Duration::from_secs(1));
    assert_eq!(limits.shutdown_timeout, Duration::ZERO);
}

#[test]
fn workers_out_of_range_are_rejected() {
    assert_eq!(rejected(&["--workers", "0"]), ErrorKind::ValueValidation);
    assert_eq!(rejected(&["--workers", "1025"]), ErrorKind::ValueValidation);
    assert_eq!(rejected(&["--workers", "many"]), ErrorKind::ValueValidation);
    assert_eq!(limits(&["--workers", "1"]).workers, 1);
    assert_eq!(limits(&["--workers", "1024"]).workers, 1024);
}

#[test]
fn max_header_bytes_out_of_range_are_rejected() {
    assert_eq!(rejected(&["--max-header-bytes", "8191"]), ErrorKind::ValueValidation);
    assert_eq!(rejected(&["--max-header-bytes", "0"]), ErrorKind::ValueValidation);
    assert_eq!(rejected(&["--max-header-bytes", &(1024 * 1024 + 1).to_string()]), ErrorKind::ValueValidation);
    assert_eq!(limits(&["--max-header-bytes", &(1024 * 1024).to_string()]).max_header_bytes, 1024 * 1024);
}

#[test]
fn non_numeric_values_are_rejected() {
    for flag in ["--header-timeout", "--keep-alive-timeout", "--body-limit", "--shutdown-timeout"] {
        assert_eq!(rejected(&[flag, "soon"]), ErrorKind::ValueValidation, "{flag}");
        assert_eq!(rejected(&[&format!("{flag}=-1")]), ErrorKind::ValueValidation, "{flag}");
    }
}

#[test]
fn unknown_flags_are_rejected() {
    assert_eq!(rejected(&["--no-such-flag"]), ErrorKind::UnknownArgument);
}

#[test]
fn tls_takes_both_files_and_resumption_switches() {
    assert!(limits(&[]).tls.is_none(), "plain HTTP unless both files are given");
    assert_eq!(limits(&[]).scheme(), "http");
    assert_eq!(rejected(&["--tls-cert", "c.pem"]), ErrorKind::MissingRequiredArgument);
    assert_eq!(rejected(&["--tls-key", "k.pem"]), ErrorKind::MissingRequiredArgument);
    let both = limits(&["--tls-cert", "c.pem", "--tls-key", "k.pem"]);
    assert_eq!(both.scheme(), "https");
    let tls = both.tls.expect("TLS settings");
    assert_eq!((tls.cert.to_str(), tls.key.to_str()), (Some("c.pem"), Some("k.pem")));
    assert!(tls.tickets && tls.session_cache, "resumption is on by default");
    let off = limits(&["--tls-cert", "c", "--tls-key", "k", "--tls-tickets", "off", "--tls-session-cache", "off"]);
    let off = off.tls.expect("TLS settings");
    assert!(!off.tickets && !off.session_cache);
    assert_eq!(rejected(&["--tls-cert", "c", "--tls-key", "k", "--tls-tickets", "maybe"]), ErrorKind::ValueValidation);
}
