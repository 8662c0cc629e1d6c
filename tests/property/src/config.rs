//! The pipeline configurations the property test drives, each on its own source table.

use crate::values::{quote_ident, utc, DAY, HOUR, MINUTE};
use crate::windows::WindowSpec;

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
    /// The model's windows, the same as `window_sql`, `slide_sql` and `origin` say.
    pub windows: WindowSpec,
    pub window_sql: &'static str,
    /// `window_slide`, for hopping windows.
    pub slide_sql: Option<&'static str>,
    /// What `eventtime.pipelines.time_zone` shows: the zone of a calendar size (the default,
    /// UTC, as the model knows no other), NULL for a fixed size.
    pub time_zone: Option<&'static str>,
    pub lateness: i64,
    pub lateness_sql: &'static str,
    /// `None` for the default origin, the Unix epoch.
    pub origin: Option<&'static str>,
    /// `max_ahead => NULL`: a run over years of event time must not depend on the wall clock.
    pub unbounded_ahead: bool,
    /// How far a random watermark advance goes, at most one and a half times this.
    pub advance: i64,
    pub aggregates: &'static str,
    /// The names the aggregates list gives, as the views spell them.
    pub aliases: Vec<&'static str>,
    /// Numeric columns `eventtime.lateness` is asked about, and whether the pipeline has a
    /// `sum` or `avg` of each (without one, the refused value has no share).
    pub values: Vec<(&'static str, bool)>,
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
        windows: WindowSpec::tumbling(HOUR, 0),
        window_sql: "1 hour",
        slide_sql: None,
        time_zone: None,
        lateness: 2 * HOUR,
        lateness_sql: "2 hours",
        origin: None,
        unbounded_ahead: false,
        advance: HOUR,
        aggregates: "count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi, \
                     avg(amount) AS mean, count(note) AS notes",
        aliases: vec!["n", "total", "lo", "hi", "mean", "notes"],
        values: vec![("amount", true), ("id", false)],
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
        windows: WindowSpec::tumbling(15 * MINUTE, 0),
        window_sql: "15 minutes",
        slide_sql: None,
        time_zone: None,
        lateness: 0,
        lateness_sql: "0",
        origin: None,
        unbounded_ahead: false,
        advance: 15 * MINUTE,
        aggregates: "count(*) AS n, sum(qty) AS total",
        aliases: vec!["n", "total"],
        values: vec![("qty", true)],
        steps: 130,
        start: utc("2026-03-01 00:00"),
    }
}

/// (c) Names that need quoting everywhere: schema, table, columns, pipeline and aggregate
/// aliases; a text event id; daily windows aligned at 06:00 with a day of grace. `'1 day'` is a
/// calendar period (SPEC §7), in UTC 24 hours from local midnight, here moved to 06:00.
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
        windows: WindowSpec::tumbling(DAY, utc("2026-01-01 06:00")),
        window_sql: "1 day",
        slide_sql: None,
        time_zone: Some("UTC"),
        lateness: DAY,
        lateness_sql: "1 day",
        origin: Some("2026-01-01 06:00+00"),
        unbounded_ahead: false,
        advance: DAY,
        aggregates: "count(*) AS \"Orders\", sum(\"Amount €\") AS \"Revenue €\", avg(\"Amount €\") AS \"Mean €\", \
                     min(\"Amount €\") AS lo",
        aliases: vec!["Orders", "Revenue €", "Mean €", "lo"],
        values: vec![("Amount €", true)],
        steps: 110,
        start: utc("2026-01-01 06:00"),
    }
}

