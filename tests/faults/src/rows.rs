//! Rows as text values, and the three ways to send a statement of them: a multi-row `INSERT`,
//! `COPY ... FROM STDIN` (text format) and `SELECT * FROM eventtime.ingest(pipeline, jsonb)`.

use std::io::Write;

use postgres::Transaction;

use crate::db::{classify, lit, Failure};

/// One row: the text of each column in `TableSpec::columns` order; `None` is NULL.
pub type Values = Vec<Option<String>>;

#[derive(Debug, Clone)]
pub struct TableSpec {
    /// Qualified and quoted, ready for SQL.
    pub sql_name: String,
    /// Column names as spelled in the table.
    pub columns: Vec<String>,
    pub pipeline: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Insert,
    Copy,
    Ingest,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Insert => "INSERT",
            Method::Copy => "COPY",
            Method::Ingest => "ingest()",
        }
    }
}

pub fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn column_list(t: &TableSpec) -> String {
    t.columns
        .iter()
        .map(|c| quote_ident(c))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn insert_sql(t: &TableSpec, rows: &[Values]) -> String {
    let mut s = format!("INSERT INTO {} ({}) VALUES ", t.sql_name, column_list(t));
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            s.push_str(",\n");
        }
        s.push('(');
        for (j, v) in r.iter().enumerate() {
            if j > 0 {
                s.push_str(", ");
            }
            match v {
                Some(v) => s.push_str(&lit(v)),
                None => s.push_str("NULL"),
            }
        }
        s.push(')');
    }
    s
}

pub fn copy_sql(t: &TableSpec) -> String {
    format!("COPY {} ({}) FROM STDIN", t.sql_name, column_list(t))
}

pub fn copy_data(rows: &[Values]) -> String {
    let mut s = String::new();
    for r in rows {
        for (j, v) in r.iter().enumerate() {
            if j > 0 {
                s.push('\t');
            }
            match v {
                None => s.push_str("\\N"),
                Some(v) => {
                    for ch in v.chars() {
                        match ch {
                            '\\' => s.push_str("\\\\"),
                            '\t' => s.push_str("\\t"),
                            '\n' => s.push_str("\\n"),
                            '\r' => s.push_str("\\r"),
                            c => s.push(c),
                        }
                    }
                }
            }
        }
        s.push('\n');
    }
    s
}

pub fn json_string(v: &str) -> String {
    let mut s = String::from("\"");
    for ch in v.chars() {
        match ch {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\t' => s.push_str("\\t"),
            '\r' => s.push_str("\\r"),
            c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// An array of objects keyed by column names; every value a JSON string (PostgreSQL parses it
/// with the column type's input function) or null.
pub fn ingest_json(t: &TableSpec, rows: &[Values]) -> String {
    let mut s = String::from("[");
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push('{');
        for (j, v) in r.iter().enumerate() {
            if j > 0 {
                s.push(',');
            }
            s.push_str(&json_string(&t.columns[j]));
            s.push(':');
            match v {
                Some(v) => s.push_str(&json_string(v)),
                None => s.push_str("null"),
            }
        }
        s.push('}');
    }
    s.push(']');
    s
}

#[derive(Debug)]
pub enum SendError {
    Pg(postgres::Error),
    Io(std::io::Error),
    /// The extension answered, but against the contract.
    Contract(String),
}

impl SendError {
    pub fn failure(&self) -> Failure {
        match self {
            SendError::Pg(e) => classify(e),
            SendError::Io(e) => Failure::ConnectionLost(format!("I/O: {e}")),
            SendError::Contract(s) => Failure::Fatal(s.clone()),
        }
    }
}

impl From<postgres::Error> for SendError {
    fn from(e: postgres::Error) -> Self {
        SendError::Pg(e)
    }
}

/// The counts `eventtime.ingest` returned: accepted, late, refused, duplicates.
pub type Counts = [i64; 4];

/// Sends one statement inside `tx`. For `ingest()`, checks that the counts add up to the rows
/// (a pipeline of tumbling windows: one window per row).
pub fn send(
    tx: &mut Transaction<'_>,
    t: &TableSpec,
    method: Method,
    rows: &[Values],
) -> Result<Option<Counts>, SendError> {
    send_pairs(tx, t, method, rows, rows.len() as i64)
}

/// `send` for rows that make `pairs` (row, window) pairs (SPEC §7: `ingest()` counts pairs).
pub fn send_pairs(
    tx: &mut Transaction<'_>,
    t: &TableSpec,
    method: Method,
    rows: &[Values],
    pairs: i64,
) -> Result<Option<Counts>, SendError> {
    match method {
        Method::Insert => {
            tx.batch_execute(&insert_sql(t, rows))?;
            Ok(None)
        }
        Method::Copy => {
            let mut w = tx.copy_in(&copy_sql(t))?;
            w.write_all(copy_data(rows).as_bytes())
                .map_err(SendError::Io)?;
            w.finish()?;
            Ok(None)
        }
        Method::Ingest => {
            let r = tx.query_one(
                "SELECT accepted, late, refused, duplicates FROM eventtime.ingest($1, $2::text::jsonb)",
                &[&t.pipeline, &ingest_json(t, rows)],
            )?;
            let c: Counts = [r.get(0), r.get(1), r.get(2), r.get(3)];
            if c.iter().sum::<i64>() != pairs || c.iter().any(|&x| x < 0) {
                return Err(SendError::Contract(format!(
                    "eventtime.ingest({}) of {} rows returned accepted={} late={} refused={} duplicates={}, which do not add up to its {pairs} (row, window) pairs",
                    t.pipeline,
                    rows.len(),
                    c[0],
                    c[1],
                    c[2],
                    c[3]
                )));
            }
            Ok(Some(c))
        }
    }
}
