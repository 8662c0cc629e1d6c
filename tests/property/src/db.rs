//! Connections to the server under test (PGHOST, PGPORT, PGUSER) and text-only queries.

use std::io::Write;

use postgres::{Client, NoTls, SimpleQueryMessage};

use crate::values::Val;

/// A text row: every column as PostgreSQL prints it, `None` for NULL.
pub type Row = Vec<Option<String>>;

/// A connection to database `dbname` of the server under test, in UTC.
pub fn connect(dbname: &str) -> Client {
    let host = std::env::var("PGHOST").unwrap_or_else(|_| "127.0.0.1".into());
    let port: u16 = std::env::var("PGPORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(5432);
    let user = std::env::var("PGUSER").unwrap_or_else(|_| "postgres".into());
    let mut client = postgres::Config::new()
        .host(&host)
        .port(port)
        .user(&user)
        .dbname(dbname)
        .connect(NoTls)
        .unwrap_or_else(|e| {
            panic!(
                "cannot connect to {host}:{port} as {user}, database {dbname}: {}",
                describe(&e)
            )
        });
    // Every comparison of timestamps goes through the us() function below, but the literals the
    // test writes and the views' text must not depend on the server's default zone either.
    client
        .batch_execute("SET TimeZone = 'UTC'")
        .unwrap_or_else(|e| panic!("SET TimeZone: {}", describe(&e)));
    client
}

/// A new, empty database with the extension, dropped first if a previous run left it.
pub fn fresh_database(name: &str) -> Client {
    let mut admin = connect("postgres");
    // Two calls: several statements in one simple query form one transaction, which DROP
    // DATABASE refuses.
    for sql in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        admin
            .batch_execute(&sql)
            .unwrap_or_else(|e| panic!("cannot create database {name}: {}", describe(&e)));
    }
    let mut db = connect(name);
    db.batch_execute(
        "CREATE EXTENSION pg_eventtime;
         -- Timestamps are compared as exact microseconds since the Unix epoch.
         CREATE FUNCTION us(t timestamptz) RETURNS text IMMUTABLE LANGUAGE sql AS
           $$ SELECT CASE WHEN isfinite(t) THEN ((extract(epoch FROM t) * 1000000)::bigint)::text ELSE t::text END $$;
         -- Values collected in no particular order (array_agg, jsonb_agg), compared sorted.
         CREATE FUNCTION sorted(a anyarray) RETURNS anyarray IMMUTABLE LANGUAGE sql AS
           $$ SELECT array_agg(x ORDER BY x) FROM unnest(a) x $$;
         CREATE FUNCTION sorted(j jsonb) RETURNS jsonb IMMUTABLE LANGUAGE sql AS
           $$ SELECT jsonb_agg(x ORDER BY x) FROM jsonb_array_elements(j) x $$;
         -- A user's aggregate of an internal state, made of PostgreSQL's own functions for one.
         CREATE AGGREGATE nvar(numeric) (SFUNC = numeric_accum, STYPE = internal,
           FINALFUNC = numeric_var_samp, COMBINEFUNC = numeric_combine,
           SERIALFUNC = numeric_serialize, DESERIALFUNC = numeric_deserialize);",
    )
    .unwrap_or_else(|e| panic!("cannot set up database {name}: {}", describe(&e)));
    db
}

/// Drops a database the test made, once it passed; a failing run leaves it for inspection.
pub fn drop_database(name: &str) {
    let mut admin = connect("postgres");
    if let Err(e) = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")) {
        panic!("cannot drop database {name}: {}", describe(&e));
    }
}

/// The rows of a query, every column as text (simple query protocol).
pub fn text_rows(db: &mut Client, sql: &str) -> Vec<Row> {
    try_text_rows(db, sql).unwrap_or_else(|e| panic!("query failed: {}\n{sql}", describe(&e)))
}

/// `text_rows`, leaving a failure to the caller, to say where it happened.
pub fn try_text_rows(db: &mut Client, sql: &str) -> Result<Vec<Row>, postgres::Error> {
    let msgs = db.simple_query(sql)?;
    Ok(msgs
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
            }
            _ => None,
        })
        .collect())
}

/// A multi-row INSERT of `rows` into `columns` (quoted, comma-separated) of `table`.
pub fn insert_sql(table: &str, columns: &str, rows: &[Vec<Val>]) -> String {
    let values: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "({})",
                r.iter().map(Val::sql).collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    format!(
        "INSERT INTO {table} ({columns}) VALUES {}",
        values.join(",\n")
    )
}

/// `rows` into `columns` (quoted, comma-separated) of `table` by `COPY ... FROM STDIN`.
pub fn copy_rows(
    db: &mut Client,
    table: &str,
    columns: &str,
    rows: &[Vec<Val>],
) -> Result<u64, postgres::Error> {
    let mut data = String::new();
    for r in rows {
        data += &r.iter().map(Val::copy).collect::<Vec<_>>().join("\t");
        data.push('\n');
    }
    let mut w = db.copy_in(&format!("COPY {table} ({columns}) FROM STDIN"))?;
    w.write_all(data.as_bytes()).expect("COPY data");
    w.finish()
}

/// An error with the server's SQLSTATE, message, detail and hint, which `Display` leaves out.
pub fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => {
            let mut out = format!("{} {}: {}", d.severity(), d.code().code(), d.message());
            if let Some(detail) = d.detail() {
                out += &format!("\n  DETAIL: {detail}");
            }
            if let Some(hint) = d.hint() {
                out += &format!("\n  HINT: {hint}");
            }
            if let Some(w) = d.where_() {
                out += &format!("\n  CONTEXT: {w}");
            }
            out
        }
        None => e.to_string(),
    }
}

/// The major version of the server the test runs against.
pub fn server_major() -> i32 {
    let mut db = connect("postgres");
    let row = db
        .query_one(
            "SELECT current_setting('server_version_num')::int / 10000",
            &[],
        )
        .unwrap_or_else(|e| panic!("server_version_num: {}", describe(&e)));
    row.get(0)
}