/// (d) Hopping windows of fixed durations (SPEC §7): three hours every hour, on a grid shifted
/// to 20 past the hour, so that each row lands in three windows, often open in one, late in
/// another and refused in a third; a bigint event id deduplicated per window, and a key.
pub fn hopping_3h() -> Config {
    Config {
        label: "hopping_3h",
        stream: 6,
        schema: "public",
        table: "clicks",
        pipeline: "clicks_3h",
        columns: vec![
            col("id", "bigint", Role::EventId { text_prefix: None }, 3),
            col("page", "text", Role::Key(&["home", "cart", "checkout"]), 8),
            col("amount", "numeric", Role::Amount, 10),
            col("at", "timestamptz", Role::EventTime, 0),
        ],
        keys: vec!["page"],
        windows: WindowSpec::hopping(3 * HOUR, HOUR, utc("2026-04-01 00:20")),
        window_sql: "3 hours",
        slide_sql: Some("1 hour"),
        time_zone: None,
        lateness: 2 * HOUR,
        lateness_sql: "2 hours",
        origin: Some("2026-04-01 00:20+00"),
        unbounded_ahead: false,
        advance: HOUR,
        aggregates:
            "count(*) AS n, sum(amount) AS total, max(amount) AS hi, count(amount) AS priced",
        aliases: vec!["n", "total", "hi", "priced"],
        values: vec![("amount", true), ("id", false)],
        steps: 80,
        start: utc("2026-04-01 00:00"),
    }
}

/// (e) Calendar months in UTC (SPEC §7): each window from the 1st to the 1st, whatever the
/// month's length (February of a leap year included), three days of grace, and a watermark
/// that moves by days. A text event id and a key.
pub fn calendar_monthly() -> Config {
    Config {
        label: "calendar_monthly",
        stream: 7,
        schema: "public",
        table: "invoices",
        pipeline: "invoices_monthly",
        columns: vec![
            col(
                "customer",
                "text",
                Role::Key(&["acme", "globex", "initech"]),
                5,
            ),
            col(
                "invoice",
                "text",
                Role::EventId {
                    text_prefix: Some("inv-"),
                },
                3,
            ),
            col("billed_at", "timestamptz", Role::EventTime, 0),
            col("amount", "numeric", Role::Amount, 5),
            col("qty", "integer", Role::Qty, 5),
        ],
        keys: vec!["customer"],
        windows: WindowSpec::months(1, 1, 0),
        window_sql: "1 month",
        slide_sql: None,
        time_zone: Some("UTC"),
        lateness: 3 * DAY,
        lateness_sql: "3 days",
        origin: None,
        unbounded_ahead: true,
        advance: 4 * DAY,
        aggregates: "count(*) AS n, sum(amount) AS total, avg(qty) AS mean_qty, min(amount) AS lo",
        aliases: vec!["n", "total", "mean_qty", "lo"],
        values: vec![("amount", true), ("qty", true)],
        steps: 80,
        start: utc("2023-11-01 00:00"),
    }
}

/// (f) Hopping calendar windows: three months every month, on a grid moved to the 15th at
/// 06:00 by `window_origin`, so every row is in three windows; ten days of grace. No event id
/// and no key: nothing is a duplicate, and one group per window.
pub fn calendar_hopping() -> Config {
    Config {
        label: "calendar_hopping",
        stream: 8,
        schema: "public",
        table: "readings",
        pipeline: "readings_3m",
        columns: vec![
            col("at", "timestamptz", Role::EventTime, 0),
            col("qty", "integer", Role::Qty, 5),
        ],
        keys: vec![],
        windows: WindowSpec::months(3, 1, utc("2024-01-15 06:00")),
        window_sql: "3 months",
        slide_sql: Some("1 month"),
        time_zone: Some("UTC"),
        lateness: 10 * DAY,
        lateness_sql: "10 days",
        origin: Some("2024-01-15 06:00+00"),
        unbounded_ahead: true,
        advance: 8 * DAY,
        aggregates: "count(*) AS n, sum(qty) AS total, max(qty) AS hi",
        aliases: vec!["n", "total", "hi"],
        values: vec![("qty", true)],
        steps: 70,
        start: utc("2023-06-01 00:00"),
    }
}

