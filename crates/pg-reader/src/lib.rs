//! One PostgreSQL connection per worker thread for point reads, shared by every request on that worker
//! (scribe-rs's reads by id, ladder-rs's PostgreSQL rung).
//!
//! Why not a pool: a pool gives each request a connection of its own, so each read pays its own write and
//! read syscalls on both sides and wakes a PostgreSQL backend of its own. tokio-postgres pipelines the
//! queries of concurrent callers on one connection: under load, one write carries every query the worker's
//! requests queued meanwhile, one read brings back several answers, and one backend serves them in a row.
//! Each statement is prepared once per connection, so a read is Bind/Execute/Sync with no Parse.
//!
//! What a shared connection costs: a slow query holds up the reads queued behind it, so only reads bounded
//! by a key belong here (scans stay on a pool). Failures are bounded: every read runs under one deadline,
//! connecting included; a connection that failed (closed, broken, too slow) is dropped, and the next read
//! opens a new one. A refused connection costs microseconds, so it is tried again at once; after a read or
//! a connect that ran out of time (a frozen server), the next attempt waits [`RECONNECT_EVERY`], and reads in
//! between fail at once instead of queueing behind it. Failures are [`ReadError::Unreachable`], which the
//! servers answer with 503 and `Retry-After`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::task::AbortHandle;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

/// How long a worker waits before connecting again after a read or a connect ran out of time.
pub const RECONNECT_EVERY: Duration = Duration::from_millis(250);

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No usable connection: PostgreSQL is down, refused us, or did not answer within the deadline.
    #[error("postgres: {0}")]
    Unreachable(String),
    /// PostgreSQL answered with an error (a missing table, a bad value, a statement timeout); the connection
    /// is fine and stays.
    #[error("postgres: {0}")]
    Query(tokio_postgres::Error),
}

/// One worker's connection. Not `Sync`: each worker thread owns one, and every request on it shares it.
pub struct Reader {
    config: tokio_postgres::Config,
    deadline: Duration,
    state: RefCell<State>,
    /// Held while connecting, so a burst of requests on a closed connection opens one, not one each.
    connecting: tokio::sync::Mutex<()>,
    /// Whether the last outcome was a failure, so an outage and the recovery are each logged once.
    failing: Cell<bool>,
}

enum State {
    Closed { retry_at: Option<Instant> },
    Open(Rc<Session>),
}

/// A connection, its driver task and the statements prepared on it.
struct Session {
    client: Client,
    statements: RefCell<HashMap<Box<str>, Statement>>,
    driver: AbortHandle,
}

impl Drop for Session {
    /// The driver would otherwise outlive a connection we gave up on, waiting for answers from a server
    /// that may never send them.
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Reader {
    /// Connects lazily, on the first read. `deadline` bounds every read, connecting included; `config`'s
    /// own connect timeout and options (a statement timeout) apply as given.
    pub fn new(config: tokio_postgres::Config, deadline: Duration) -> Reader {
        Reader {
            config,
            deadline,
            state: RefCell::new(State::Closed { retry_at: None }),
            connecting: tokio::sync::Mutex::new(()),
            failing: Cell::new(false),
        }
    }

    /// The rows `sql` returns for `params`.
    pub async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, ReadError> {
        let outcome = match tokio::time::timeout(self.deadline, self.run(sql, params)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Failure::TimedOut(format!("no answer within {} ms", self.deadline.as_millis()))),
        };
        match outcome {
            Ok(rows) => {
                if self.failing.replace(false) {
                    tracing::info!("PostgreSQL answers again");
                }
                Ok(rows)
            }
            Err(Failure::Answered(e)) => Err(ReadError::Query(e)),
            Err(Failure::Waiting) => Err(ReadError::Unreachable("not reconnected yet after a failure".into())),
            Err(Failure::Connection(message)) => Err(self.unreachable(message, None)),
            Err(Failure::TimedOut(message)) => Err(self.unreachable(message, Some(Instant::now() + RECONNECT_EVERY))),
        }
    }

    /// Drops the connection (requests still reading on it keep it until they finish); the next read
    /// connects again, not before `retry_at`. Logs the first failure of an outage.
    fn unreachable(&self, message: String, retry_at: Option<Instant>) -> ReadError {
        *self.state.borrow_mut() = State::Closed { retry_at };
        if !self.failing.replace(true) {
            tracing::warn!(error = %message, "PostgreSQL unavailable; answering 503");
        }
        ReadError::Unreachable(message)
    }

    /// The first row `sql` returns for `params`, if any.
    pub async fn query_opt(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>, ReadError> {
        Ok(self.query(sql, params).await?.into_iter().next())
    }

    async fn run(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, Failure> {
        let session = self.session().await?;
        let statement = session.statement(sql).await?;
        session.client.query(&statement, params).await.map_err(|e| {
            if e.as_db_error().is_some() {
                // The plan may be what failed (its table was dropped and made again): prepare it anew next time.
                session.statements.borrow_mut().remove(sql);
            }
            Failure::of(e)
        })
    }

    /// The open connection, or a new one: one connect however many requests wait for it, and none before
    /// the `retry_at` a time-out set.
    async fn session(&self) -> Result<Rc<Session>, Failure> {
        if let Some(open) = self.open() {
            return Ok(open);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(open) = self.open() {
            return Ok(open);
        }
        if let State::Closed { retry_at: Some(at) } = &*self.state.borrow()
            && Instant::now() < *at
        {
            return Err(Failure::Waiting);
        }
        let (client, connection) = self.config.connect(tokio_postgres::NoTls).await.map_err(|e| {
            let cause = std::error::Error::source(&e);
            let message = format!("connect: {}", described(&e));
            // The config's connect timeout: as costly as a read that ran out of time.
            let timed_out = cause
                .and_then(|c| c.downcast_ref::<std::io::Error>())
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
            if timed_out { Failure::TimedOut(message) } else { Failure::Connection(message) }
        })?;
        let driver = tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "PostgreSQL connection ended");
            }
        })
        .abort_handle();
        let session = Rc::new(Session { client, statements: RefCell::default(), driver });
        *self.state.borrow_mut() = State::Open(session.clone());
        Ok(session)
    }

    fn open(&self) -> Option<Rc<Session>> {
        match &*self.state.borrow() {
            State::Open(session) if !session.client.is_closed() => Some(session.clone()),
            _ => None,
        }
    }
}

impl Session {
    async fn statement(&self, sql: &str) -> Result<Statement, Failure> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        // Two requests may prepare the same text at once; both statements work, the later one is kept.
        let statement = self.client.prepare(sql).await.map_err(Failure::of)?;
        self.statements.borrow_mut().insert(sql.into(), statement.clone());
        Ok(statement)
    }
}

/// Why a read failed: PostgreSQL said no (keep the connection), the connection did (drop it), the read or
/// the connect ran out of time (drop it and wait before the next), or that wait is not over.
enum Failure {
    Answered(tokio_postgres::Error),
    Connection(String),
    TimedOut(String),
    Waiting,
}

impl Failure {
    fn of(e: tokio_postgres::Error) -> Failure {
        if e.as_db_error().is_some() && !e.is_closed() {
            return Failure::Answered(e);
        }
        Failure::Connection(described(&e))
    }
}

/// A tokio-postgres error with its cause ("error connecting to server" alone says little).
fn described(e: &tokio_postgres::Error) -> String {
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}
