//! The pipeline configurations the property test drives, each on its own source table.

use crate::values::{quote_ident, quote_literal, utc, DAY, HOUR, INFINITY, MINUTE};
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
    /// A `double precision` payload: multiples of 1/8, so that any order of adding them gives
    /// the same sum, as it does for PostgreSQL's GROUP BY.
    Float,
    /// An `interval` payload with months, days and seconds.
    Span,
    /// A `timestamptz` payload other than the event time.
    Stamp,
    /// A `boolean` payload.
    Flag,
}

#[derive(Clone, Debug)]
pub struct Column {
    pub name: &'static str,
    pub sql_type: &'static str,
    pub role: Role,
    /// Percentage of NULL values.
    pub null_pct: u32,
}

/// A pipeline the property test drives, on its own source table: what runs of every kind of
/// window share, and in `windows` what its kind adds (`Windows` for tumbling, hopping and
/// calendar windows, driven by `scenario`; `Sessions` for session windows, driven by `sessions`).
#[derive(Clone, Debug)]
pub struct Config<W = Windows> {
    /// Short name for the database, the RNG stream and messages.
    pub label: &'static str,
    pub stream: u64,
    pub schema: &'static str,
    pub table: &'static str,
    pub pipeline: &'static str,
    pub columns: Vec<Column>,
    /// Key columns in the order of the pipeline's key array.
    pub keys: Vec<&'static str>,
    pub windows: W,
    pub lateness: i64,
    pub lateness_sql: &'static str,
    /// How far a random watermark advance goes, at most one and a half times this.
    pub advance: i64,
    pub aggregates: &'static str,
    /// The names the aggregates list gives, as the views spell them.
    pub aliases: Vec<&'static str>,
    /// How some aliases are compared, `{}` standing for the quoted alias: floating-point
    /// results whose rounding depends on the order partials combine in, as in PostgreSQL's own
    /// parallel aggregation (`round({}::numeric, 6)`), and arrays collected in no particular
    /// order (`sorted({})`). Every other alias is compared as its exact text.
    pub compare: &'static [(&'static str, &'static str)],
    /// Extensions the aggregates need, made in schema `public` before the source table.
    pub extensions: &'static [&'static str],
    /// Percentiles whose value depends on the order partials combine in beyond rounding (a
    /// t-digest's): the alias, the column it is a percentile of, the fraction and the error in
    /// rank it must stay within (besides one value's share, `1 / n`). Compared as `{} IS NULL`
    /// with GROUP BY's, and by `check_within` (tumbling, hopping and calendar windows) with the
    /// window's rows.
    pub within: &'static [(&'static str, &'static str, f64, f64)],
    pub steps: usize,
    /// Where event time starts, before the first watermark.
    pub start: i64,
}

/// Tumbling, hopping and calendar windows (SPEC §7).
#[derive(Clone, Debug)]
pub struct Windows {
    /// The model's windows, the same as `size_sql`, `slide_sql` and `origin` say.
    pub spec: WindowSpec,
    /// `window_size`.
    pub size_sql: &'static str,
    /// `window_slide`, for hopping windows.
    pub slide_sql: Option<&'static str>,
    /// `cumulate_step`, for cumulate windows.
    pub step_sql: Option<&'static str>,
    /// What `eventtime.pipelines.time_zone` shows: the zone of a calendar size (the default,
    /// UTC, as the model knows no other), NULL for a fixed size.
    pub time_zone: Option<&'static str>,
    /// `None` for the default origin, the Unix epoch.
    pub origin: Option<&'static str>,
    /// `max_ahead => NULL`: a run over years of event time must not depend on the wall clock.
    pub unbounded_ahead: bool,
    /// Numeric columns `eventtime.lateness` is asked about, and whether the pipeline has a
    /// `sum` or `avg` of each (without one, the refused value has no share).
    pub values: Vec<(&'static str, bool)>,
}

/// Session windows (SPEC §7 and the session contract): `session_gap` instead of a window size.
#[derive(Clone, Debug)]
pub struct Sessions {
    /// The gap in microseconds, and as `create_pipeline` is given it.
    pub gap: i64,
    pub gap_sql: &'static str,
}

/// A session pipeline; `sessions` drives it against `session_model`.
pub type SessionConfig = Config<Sessions>;

impl<W> Config<W> {
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

