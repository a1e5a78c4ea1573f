//! `ladder-rs seed`: creates `ladder_items` when missing and makes it hold exactly ids 1..=rows, with
//! `name = 'item-<id>'` and `score = id * 37 % 1000`. Idempotent: running it again (or with another row count)
//! leaves the same table a fresh run would, in one transaction, serialized by an advisory lock.

use std::time::{Duration, Instant};

/// Rows the harness asks for: every key [`crate::pg::item_key`] can produce.
pub const DEFAULT_ROWS: u32 = 1000;

#[derive(Debug, Clone, clap::Args)]
pub struct SeedArgs {
    /// Postgres URL of the database to fill.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Rows to hold: ids 1..=rows (at least 1000 for every video id to find its item).
    #[arg(long, default_value_t = DEFAULT_ROWS, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub rows: u32,
}

const DDL: &str = "CREATE TABLE IF NOT EXISTS ladder_items (
    id integer PRIMARY KEY,
    name text NOT NULL,
    score integer NOT NULL
)";
const UPSERT: &str = "INSERT INTO ladder_items (id, name, score)
    SELECT g, 'item-' || g, g * 37 % 1000 FROM generate_series(1, $1::integer) AS g
    ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, score = EXCLUDED.score
    WHERE (ladder_items.name, ladder_items.score) IS DISTINCT FROM (EXCLUDED.name, EXCLUDED.score)";
const TRIM: &str = "DELETE FROM ladder_items WHERE id < 1 OR id > $1::integer";

/// The item the seed writes for `id`, as the servers return it.
pub fn expected_item(id: i32) -> crate::pg::Item {
    crate::pg::Item { name: format!("item-{id}"), score: id * 37 % 1000 }
}

/// Seeds the database; returns the rows the table holds afterwards.
pub async fn run(config: &tokio_postgres::Config, rows: u32) -> Result<i64, tokio_postgres::Error> {
    let mut config = config.clone();
    config.connect_timeout(Duration::from_secs(5));
    let (mut client, connection) = config.connect(tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(connection);
    let rows = i32::try_from(rows).unwrap_or(i32::MAX);
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock(hashtext('ladder_items'))", &[]).await?;
    tx.batch_execute(DDL).await?;
    tx.execute(UPSERT, &[&rows]).await?;
    tx.execute(TRIM, &[&rows]).await?;
    let count: i64 = tx.query_one("SELECT count(*) FROM ladder_items", &[]).await?.get(0);
    tx.commit().await?;
    drop(client);
    let _ = driver.await;
    Ok(count)
}

/// Runs `seed` from the command line: one summary line and exit 0, or one error line and exit 1.
pub fn main(args: &SeedArgs) -> ! {
    let started = Instant::now();
    let config = crate::pg::parse_database_url(&args.database_url).unwrap_or_else(|e| serve::exit_config(&e));
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => fail(&format!("cannot start a runtime: {e}")),
    };
    match runtime.block_on(run(&config, args.rows)) {
        Ok(count) => {
            println!(
                "ladder_items holds {count} rows (ids 1..={}) after {:.2} s",
                args.rows,
                started.elapsed().as_secs_f64()
            );
            std::process::exit(0)
        }
        Err(e) => fail(&crate::pg::describe(&e)),
    }
}

fn fail(message: &str) -> ! {
    eprintln!("ladder-rs seed: {message}");
    std::process::exit(1)
}