/// A session pipeline (SPEC §7 and the session contract): `session_gap` instead of a window
/// size. The columns play the roles of `Config`'s; `sessions` drives it against `session_model`.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    pub label: &'static str,
    pub stream: u64,
    pub schema: &'static str,
    pub table: &'static str,
    pub pipeline: &'static str,
    pub columns: Vec<Column>,
    pub keys: Vec<&'static str>,
    /// The gap in microseconds, and as `create_pipeline` is given it.
    pub gap: i64,
    pub gap_sql: &'static str,
    pub lateness: i64,
    pub lateness_sql: &'static str,
    /// How far a random watermark advance goes, at most one and a half times this.
    pub advance: i64,
    pub aggregates: &'static str,
    pub aliases: Vec<&'static str>,
    pub steps: usize,
    pub start: i64,
}

impl SessionConfig {
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

    fn position(&self, pred: impl Fn(&Column) -> bool) -> Option<usize> {
        self.columns.iter().position(pred)
    }

    pub fn event_time(&self) -> usize {
        self.position(|c| matches!(c.role, Role::EventTime))
            .expect("an event time column")
    }

    pub fn event_id(&self) -> Option<usize> {
        self.position(|c| matches!(c.role, Role::EventId { .. }))
    }

    pub fn key_indexes(&self) -> Vec<usize> {
        self.keys
            .iter()
            .map(|k| {
                self.position(|c| c.name == *k)
                    .unwrap_or_else(|| panic!("no column {k}"))
            })
            .collect()
    }
}

/// (g) Sessions of visits per user, NULL user included: a 20-minute gap, 30 minutes of grace and
/// a watermark that moves by about a quarter of an hour, so that late rows join, extend and
/// bridge sessions that fired; a bigint event id, deduplicated per user for the pipeline's life.
pub fn sessions_per_user() -> SessionConfig {
    SessionConfig {
        label: "sessions_per_user",
        stream: 13,
        schema: "public",
        table: "visits",
        pipeline: "visit_sessions",
        columns: vec![
            col("click_id", "bigint", Role::EventId { text_prefix: None }, 3),
            col("user_id", "text", Role::Key(&["ada", "bob", "cyd"]), 15),
            col("amount", "numeric", Role::Amount, 10),
            col("at", "timestamptz", Role::EventTime, 0),
            col("note", "text", Role::Note, 30),
        ],
        keys: vec!["user_id"],
        gap: 20 * MINUTE,
        gap_sql: "20 minutes",
        lateness: 30 * MINUTE,
        lateness_sql: "30 minutes",
        advance: 15 * MINUTE,
        aggregates: "count(*) AS clicks, sum(amount) AS total, avg(amount) AS mean, \
                     max(amount) AS hi, count(note) AS notes",
        aliases: vec!["clicks", "total", "mean", "hi", "notes"],
        steps: 90,
        start: utc("2026-05-01 08:00"),
    }
}

/// (h) One unkeyed session stream without event ids, names that need quoting, and a gap given
/// in days (a day counts as 24 hours), with half a day of grace.
pub fn sessions_unkeyed_daily() -> SessionConfig {
    SessionConfig {
        label: "sessions_unkeyed_daily",
        stream: 14,
        schema: "Web Logs",
        table: "Page Views",
        pipeline: "Visits By Day",
        columns: vec![
            col("Seen At", "timestamptz", Role::EventTime, 0),
            col("Qty", "integer", Role::Qty, 5),
        ],
        keys: vec![],
        gap: DAY,
        gap_sql: "1 day",
        lateness: 12 * HOUR,
        lateness_sql: "12 hours",
        advance: 18 * HOUR,
        aggregates: "count(*) AS \"Views\", sum(\"Qty\") AS \"Total Qty\", min(\"Qty\") AS lo",
        aliases: vec!["Views", "Total Qty", "lo"],
        steps: 50,
        start: utc("2026-05-01 00:00"),
    }
}
