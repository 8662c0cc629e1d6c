//! Error classification and small query helpers.

use std::thread;
use std::time::{Duration, Instant};

use postgres::error::SqlState;
use postgres::{Client, GenericClient};

/// What a failed statement means for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// 40P01 or 40001: roll back and send the same statement again.
    Retry(String),
    /// The connection is gone (server killed): reconnect, then find out whether it committed.
    ConnectionLost(String),
    /// Anything else: the test fails.
    Fatal(String),
}

pub fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => {
            let mut s = format!("{} {}: {}", d.severity(), d.code().code(), d.message());
            if let Some(x) = d.detail() {
                s += &format!("\n  DETAIL: {x}");
            }
            if let Some(x) = d.hint() {
                s += &format!("\n  HINT: {x}");
            }
            if let Some(x) = d.where_() {
                s += &format!(
                    "\n  WHERE: {}",
                    x.lines().take(6).collect::<Vec<_>>().join(" | ")
                );
            }
            s
        }
        None => format!("{e}"),
    }
}

pub fn classify(e: &postgres::Error) -> Failure {
    match e.code() {
        Some(c)
            if *c == SqlState::T_R_DEADLOCK_DETECTED
                || *c == SqlState::T_R_SERIALIZATION_FAILURE =>
        {
            Failure::Retry(c.code().to_string())
        }
        // 57P01 admin shutdown ("terminating connection due to unexpected postmaster exit"),
        // 57P02 crash shutdown, 57P03 cannot connect now; class 08: connection exceptions.
        Some(c) if c.code().starts_with("57P") || c.code().starts_with("08") => {
            Failure::ConnectionLost(describe(e))
        }
        Some(_) => Failure::Fatal(describe(e)),
        None => {
            if e.is_closed() || e.as_db_error().is_none() {
                Failure::ConnectionLost(describe(e))
            } else {
                Failure::Fatal(describe(e))
            }
        }
    }
}

/// Rows of a query whose every column is cast to text, as `Vec<Option<String>>`.
pub fn text_rows<C: GenericClient>(
    c: &mut C,
    sql: &str,
) -> Result<Vec<Vec<Option<String>>>, postgres::Error> {
    let rows = c.query(sql, &[])?;
    Ok(rows
        .iter()
        .map(|r| {
            (0..r.len())
                .map(|i| r.get::<_, Option<String>>(i))
                .collect()
        })
        .collect())
}

pub fn one_i64<C: GenericClient>(c: &mut C, sql: &str) -> i64 {
    c.query_one(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {}", describe(&e)))
        .get::<_, i64>(0)
}

pub fn exec(c: &mut Client, sql: &str) {
    c.batch_execute(sql)
        .unwrap_or_else(|e| panic!("{sql}\n=> {}", describe(&e)));
}

/// The backend pid of a connection, to watch it from another one.
pub fn backend_pid(c: &mut Client) -> i32 {
    c.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0)
}

/// Waits up to `limit` until backend `pid` waits on a heavyweight lock; returns what it waits
/// on and the start of its query, for the test's log.
pub fn wait_for_lock(obs: &mut Client, pid: i32, limit: Duration) -> Option<String> {
    let t = Instant::now();
    while t.elapsed() < limit {
        let r = obs
            .query_one(
                "SELECT wait_event_type, wait_event, left(query, 80) FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .unwrap();
        if r.get::<_, Option<String>>(0).as_deref() == Some("Lock") {
            return Some(format!(
                "{} ({})",
                r.get::<_, Option<String>>(1).unwrap_or_default(),
                r.get::<_, Option<String>>(2).unwrap_or_default()
            ));
        }
        thread::sleep(Duration::from_millis(10));
    }
    None
}

/// SQL string literal.
pub fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A row rendered as text lines for diffs: each column, NULL as `∅`.
pub fn render(row: &[Option<String>]) -> String {
    row.iter()
        .map(|v| v.as_deref().unwrap_or("∅"))
        .collect::<Vec<_>>()
        .join(" | ")
}
