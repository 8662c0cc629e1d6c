//! The pipeline configurations the property test drives, each on its own source table.

use crate::values::{quote_ident, utc, DAY, HOUR, MINUTE};

#[derive(Clone, Copy, Debug)]
pub enum Role {
    /// A grouping column drawing from these values (or NULL).
    Key(&'static [&'static str]),
    /// The event id: a bigint counter, or text with this prefix.
    EventId {
        text_prefix: Option<&'static str>,
    },
    EventTime,
    /// A numeric payload with varying scale.
    Amount,
    /// An integer payload.
    Qty,
    /// A text payload with characters that COPY and JSON must escape.
    Note,
}

#[derive(Clone, Debug)]
pub struct Column {
    pub name: &'static str,
    pub sql_type: &'static str,
    pub role: Role,
    /// Percentage of NULL values.
    pub null_pct: u32,
}

#[derive(Clone, Debug)]
pub struct Config {
    /// Short name for the database, the RNG stream and messages.
    pub label: &'static str,
    pub stream: u64,
    pub schema: &'static str,
    pub table: &'static str,
    pub pipeline: &'static str,
    pub columns: Vec<Column>,
    /// Key columns in the order of the pipeline's key array.
    pub keys: Vec<&'static str>,
    pub window: i64,
    pub window_sql: &'static str,
    pub lateness: i64,
    pub lateness_sql: &'static str,
    /// `None` for the default origin, the Unix epoch.
    pub origin: Option<&'static str>,
    pub aggregates: &'static str,
    /// The names the aggregates list gives, as the views spell them.
    pub aliases: Vec<&'static str>,
    pub steps: usize,
    /// Where event time starts, before the first watermark.
    pub start: i64,
}

impl Config {
    pub fn source(&self) -> String {
        format!("{}.{}", quote_ident(self.schema), quote_ident(self.table))
    }

    pub fn view(&self, suffix: &str) -> String {
        format!(
            "{}.{}",
            quote_ident(self.schema),
            quote_ident(&format!("{}{suffix}", self.pipeline))
        )
    }

    pub fn column_index(&self, name: &str) -> usize {
        self.columns
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    }

    pub fn event_time(&self) -> usize {
        self.columns
            .iter()
            .position(|c| matches!(c.role, Role::EventTime))
            .expect("an event time column")
    }

    pub fn event_id(&self) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| matches!(c.role, Role::EventId { .. }))
    }

    pub fn key_indexes(&self) -> Vec<usize> {
        self.keys.iter().map(|k| self.column_index(k)).collect()
    }

    pub fn origin_us(&self) -> i64 {
        self.origin
            .map(|o| utc(o.trim_end_matches("+00")))
            .unwrap_or(0)
    }
}

fn col(name: &'static str, sql_type: &'static str, role: Role, null_pct: u32) -> Column {
    Column {
        name,
        sql_type,
        role,
        null_pct,
    }
}

/// (a) Two keys with NULLs, a bigint event id, an hour's window with two hours of grace, and
/// every aggregate function over numeric and text.
pub fn keyed_hourly() -> Config {
    Config {
        label: "keyed_hourly",
        stream: 1,
        schema: "public",
        table: "sales",
        pipeline: "sales_hourly",
        columns: vec![
            col("id", "bigint", Role::EventId { text_prefix: None }, 4),
            col(
                "store",
                "text",
                Role::Key(&["north", "south", "east", "west"]),
                10,
            ),
            col("region", "text", Role::Key(&["eu", "us", "apac"]), 10),
            col("amount", "numeric", Role::Amount, 10),
            col("note", "text", Role::Note, 35),
            col("occurred_at", "timestamptz", Role::EventTime, 0),
        ],
        keys: vec!["store", "region"],
        window: HOUR,
        window_sql: "1 hour",
        lateness: 2 * HOUR,
        lateness_sql: "2 hours",
        origin: None,
        aggregates: "count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi, \
                     avg(amount) AS mean, count(note) AS notes",
        aliases: vec!["n", "total", "lo", "hi", "mean", "notes"],
        steps: 130,
        start: utc("2026-03-01 00:00"),
    }
}

/// (b) No keys, no event id, no lateness: every row behind the window end is refused.
pub fn unkeyed_quarter_hour() -> Config {
    Config {
        label: "unkeyed_quarter_hour",
        stream: 2,
        schema: "public",
        table: "ticks",
        pipeline: "ticks_15m",
        columns: vec![
            col("at", "timestamptz", Role::EventTime, 0),
            col("qty", "integer", Role::Qty, 5),
        ],
        keys: vec![],
        window: 15 * MINUTE,
        window_sql: "15 minutes",
        lateness: 0,
        lateness_sql: "0",
        origin: None,
        aggregates: "count(*) AS n, sum(qty) AS total",
        aliases: vec!["n", "total"],
        steps: 130,
        start: utc("2026-03-01 00:00"),
    }
}

/// (c) Names that need quoting everywhere: schema, table, columns, pipeline and aggregate
/// aliases; a text event id; daily windows aligned at 06:00 with a day of grace.
pub fn quoted_daily() -> Config {
    Config {
        label: "quoted_daily",
        stream: 3,
        schema: "Shop Floor",
        table: "Order Events",
        pipeline: "Daily Orders",
        columns: vec![
            col("Order Id", "text", Role::EventId { text_prefix: Some("ord-") }, 5),
            col("Store Name", "text", Role::Key(&["Zürich HQ", "O'Brien & Sons", "store \"7\"", "back\\slash", "tab\there"]), 10),
            col("Event Time", "timestamptz", Role::EventTime, 0),
            col("Amount €", "numeric", Role::Amount, 5),
        ],
        keys: vec!["Store Name"],
        window: DAY,
        window_sql: "1 day",
        lateness: DAY,
        lateness_sql: "1 day",
        origin: Some("2026-01-01 06:00+00"),
        aggregates: "count(*) AS \"Orders\", sum(\"Amount €\") AS \"Revenue €\", avg(\"Amount €\") AS \"Mean €\", \
                     min(\"Amount €\") AS lo",
        aliases: vec!["Orders", "Revenue €", "Mean €", "lo"],
        steps: 110,
        start: utc("2026-01-01 06:00"),
    }
}