    /// Event time advances with the watermark; before the first one, it starts at `start`.
    pub fn now(&self, watermark: Option<i64>) -> i64 {
        match watermark {
            Some(w) if w != INFINITY => w,
            _ => self.start,
        }
    }

    /// The source table's columns, quoted, in order.
    pub fn column_list(&self) -> String {
        self.columns
            .iter()
            .map(|c| quote_ident(c.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `"k1"::text, "k2"::text, ` or nothing, to put before other columns.
    pub fn keys_text(&self) -> String {
        self.keys
            .iter()
            .map(|k| format!("{}::text, ", quote_ident(k)))
            .collect()
    }

    /// `"k1", "k2", ` or nothing, to put before other columns.
    pub fn keys_plain(&self) -> String {
        self.keys
            .iter()
            .map(|k| format!("{}, ", quote_ident(k)))
            .collect()
    }

    /// The aggregates' aliases, each cast to text.
    pub fn aliases_text(&self) -> String {
        self.aliases
            .iter()
            .map(|a| match self.compare.iter().find(|(c, _)| c == a) {
                Some((_, how)) => format!("({})::text", how.replace("{}", &quote_ident(a))),
                None => format!("{}::text", quote_ident(a)),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The schema (unless `public`) and the source table.
    pub fn create_source_sql(&self) -> String {
        let defs = self
            .columns
            .iter()
            .map(|c| format!("{} {}", quote_ident(c.name), c.sql_type))
            .collect::<Vec<_>>();
        let mut sql: String = self
            .extensions
            .iter()
            .map(|e| format!("CREATE EXTENSION {} SCHEMA public;\n", quote_ident(e)))
            .collect();
        if self.schema != "public" {
            sql += &format!("CREATE SCHEMA {};\n", quote_ident(self.schema));
        }
        sql + &format!("CREATE TABLE {} ({});\n", self.source(), defs.join(", "))
    }

    /// The `create_pipeline` call of this pipeline: `windows` are the arguments that give its
    /// windows, `options` more arguments after the aggregates, each after a comma.
    pub fn create_pipeline_sql(&self, windows: &str, options: &str) -> String {
        let keys = self
            .keys
            .iter()
            .map(|k| quote_literal(k))
            .collect::<Vec<_>>()
            .join(", ");
        let event_id = match self.event_id() {
            Some(i) => quote_literal(self.columns[i].name),
            None => "NULL".into(),
        };
        format!(
            "SELECT eventtime.create_pipeline(name => {}, source => {}, event_time => {}, key => ARRAY[{keys}]::text[], \
             event_id => {event_id}, {windows}, allowed_lateness => interval {}, aggregates => {}{options});",
            quote_literal(self.pipeline),
            quote_literal(&self.source()),
            quote_literal(self.columns[self.event_time()].name),
            quote_literal(self.lateness_sql),
            quote_literal(self.aggregates),
        )
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
        windows: Windows {
            spec: WindowSpec::tumbling(HOUR, 0),
            size_sql: "1 hour",
            slide_sql: None,
            step_sql: None,
            time_zone: None,
            origin: None,
            unbounded_ahead: false,
            values: vec![("amount", true), ("id", false)],
        },
        lateness: 2 * HOUR,
        lateness_sql: "2 hours",
        advance: HOUR,
        aggregates: "count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi, \
                     avg(amount) AS mean, count(note) AS notes",
        aliases: vec!["n", "total", "lo", "hi", "mean", "notes"],
        compare: &[],
        extensions: &[],
        within: &[],
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
        windows: Windows {
            spec: WindowSpec::tumbling(15 * MINUTE, 0),
            size_sql: "15 minutes",
            slide_sql: None,
            step_sql: None,
            time_zone: None,
            origin: None,
            unbounded_ahead: false,
            values: vec![("qty", true)],
        },
        lateness: 0,
        lateness_sql: "0",
        advance: 15 * MINUTE,
        aggregates: "count(*) AS n, sum(qty) AS total",
        aliases: vec!["n", "total"],
        compare: &[],
        extensions: &[],
        within: &[],
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
        windows: Windows {
            spec: WindowSpec::tumbling(DAY, utc("2026-01-01 06:00")),
            size_sql: "1 day",
            slide_sql: None,
            step_sql: None,
            time_zone: Some("UTC"),
            origin: Some("2026-01-01 06:00+00"),
            unbounded_ahead: false,
            values: vec![("Amount €", true)],
        },
        lateness: DAY,
        lateness_sql: "1 day",
        advance: DAY,
        aggregates: "count(*) AS \"Orders\", sum(\"Amount €\") AS \"Revenue €\", avg(\"Amount €\") AS \"Mean €\", \
                     min(\"Amount €\") AS lo",
        aliases: vec!["Orders", "Revenue €", "Mean €", "lo"],
        compare: &[],
        extensions: &[],
        within: &[],
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
        windows: Windows {
            spec: WindowSpec::hopping(3 * HOUR, HOUR, utc("2026-04-01 00:20")),
            size_sql: "3 hours",
            slide_sql: Some("1 hour"),
            step_sql: None,
            time_zone: None,
            origin: Some("2026-04-01 00:20+00"),
            unbounded_ahead: false,
            values: vec![("amount", true), ("id", false)],
        },
        lateness: 2 * HOUR,
        lateness_sql: "2 hours",
        advance: HOUR,
        aggregates:
            "count(*) AS n, sum(amount) AS total, max(amount) AS hi, count(amount) AS priced",
        aliases: vec!["n", "total", "hi", "priced"],
        compare: &[],
        extensions: &[],
        within: &[],
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
        windows: Windows {
            spec: WindowSpec::months(1, 1, 0),
            size_sql: "1 month",
            slide_sql: None,
            step_sql: None,
            time_zone: Some("UTC"),
            origin: None,
            unbounded_ahead: true,
            values: vec![("amount", true), ("qty", true)],
        },
        lateness: 3 * DAY,
        lateness_sql: "3 days",
        advance: 4 * DAY,
        aggregates:
            "count(*) AS n, sum(amount) AS total, avg(qty) AS mean_qty, min(amount) AS lo, \
                     sum(amount * qty) FILTER (WHERE qty > 2) AS big_revenue, \
                     count(*) FILTER (WHERE amount IS NULL OR amount < 10) AS small, \
                     count(DISTINCT qty) FILTER (WHERE amount > 10) AS qtys, \
                     percentile_disc(0.5) WITHIN GROUP (ORDER BY amount DESC) AS med, \
                     mode() WITHIN GROUP (ORDER BY qty) AS common_qty, \
                     stddev(amount) AS sd_amount, variance(qty) FILTER (WHERE amount > 10) AS var_qty",
        aliases: vec![
            "n",
            "total",
            "mean_qty",
            "lo",
            "big_revenue",
            "small",
            "qtys",
            "med",
            "common_qty",
            "sd_amount",
            "var_qty",
        ],
        compare: &[],
        extensions: &[],
        within: &[],
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
        windows: Windows {
            spec: WindowSpec::months(3, 1, utc("2024-01-15 06:00")),
            size_sql: "3 months",
            slide_sql: Some("1 month"),
            step_sql: None,
            time_zone: Some("UTC"),
            origin: Some("2024-01-15 06:00+00"),
            unbounded_ahead: true,
            values: vec![("qty", true)],
        },
        lateness: 10 * DAY,
        lateness_sql: "10 days",
        advance: 8 * DAY,
        aggregates: "count(*) AS n, sum(qty) AS total, max(qty) AS hi",
        aliases: vec!["n", "total", "hi"],
        compare: &[],
        extensions: &[],
        within: &[],
        steps: 70,
        start: utc("2023-06-01 00:00"),
    }
}

/// (i) Cumulate windows (SPEC §7): a calendar day in UTC by four hours, each row in up to six
/// windows that share their start, fired at their own ends and often late in the short ones
/// while open in the long ones; six hours of grace, a text event id deduplicated per window
/// (start and end), and a key with NULLs.
pub fn cumulate_daily() -> Config {
    Config {
        label: "cumulate_daily",
        stream: 9,
        schema: "public",
        table: "sales",
        pipeline: "sales_so_far",
        columns: vec![
            col(
                "sale",
                "text",
                Role::EventId {
                    text_prefix: Some("s-"),
                },
                3,
            ),
            col("store", "text", Role::Key(&["north", "south"]), 10),
            col("sold_at", "timestamptz", Role::EventTime, 0),
            col("amount", "numeric", Role::Amount, 10),
            col("qty", "integer", Role::Qty, 5),
        ],
        keys: vec!["store"],
        windows: Windows {
            spec: WindowSpec::cumulate(DAY, 4 * HOUR, 0),
            size_sql: "1 day",
            slide_sql: None,
            step_sql: Some("4 hours"),
            time_zone: Some("UTC"),
            origin: None,
            unbounded_ahead: false,
            values: vec![("amount", true), ("qty", true)],
        },
        lateness: 6 * HOUR,
        lateness_sql: "6 hours",
        advance: 3 * HOUR,
        aggregates:
            "count(*) AS n, sum(amount) AS revenue, avg(qty) AS mean_qty, max(amount) AS hi, \
             bit_or(qty) AS qty_bits, array_agg(DISTINCT qty) AS qtys, \
             stddev_samp(qty::bigint * 3) AS sd_qty",
        aliases: vec![
            "n", "revenue", "mean_qty", "hi", "qty_bits", "qtys", "sd_qty",
        ],
        compare: &[],
        extensions: &[],
        within: &[],
        steps: 70,
        start: utc("2026-03-27 00:00"),
    }
}

/// (g) Sessions of visits per user, NULL user included: a 20-minute gap, 30 minutes of grace and
/// a watermark that moves by about a quarter of an hour, so that late rows join, extend and
/// bridge sessions that fired; a bigint event id, deduplicated per user for the pipeline's life.
pub fn sessions_per_user() -> SessionConfig {
    Config {
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
        windows: Sessions {
            gap: 20 * MINUTE,
            gap_sql: "20 minutes",
        },
        lateness: 30 * MINUTE,
        lateness_sql: "30 minutes",
        advance: 15 * MINUTE,
        aggregates: "count(*) AS clicks, sum(amount) AS total, avg(amount) AS mean, \
                     max(amount) AS hi, count(note) AS notes, \
                     max(length(note)) FILTER (WHERE amount > 20) AS longest, \
                     sum(CASE WHEN note IS NULL THEN 1 ELSE 0 END) AS bare, \
                     count(DISTINCT note) AS kinds, bool_or(amount > 40) AS big, \
                     percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) AS p50, \
                     var_pop(amount) AS vp",
        aliases: vec![
            "clicks", "total", "mean", "hi", "notes", "longest", "bare", "kinds", "big", "p50",
            "vp",
        ],
        compare: &[],
        extensions: &[],
        within: &[],
        steps: 90,
        start: utc("2026-05-01 08:00"),
    }
}

/// (h) One unkeyed session stream without event ids, names that need quoting, and a gap given
/// in days (a day counts as 24 hours), with half a day of grace.
pub fn sessions_unkeyed_daily() -> SessionConfig {
    Config {
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
        windows: Sessions {
            gap: DAY,
            gap_sql: "1 day",
        },
        lateness: 12 * HOUR,
        lateness_sql: "12 hours",
        advance: 18 * HOUR,
        aggregates: "count(*) AS \"Views\", sum(\"Qty\") AS \"Total Qty\", min(\"Qty\") AS lo",
        aliases: vec!["Views", "Total Qty", "lo"],
        compare: &[],
        extensions: &[],
        within: &[],
        steps: 50,
        start: utc("2026-05-01 00:00"),
    }
}

/// The aggregates of the matrix configurations, over every kind of argument: `double
/// precision` (sums of multiples of 1/8, exact in any order; moments, correlation and slope,
/// rounded, as PostgreSQL's partial aggregation rounds them in its own order), `interval`,
/// `timestamptz`, `boolean`, integers, `numeric` (a user's aggregate of an `internal` state
/// among them), text, NULLs in every column, `FILTER`, `DISTINCT`, ordered-set and collecting
/// aggregates.
const MATRIX_AGGREGATES: &str = "count(*) AS n, sum(f) AS f_sum, avg(f) AS f_avg, \
     max(f) FILTER (WHERE ok) AS f_hi, stddev(f) AS f_sd, corr(f, qty) AS f_corr, \
     regr_slope(f, qty) AS f_slope, sum(d) AS d_sum, avg(d) AS d_avg, max(d) AS d_hi, \
     min(seen) AS seen_lo, max(seen) FILTER (WHERE qty > 10) AS seen_hi, \
     percentile_disc(0.5) WITHIN GROUP (ORDER BY seen) AS seen_med, bool_and(ok) AS all_ok, \
     bool_or(ok AND qty > 50) AS any_big, count(*) FILTER (WHERE NOT ok) AS not_ok, \
     bit_and(qty) AS q_and, sum(qty::bigint * qty) AS q_sq, public.nvar(amount) AS a_nvar, \
     stddev_pop(qty) AS q_sdp, sum(amount) AS total, min(note) AS note_lo, \
     count(DISTINCT note) AS notes, array_agg(qty) AS qtys, jsonb_agg(ok) AS oks, \
     percentile_cont(0.25) WITHIN GROUP (ORDER BY d) AS d_q1";

const MATRIX_ALIASES: [&str; 26] = [
    "n", "f_sum", "f_avg", "f_hi", "f_sd", "f_corr", "f_slope", "d_sum", "d_avg", "d_hi",
    "seen_lo", "seen_hi", "seen_med", "all_ok", "any_big", "not_ok", "q_and", "q_sq", "a_nvar",
    "q_sdp", "total", "note_lo", "notes", "qtys", "oks", "d_q1",
];

const MATRIX_COMPARE: &[(&str, &str)] = &[
    ("f_sd", "round({}::numeric, 6)"),
    ("f_corr", "round({}::numeric, 6)"),
    ("f_slope", "round({}::numeric, 6)"),
    ("qtys", "sorted({})"),
    ("oks", "sorted({})"),
];

fn matrix_columns() -> Vec<Column> {
    vec![
        col("id", "bigint", Role::EventId { text_prefix: None }, 3),
        col("dev", "text", Role::Key(&["a", "b"]), 10),
        col("at", "timestamptz", Role::EventTime, 0),
        col("amount", "numeric", Role::Amount, 10),
        col("qty", "integer", Role::Qty, 8),
        col("f", "double precision", Role::Float, 10),
        col("d", "interval", Role::Span, 10),
        col("seen", "timestamptz", Role::Stamp, 10),
        col("ok", "boolean", Role::Flag, 10),
        col("note", "text", Role::Note, 20),
    ]
}

/// A configuration of the matrix's source table, `probes`, with the matrix's aggregates.
fn matrix<W>(
    label: &'static str,
    stream: u64,
    pipeline: &'static str,
    windows: W,
    (lateness, lateness_sql): (i64, &'static str),
    advance: i64,
) -> Config<W> {
    Config {
        label,
        stream,
        schema: "public",
        table: "probes",
        pipeline,
        columns: matrix_columns(),
        keys: vec!["dev"],
        windows,
        lateness,
        lateness_sql,
        advance,
        aggregates: MATRIX_AGGREGATES,
        aliases: MATRIX_ALIASES.to_vec(),
        compare: MATRIX_COMPARE,
        extensions: &[],
        within: &[],
        steps: 60,
        start: utc("2026-06-01 00:00"),
    }
}

/// Windows of a fixed size from the Unix epoch, `slide_sql` for hopping ones, and the lateness
/// account asked about `amount`.
fn fixed(spec: WindowSpec, size_sql: &'static str, slide_sql: Option<&'static str>) -> Windows {
    Windows {
        spec,
        size_sql,
        slide_sql,
        step_sql: None,
        time_zone: None,
        origin: None,
        unbounded_ahead: false,
        values: vec![("amount", true)],
    }
}

/// (j) The aggregate matrix in hopping windows (two hours every hour, so each row is in two
/// windows), a bigint event id and a key with NULLs, an hour of grace.
pub fn matrix_hopping() -> Config {
    matrix(
        "matrix_hopping",
        17,
        "probe_stats",
        fixed(
            WindowSpec::hopping(2 * HOUR, HOUR, 0),
            "2 hours",
            Some("1 hour"),
        ),
        (HOUR, "1 hour"),
        40 * MINUTE,
    )
}

/// (k) The aggregate matrix in sessions with a 30-minute gap and 45 minutes of grace, so that
/// late rows merge fired sessions.
pub fn matrix_sessions() -> SessionConfig {
    matrix(
        "matrix_sessions",
        18,
        "probe_sessions",
        Sessions {
            gap: 30 * MINUTE,
            gap_sql: "30 minutes",
        },
        (45 * MINUTE, "45 minutes"),
        20 * MINUTE,
    )
}

/// (l) The two aggregates of sketches Debian packages for PostgreSQL 15 (`postgresql-15-hll`,
/// `postgresql-15-tdigest`), in tumbling half-hours: `hll_add_agg`, whose union is exact
/// register by register (its cardinality equals GROUP BY's), and `tdigest_percentile`, whose
/// result depends on the order digests combine in: compared with the window's rows, its rank
/// among them within 5% (and one row's share) of the percentile's fraction, as a digest's error
/// is stated in rank. A window's digest is combined from one per statement, which costs it
/// accuracy: 4.4% was seen at the median of 217 values, where GROUP BY's one digest was 1.6% off.
pub fn sketches() -> Config {
    Config {
        aggregates: "count(*) AS n, sum(amount) AS total, \
                     public.hll_add_agg(public.hll_hash_integer(qty)) AS qty_hll, \
                     public.hll_add_agg(public.hll_hash_text(note)) AS note_hll, \
                     public.tdigest_percentile(f, 100, 0.5) AS f_p50, \
                     public.tdigest_percentile(f, 100, 0.9) AS f_p90",
        aliases: vec!["n", "total", "qty_hll", "note_hll", "f_p50", "f_p90"],
        compare: &[
            ("qty_hll", "hll_cardinality({})"),
            ("note_hll", "hll_cardinality({})"),
            ("f_p50", "{} IS NULL"),
            ("f_p90", "{} IS NULL"),
        ],
        extensions: &["hll", "tdigest"],
        within: &[("f_p50", "f", 0.5, 0.05), ("f_p90", "f", 0.9, 0.05)],
        steps: 50,
        ..matrix(
            "sketches",
            19,
            "probe_sketches",
            fixed(WindowSpec::tumbling(30 * MINUTE, 0), "30 minutes", None),
            (HOUR, "1 hour"),
            20 * MINUTE,
        )
    }
}
