//! The SQL each pipeline runs, generated from its definition. One pipeline owns four tables in
//! the internal schema (window state, event-id ledger, history, refused rows), one trigger
//! function on its source table and four views beside the source table. Every statement here is
//! set-based: the ingest statement handles a whole transition table, the advance statements a
//! whole range of windows.
//!
//! Names are always quoted with [`quote_ident`]; values reach the SQL as numbers formatted here or
//! as parameters, never as user text.
//!
//! One file per concern: `ddl` (tables, trigger, views, hand-over, drop), `ingest` (the ingest
//! statements), `trigger` (the trigger function around them), `firing` (fire and purge). The
//! algebra of each aggregate (state columns, partials, merges, published value) is in
//! `core::aggregates`. The tests below keep golden snapshots of everything two canonical
//! pipelines run in `src/core/snapshots/`: a change to the generated SQL is reviewed as a diff
//! of those files (`UPDATE_SNAPSHOTS=1 cargo pgrx test` writes them anew).

use super::aggregates::{AggExpr, ResolvedAgg};
use super::ident::{quote_ident, quote_literal};
use super::model::SINGLE_SOURCE;
pub use super::model::{Column, PipelineDef};

mod batches;
mod corrections;
mod ddl;
mod firing;
mod ingest;
mod sessions;
mod trigger;
use super::window::{Period, WindowSpec};
use ingest::Rows;
pub use trigger::FRONT_SYMBOL;

pub const INTERNAL_SCHEMA: &str = "_eventtime";

/// Column names the extension puts beside key and aggregate columns in its tables and views.
pub const RESERVED_COLUMNS: &[&str] = &[
    "window_start",
    "window_end",
    "version",
    "kind",
    "sealed",
    "watermark",
    "fired_at",
    "event_id",
    "event_time",
    "row",
    "deadline",
    "refused_at",
    "restated_in",
    "merged_into",
    "cursor",
];

/// PostgreSQL's system column names, which no column of a table may take.
pub const SYSTEM_COLUMNS: &[&str] = &["tableoid", "xmin", "cmin", "xmax", "cmax", "ctid"];

/// Prefix of the internal columns of the window state; user names may not start with it.
pub const INTERNAL_PREFIX: &str = "_et_";

/// The window start and end each row gets in the ingest statement, beside the source columns;
/// source tables may not have columns of those names.
pub const WINDOW_START_COLUMN: &str = "_et_window_start";
pub const WINDOW_END_COLUMN: &str = "_et_window_end";
/// The number of a row of the transition table, which the ingest statement adds beside its
/// columns when a refused row keeps its document once ([`PipelineDef::refused_doc_once`]).
pub const ROW_NUMBER_COLUMN: &str = "_et_row";

/// The setting `eventtime.ingest` turns on while its INSERT runs, so that the trigger hands it the
/// counts; plain INSERT and COPY statements skip that call.
pub const COLLECT_COUNTS: &str = "pg_eventtime.collect_counts";

/// The label of the trigger function's block. Its SQL names the function's variables
/// `pg_eventtime.<variable>` and resolves every unqualified name as a column
/// (`#variable_conflict use_column`), so that no source column name can collide with a variable.
const FN_LABEL: &str = "pg_eventtime";

/// Statements of at least this many rows whose windows have no event id in the ledger yet try
/// the ledger insert without dedup first (see [`PipelineDef::create_trigger_function`]).
pub const FRESH_BULK_ROWS: i64 = 1000;

/// The landing the ingest statements give a row whose event time has no window (NULL, infinite,
/// or out of range); see [`PipelineDef::landing_case`].
const NO_WINDOW: i32 = 4;

/// The most key columns for which the lookup of a window's main firing has one branch per
/// combination of NULL keys (2^n branches; see `PipelineDef::main_lookup`).
const MAX_KEY_BRANCHES: usize = 3;

/// How an ingest statement of several rows writes the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ledger {
    /// `ON CONFLICT DO NOTHING`: duplicates are found and counted.
    Dedup,
    /// A plain insert that fails on the first duplicate: no probe of the index before each entry.
    Fresh,
}

/// The views of a pipeline, by suffix. `_current` reads `_latest` and `_provisional`.
pub const VIEW_SUFFIXES: &[&str] = &[
    "_current",
    "_history",
    "_latest",
    "_sealed",
    "_refused",
    "_provisional",
];

/// The suffix of a pipeline's typed feed function, beside its views (see `create_feed_function`).
pub const FEED_SUFFIX: &str = "_changes";

/// A fixed duration as an interval literal with no day or month field, so that adding it to a
/// `timestamptz` does not depend on the session time zone.
pub fn duration_literal(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let m = micros.unsigned_abs();
    let (h, rest) = (m / 3_600_000_000, m % 3_600_000_000);
    let (min, rest) = (rest / 60_000_000, rest % 60_000_000);
    let (s, us) = (rest / 1_000_000, rest % 1_000_000);
    format!("interval '{sign}{h}:{min:02}:{s:02}.{us:06}'")
}

/// ` AND` the condition that key column `k` of the row aliased `a` equals parameter `$n`, given as
/// text and cast to the column's type (NULL equal to NULL), with the type's default equality,
/// as [`PipelineDef`]'s key comparisons.
pub fn key_equals_param(a: &str, k: &Column, n: usize) -> String {
    format!(
        " AND pg_catalog.record_eq(ROW({a}.{}), ROW((${n}::text)::{}))",
        quote_ident(&k.name),
        k.type_name
    )
}

/// The internal table `what` (`state`, `ids`, `history`, `refused`) of pipeline `id`, quoted.
pub fn internal_table(id: i32, what: &str) -> String {
    format!(
        "{}.{}",
        INTERNAL_SCHEMA,
        quote_ident(&format!("p{id}_{what}"))
    )
}

/// `items` followed by ", " when not empty, to put before other columns.
fn prefix(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!("{}, ", items.join(", "))
    }
}

impl PipelineDef {
    pub fn table(&self, what: &str) -> String {
        internal_table(self.id, what)
    }

    /// `window_end, ` where a window's end is part of its identity in the state and the ledger:
    /// cumulate windows, whose steps share their period's start. Sessions are identified by their
    /// end in history only (their state and ledger are per key).
    pub(super) fn step_end(&self) -> &'static str {
        if self.window.end_identifies() && !self.window.is_session() {
            "window_end, "
        } else {
            ""
        }
    }

    /// ` AND a.window_end = b.window_end` where the end is part of a window's identity
    /// ([`Self::step_end`]), nothing otherwise.
    pub(super) fn same_end(&self, a: &str, b: &str) -> String {
        if self.step_end().is_empty() {
            String::new()
        } else {
            format!(" AND {a}.window_end = {b}.window_end")
        }
    }

    /// Whether the state of a fired window is its late rows only ([`PipelineDef::late_deltas`]);
    /// never for sessions, whose merges read a fired session's whole state from its row.
    pub fn uses_late_deltas(&self) -> bool {
        self.late_deltas && !self.window.is_session()
    }

    /// Whether a fired window's one state row of late rows is marked by `_et_late`
    /// ([`PipelineDef::late_row_flag`]).
    pub(super) fn flags_late_rows(&self) -> bool {
        self.late_row_flag && self.uses_late_deltas()
    }

    /// Whether an open window keeps one state row per writing backend, with checked sums
    /// ([`PipelineDef::state_slots`]).
    pub fn uses_slots(&self) -> bool {
        self.state_slots && self.uses_late_deltas()
    }

    /// Whether late rows of fired windows wait in pending state rows for a batch
    /// ([`PipelineDef::late_firing`]): only with the layout of late rows and slots.
    pub fn batches_late(&self) -> bool {
        self.late_firing.is_some() && self.uses_slots() && self.flags_late_rows()
    }

    /// Whether a session pipeline writes the late versions of its sessions in batches
    /// ([`PipelineDef::late_firing`]): a session whose late rows wait is marked by `_et_since`.
    pub fn batches_sessions(&self) -> bool {
        self.late_firing.is_some() && self.window.is_session()
    }

    /// The predicate that marks a fired window's one state row of late rows, the predicate of
    /// its unique index.
    pub(super) fn late_row_predicate(&self) -> &'static str {
        if self.flags_late_rows() {
            "_et_late"
        } else {
            "version > 0"
        }
    }

    pub fn trigger_function(&self) -> String {
        format!(
            "{}.{}",
            INTERNAL_SCHEMA,
            quote_ident(&format!("p{}_ingest", self.id))
        )
    }

    pub fn trigger_name(&self) -> String {
        quote_ident(&format!("eventtime_ingest_p{}", self.id))
    }

    pub fn view(&self, suffix: &str) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.view_schema),
            quote_ident(&format!("{}{}", self.name, suffix))
        )
    }

    fn late(&self) -> String {
        duration_literal(self.lateness)
    }

    fn key_names(&self, alias: Option<&str>) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| match alias {
                Some(a) => format!("{a}.{}", quote_ident(&k.name)),
                None => quote_ident(&k.name),
            })
            .collect()
    }

    /// ` AND` the condition that the rows aliased `a` and `b` have the same key (NULL equal to
    /// NULL), empty without keys. `record_eq` compares each value with its type's default
    /// equality (the one `GROUP BY` and the unique indexes use), whatever operators the
    /// `search_path` shows: `citext` keys are equal regardless of case.
    fn same_key(&self, a: &str, b: &str) -> String {
        if self.keys.is_empty() {
            return String::new();
        }
        format!(
            " AND pg_catalog.record_eq(ROW({}), ROW({}))",
            self.key_names(Some(a)).join(", "),
            self.key_names(Some(b)).join(", ")
        )
    }

    fn key_defs(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| format!("{} {}", quote_ident(&k.name), k.sql_type()))
            .collect()
    }

    fn acc_defs(&self) -> Vec<String> {
        self.aggs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.acc_columns(i))
            .map(|(c, t)| format!("{c} {t}"))
            .collect()
    }

    /// The row count and the accumulator columns: what a window's state holds, and what each
    /// version keeps of it.
    fn state_cols(&self) -> Vec<String> {
        let mut out = vec![format!("{INTERNAL_PREFIX}n")];
        out.extend(self.acc_cols());
        out
    }

    /// The state columns (row count and accumulators) of the row aliased `a`, comma-separated.
    fn state_cols_of(&self, a: &str) -> String {
        self.state_cols()
            .iter()
            .map(|c| format!("{a}.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn acc_cols(&self) -> Vec<String> {
        self.aggs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.acc_columns(i))
            .map(|(c, _)| c)
            .collect()
    }

    /// Partial aggregates over the accepted rows of one statement, grouped by key and window;
    /// `filter` (empty, or ` FILTER (WHERE ...)`) follows each aggregate call.
    fn partials(&self, filter: &str) -> Vec<String> {
        self.aggs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.partials(i, filter))
            .collect()
    }

    /// `SET` items that merge a statement's partials (`excluded`) into the stored state (`s`).
    fn merges(&self) -> Vec<String> {
        self.aggs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.merges(i))
            .collect()
    }

    /// `expr`, the sum aggregate `i` keeps in a state row of the window starting `ws`, passed
    /// through `_eventtime.acc_check`, which fails the statement when it is beyond the bound that
    /// keeps the window's firing from overflowing (see `pg::overflow`). Other accumulators, and
    /// those of pipelines without [`PipelineDef::state_slots`], as they are.
    fn acc_checked(&self, i: usize, expr: &str, ws: &str) -> String {
        if !self.uses_slots() || !self.aggs[i].sums() {
            return expr.to_string();
        }
        format!(
            "{INTERNAL_SCHEMA}.acc_check({expr}, {id}, {alias}, {ws})",
            id = self.id,
            alias = quote_literal(&self.aggs[i].spec.alias),
        )
    }

    /// The state rows `rows` (key, window start, window end, row count and one partial per
    /// accumulator column, in that order) with their sums checked ([`Self::acc_checked`]).
    fn checked_state_rows(&self, rows: &str) -> String {
        if !self.uses_slots() {
            return rows.to_string();
        }
        let mut names = self.key_names(None);
        names.extend(["window_start".to_string(), "window_end".to_string()]);
        names.extend(self.state_cols());
        let values: Vec<String> = self
            .key_names(Some("r"))
            .into_iter()
            .chain(["r.window_start".to_string(), "r.window_end".to_string()])
            .chain(std::iter::once(format!("r.{INTERNAL_PREFIX}n")))
            .chain(
                self.aggs
                    .iter()
                    .enumerate()
                    .flat_map(|(i, a)| {
                        a.acc_columns(i)
                            .into_iter()
                            .enumerate()
                            .map(move |(j, (c, _))| (i, j, c))
                    })
                    .map(|(i, j, c)| {
                        let v = format!("r.{c}");
                        if j == 0 {
                            self.acc_checked(i, &v, "r.window_start")
                        } else {
                            v
                        }
                    }),
            )
            .collect();
        format!(
            "SELECT {} FROM ({rows}) r ({})",
            values.join(", "),
            names.join(", ")
        )
    }

    /// [`Self::merges`], with the merged sums checked ([`Self::acc_checked`]).
    fn checked_merges(&self) -> Vec<String> {
        self.aggs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| {
                a.merge_items(i)
                    .into_iter()
                    .enumerate()
                    .map(move |(j, (c, e))| (i, j, c, e))
            })
            .map(|(i, j, c, e)| {
                let e = if j == 0 {
                    self.acc_checked(i, &e, "s.window_start")
                } else {
                    e
                };
                format!("{c} = {e}")
            })
            .collect()
    }

    /// `, <combine> AS <column>` for every accumulator column: the aggregates that combine rows
    /// of accumulators (one window's state rows, or the members of a session) into one.
    fn combined(&self) -> String {
        self.aggs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.combine(i).into_iter().zip(a.acc_columns(i)))
            .map(|(e, (c, _))| format!(", {e} AS {c}"))
            .collect()
    }

    /// The published values computed from a state row aliased `u`.
    fn finals(&self, u: &str) -> Vec<String> {
        self.aggs
            .iter()
            .enumerate()
            .map(|(i, a)| a.final_value(i, u))
            .collect()
    }

    fn alias_cols(&self) -> Vec<String> {
        self.aggs
            .iter()
            .map(|a| quote_ident(&a.spec.alias))
            .collect()
    }

    /// Whether some aggregate's argument is an expression ([`AggSpec::expr`]).
    pub fn has_expressions(&self) -> bool {
        self.aggs.iter().any(|a| a.spec.expr.is_some())
    }

    /// What a `FROM` item over source rows aliased `row` is followed by so that the aggregates'
    /// expressions can read them: the row again, as [`AggExpr::ROW`] (a subquery the planner
    /// pulls up), when some aggregate has one.
    pub(super) fn expression_row(&self, row: &str) -> String {
        if self.has_expressions() {
            format!(" CROSS JOIN LATERAL (SELECT {row}.*) {}", AggExpr::ROW)
        } else {
            String::new()
        }
    }

    /// The argument of aggregate `a` over the source row `row` (with [`Self::expression_row`]):
    /// `None` for `count(*)`.
    fn arg_over(a: &ResolvedAgg, row: &str) -> Option<String> {
        match (&a.spec.expr, &a.spec.arg) {
            (Some(e), _) => Some(format!("({})", e.sql)),
            (None, Some(c)) => Some(format!("{row}.{}", quote_ident(c))),
            (None, None) => None,
        }
    }

    /// The aggregates' arguments over the source row `row`, each as `<argument> AS _et_v<i>`
    /// ([`ResolvedAgg::arg_column`]), for the aggregates that have one.
    pub(super) fn arg_items(&self, row: &str) -> Vec<String> {
        self.aggs
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                Self::arg_over(a, row).map(|v| format!("{v} AS {}", ResolvedAgg::arg_column(i)))
            })
            .collect()
    }

    /// The source columns the pipeline's statements name: event time, keys, event id and the
    /// aggregates' arguments, each once.
    pub fn used_columns(&self) -> Vec<&str> {
        let mut out: Vec<&str> = vec![self.event_time.as_str()];
        let others = self
            .keys
            .iter()
            .map(|k| k.name.as_str())
            .chain(self.event_id.iter().map(|c| c.name.as_str()))
            .chain(self.aggs.iter().flat_map(|a| a.spec.columns()))
            .chain(self.offsets.iter().flat_map(|o| {
                std::iter::once(o.column.as_str()).chain(o.source_column.as_deref())
            }));
        for c in others {
            if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }

    /// The internal tables of the pipeline, by `what` (see [`internal_table`]).
    fn tables(&self) -> Vec<&'static str> {
        let mut out = vec!["state"];
        if self.ledger().is_some() {
            out.push("ids");
        }
        out.extend(["history", "refused", "folds"]);
        // Session pipelines created before their key locks were rows of `locks` have no such
        // table: what names it says IF EXISTS.
        if self.window.is_session() {
            out.push("locks");
        }
        if self.offsets.is_some() {
            out.push("offsets");
        }
        if self.batches_late() {
            out.push("arrivals");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The canonical pipeline of these tests (see `core::model::sample`).
    fn def() -> PipelineDef {
        crate::core::model::sample()
    }

    #[test]
    fn open_windows_keep_a_row_per_backend_with_checked_sums_unless_created_before() {
        let d = def();
        let tables = d.create_tables().join("\n");
        assert!(tables.contains(", _et_late boolean NOT NULL DEFAULT false, _et_slot integer)"));
        assert!(tables.contains(
            "(\"store\", window_start, _et_slot) NULLS NOT DISTINCT WHERE _et_slot IS NOT NULL"
        ));
        // Every statement that writes an open window's partials upserts this backend's row; the
        // sum of `avg` is checked where a row is written or merged, the count never.
        let f = d.create_trigger_function();
        let upserts = "ON CONFLICT (\"store\", window_start, _et_slot) WHERE _et_slot IS NOT NULL";
        assert!(f.matches(upserts).count() >= 2);
        assert!(d.ingest_on_time_statement().contains(upserts));
        assert!(f.contains("acc_check(r.\"_et_a1\", 7, 'mean', r.window_start)"));
        assert!(f.contains("acc_check(CASE WHEN s.\"_et_a1\" IS NULL"));
        assert!(!f.contains("acc_check(r.\"_et_a0\"") && !f.contains("acc_check(r.\"_et_a1_n\""));
        // Pipelines created before append a row per statement, unchecked; sessions have no slots.
        let mut old = def();
        old.state_slots = false;
        let mut session = def();
        session.window = WindowSpec::Session { gap: 60_000_000 };
        for o in [old, session] {
            assert!(!o.uses_slots());
            assert!(!o.create_tables().join("\n").contains("_et_slot"));
            let f = o.create_trigger_function();
            assert!(!f.contains("_et_slot") && !f.contains("acc_check"));
        }
    }

    #[test]
    fn durations_have_no_day_field() {
        assert_eq!(
            duration_literal(86_400_000_000),
            "interval '24:00:00.000000'"
        );
        assert_eq!(
            duration_literal(90_061_000_001),
            "interval '25:01:01.000001'"
        );
        assert_eq!(duration_literal(0), "interval '0:00:00.000000'");
        assert_eq!(duration_literal(-1), "interval '-0:00:00.000001'");
    }

    #[test]
    fn names_are_quoted_everywhere() {
        let d = def();
        assert_eq!(
            d.view("_latest"),
            "\"public\".\"Orders \"\"daily\"\"_latest\""
        );
        assert!(d
            .create_views()
            .iter()
            .filter(|v| v.starts_with("CREATE VIEW"))
            .all(|v| v.contains("\"store\"")));
    }

    #[test]
    fn avg_is_published_from_sum_and_count() {
        let d = def();
        assert_eq!(
            d.finals("u")[1],
            "(u.\"_et_a1\" / NULLIF(u.\"_et_a1_n\", 0))::numeric"
        );
        assert!(d
            .fire_statement()
            .contains("(f.\"_et_a1\" / NULLIF(f.\"_et_a1_n\", 0))::numeric"));
        assert!(!d.fire_statement().contains("UPDATE"));
    }

    #[test]
    fn with_late_deltas_the_firing_only_reads_the_state() {
        let mut d = def();
        let state = d.table("state");
        assert!(d.uses_late_deltas());
        let fire = d.fire_statement();
        assert!(fire.contains(&format!("FROM {state} s")));
        assert!(!fire.contains(&format!("INSERT INTO {state}")));
        assert!(!fire.contains(&format!("DELETE FROM {state}")));
        // Its plans never scan the history for a window's main firing, even when made while the
        // history was empty.
        assert!(d
            .create_trigger_function()
            .contains("SET jit = off SET enable_seqscan = off AS"));
        // A late version adds the late row to the main firing, in the ingest statement.
        assert!(d
            .ingest_statement()
            .contains("late_versions AS (\nINSERT INTO _eventtime.\"p7_history\""));
        assert!(d.ingest_statement().contains("m.kind = 'main'"));
        // The layout before late deltas, and sessions, still fold a fired window into one row.
        d.late_deltas = false;
        assert!(d.fire_statement().contains(&format!("INSERT INTO {state}")));
        let mut s = def();
        s.window = WindowSpec::Session { gap: 60_000_000 };
        assert!(!s.uses_late_deltas());
        assert!(s.fire_statement().contains(&format!("DELETE FROM {state}")));
    }

    #[test]
    fn the_main_firing_is_looked_up_with_the_index_operators_one_branch_per_null_key() {
        let mut d = def();
        let one = d.main_lookup("u");
        assert_eq!(one.matches("UNION ALL").count(), 1);
        assert!(one.contains("m.\"store\" OPERATOR(pg_catalog.=) u.\"store\""));
        assert!(one.contains("m.\"store\" IS NULL AND u.\"store\" IS NULL"));
        assert!(!one.contains("record_eq"));
        d.keys.push(Column {
            name: "region".into(),
            type_name: "public.citext".into(),
            collation: None,
            eq_op: Some("OPERATOR(public.=)".into()),
        });
        let two = d.main_lookup("u");
        assert_eq!(two.matches("UNION ALL").count(), 3);
        assert!(two.contains("m.\"region\" OPERATOR(public.=) u.\"region\""));
        // Without an operator (a definition from before), or with too many keys: one branch
        // that compares the keys with record_eq.
        d.keys[1].eq_op = None;
        let old = d.main_lookup("u");
        assert!(!old.contains("UNION ALL"));
        assert!(old.contains("pg_catalog.record_eq"));
        d.keys[1].eq_op = Some("OPERATOR(pg_catalog.=)".into());
        for name in ["a", "b"] {
            let mut k = d.keys[0].clone();
            k.name = name.into();
            d.keys.push(k);
        }
        assert!(!d.main_lookup("u").contains("UNION ALL"));
        d.keys.clear();
        let unkeyed = d.main_lookup("u");
        assert!(!unkeyed.contains("UNION ALL") && !unkeyed.contains("record_eq"));
    }

    #[test]
    fn writers_lock_the_catalog_row_only_under_repeatable_read() {
        let mut d = def();
        assert!(!d.ingest_statement().contains("FOR SHARE"));
        assert!(!d.ingest_one_statement().contains("FOR SHARE"));
        let f = d.create_trigger_function();
        let block =
            "IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN\n\
                     LOCK TABLE _eventtime.\"p7_state\" IN ROW EXCLUSIVE MODE;\n\
                     PERFORM FROM _eventtime.pipeline p WHERE p.id = 7 FOR SHARE;\n\
                     END IF;\n";
        assert!(f.contains(block));
        // Before the first statement that reads the watermark.
        assert!(f.find(block).unwrap() < f.find("FROM new_rows").unwrap());
        assert_eq!(f.matches("FOR SHARE").count(), 1);
        // Pipelines with a lag and sessions refuse other levels than READ COMMITTED instead.
        d.watermark_lag = Some(60_000_000);
        assert!(!d.create_trigger_function().contains("FOR SHARE"));
        d.watermark_lag = None;
        d.window = WindowSpec::Session { gap: 60_000_000 };
        assert!(!d.create_trigger_function().contains("FOR SHARE"));
    }

    #[test]
    fn ingest_dedups_only_with_an_event_id() {
        let mut d = def();
        assert!(d.ingest_statement().contains("ON CONFLICT DO NOTHING"));
        d.event_id = None;
        let sql = d.ingest_statement();
        assert!(!sql.contains("\"p7_ids\""));
        assert!(sql.contains("kept AS NOT MATERIALIZED (SELECT * FROM cls)"));
        // Without dedup, the rows' order is not computed.
        assert!(!sql.contains("_et_ord"));
    }

    #[test]
    fn a_source_index_on_the_event_id_leaves_no_ledger() {
        let mut d = def();
        d.id_index = true;
        assert!(d.event_id.is_some() && d.ledger().is_none());
        let statements = [
            d.ingest_statement(),
            d.create_trigger_function(),
            d.ingest_on_time_statement(),
            d.create_tables().join("\n"),
        ];
        for sql in &statements {
            assert!(!sql.contains("\"p7_ids\""), "{sql}");
        }
        // The id is still the refused rows' event id.
        assert!(d.create_trigger_function().contains("r.\"order_id\""));
        d.window = WindowSpec::Session { gap: 60_000_000 };
        assert!(!d.create_trigger_function().contains("\"p7_ids\""));
    }

    #[test]
    fn one_row_partials_are_the_aggregates_of_one_value() {
        let d = def();
        // count(*), then avg(amount) as a numeric sum and a count of non-NULL values.
        assert_eq!(
            d.one_row_partials(|c| format!("v.{c}")),
            [
                "1::bigint",
                "(v.amount)::numeric",
                "CASE WHEN v.amount IS NULL THEN 0::bigint ELSE 1::bigint END",
            ]
        );
        assert_eq!(
            d.one_row_partials(|c| c.to_string()).len(),
            d.partials("").len()
        );
        let one = d.ingest_one_statement();
        assert!(one.starts_with("WITH /* pg_eventtime ingest */"));
        assert!(!one.contains("GROUP BY") && !one.contains("DISTINCT"));
        // The late version and the refused row are not in its plan.
        assert!(
            !one.contains("p7_history") && !one.contains("p7_refused") && !one.contains("new_rows")
        );
    }

    #[test]
    fn the_one_row_path_reads_each_column_once_into_a_record() {
        let mut d = def();
        // The event id doubles as the aggregate argument: one variable for both.
        d.aggs[1].spec.arg = Some("order_id".into());
        assert_eq!(d.one_row_columns(), ["store", "order_id", "ordered_at"]);
        assert_eq!(d.one_row_var("ordered_at"), "pg_eventtime.v_row.c2");
        let f = d.create_trigger_function();
        assert!(f.contains(
            "SELECT (SELECT count(*) FROM (SELECT FROM new_rows LIMIT 1000) n) AS n, r.\"store\" AS c0, r.\"order_id\" AS c1, r.\"ordered_at\" AS c2\n\
             INTO v_row FROM new_rows r LIMIT 1;"
        ));
        assert!(!f.contains(&d.source), "the function names no source table");
        // In SQL, no variable is named without the block's label, and names resolve as columns;
        // only the INTO lists, the conditions of IF and assignments, which have no table in
        // scope, name them bare.
        assert!(f.contains("#variable_conflict use_column\n<<pg_eventtime>>\n"));
        let body = &f[f.find("BEGIN\n").unwrap()..];
        let plpgsql = |l: &str| {
            let l = l.trim_start();
            ["INTO ", "IF ", "ELSIF "].iter().any(|p| l.starts_with(p))
                || (l.starts_with("v_") && l.contains(" := "))
        };
        for line in body.lines().filter(|l| !plpgsql(l)) {
            for (i, _) in line.match_indices("v_") {
                let before = line[..i].chars().last().unwrap_or(' ');
                if !(before.is_alphanumeric() || before == '_' || before == '"') {
                    assert_eq!(before, '.', "unqualified variable in: {line}");
                    assert!(line[..i].ends_with("pg_eventtime."), "{line}");
                }
            }
        }
    }

    #[test]
    fn the_trigger_takes_the_one_row_statement_for_one_row() {
        let d = def();
        let f = d.create_trigger_function();
        let one = f
            .find(&d.ingest_one_statement())
            .expect("one-row statement");
        let many = f.find(&d.ingest_statement()).expect("statement");
        assert!(f.find("IF v_row.n = 1 THEN").unwrap() < one && one < many);
        assert!(f.contains(COLLECT_COUNTS));
        assert!(f.starts_with(&format!(
            "CREATE FUNCTION {}() RETURNS trigger",
            d.sql_trigger_function()
        )));
        assert!(f.lines().nth(1).unwrap().contains("SET jit = off"));
    }

    #[test]
    fn pipelines_of_one_window_per_row_without_a_lag_have_a_front_and_the_others_do_not() {
        let mut d = def();
        assert!(d.has_front());
        assert_eq!(d.sql_trigger_function(), "_eventtime.\"p7_ingest_sql\"");
        let front = d.create_front_function().expect("a front");
        assert!(front.starts_with(&format!(
            "CREATE FUNCTION {}() RETURNS trigger LANGUAGE c",
            d.trigger_function()
        )));
        assert!(front.ends_with(&format!("'{FRONT_SYMBOL}'")));
        assert!(!front.contains("SECURITY DEFINER"));
        assert!(d
            .create_trigger()
            .ends_with(&format!("EXECUTE FUNCTION {}()", d.trigger_function())));
        // Both functions are the owner's, neither is PUBLIC's, and both are dropped.
        let handed = d.hand_over("o");
        let dropped = d.drop_objects(true);
        for f in [d.trigger_function(), d.sql_trigger_function()] {
            assert!(handed.contains(&format!("REVOKE ALL ON FUNCTION {f}() FROM PUBLIC")));
            assert!(handed.contains(&format!("ALTER FUNCTION {f}() OWNER TO o")));
            assert!(dropped.contains(&format!("DROP FUNCTION IF EXISTS {f}()")));
        }
        // The on-time statement writes nothing unless the window is open: the ledger's row comes
        // from the pipeline's row with that condition, and the state's from the ledger's. Its
        // parameters are the window, then the front's columns in order.
        let sql = d.ingest_on_time_statement();
        let open = "WHERE p.id = 7 AND (p.watermark IS NULL OR $2::timestamptz > p.watermark)";
        assert_eq!(sql.matches(open).count(), 1);
        assert!(sql.contains(&format!("SELECT $1::timestamptz, $3, $4\nFROM _eventtime.pipeline p\n{open}\nON CONFLICT DO NOTHING")));
        assert!(sql.contains("\nFROM fresh) r ("));
        // Into this backend's row of the window, with the sum checked against its bound.
        assert!(sql.contains("_eventtime.backend_slot() FROM (SELECT"));
        assert!(sql.contains("_eventtime.acc_check(r.\"_et_a1\", 7, 'mean', r.window_start)"));
        assert!(sql.ends_with(
            "ON CONFLICT (\"store\", window_start, _et_slot) WHERE _et_slot IS NOT NULL DO UPDATE SET\n\
             _et_n = s._et_n + excluded._et_n, \"_et_a0\" = s.\"_et_a0\" + excluded.\"_et_a0\", \
             \"_et_a1\" = _eventtime.acc_check(CASE WHEN s.\"_et_a1\" IS NULL THEN excluded.\"_et_a1\" WHEN excluded.\"_et_a1\" IS NULL THEN s.\"_et_a1\" ELSE s.\"_et_a1\" + excluded.\"_et_a1\" END, 7, 'mean', s.window_start), \
             \"_et_a1_n\" = s.\"_et_a1_n\" + excluded.\"_et_a1_n\""
        ));
        assert_eq!(
            d.front_columns(),
            ["store", "order_id", "ordered_at", "amount"]
        );
        assert!(sql.contains("($6)::numeric"));
        assert!(!sql.contains("version"));
        // The front counts the state rows inserted: only the ledger's insert returns rows.
        assert_eq!(sql.matches("RETURNING").count(), 1);
        // Without an event id, the state's row comes from the pipeline's row itself.
        let mut no_ids = def();
        no_ids.event_id = None;
        let sql = no_ids.ingest_on_time_statement();
        assert!(!sql.contains("_ids"));
        assert!(sql.contains(&format!("{open}) r (")));
        // When it inserted nothing, the second statement reads the watermark against the
        // window's end.
        assert!(d
            .front_window_open_statement()
            .contains("p.watermark IS NULL OR $1::timestamptz > p.watermark\nFROM _eventtime.pipeline p WHERE p.id = 7"));
        let mut others = Vec::new();
        let mut lag = def();
        lag.watermark_lag = Some(1);
        others.push(lag);
        let mut old = def();
        old.late_deltas = false;
        others.push(old);
        let mut monthly = def();
        monthly.window = WindowSpec::Calendar {
            size: Period::Months(1),
            slide: Period::Months(1),
            origin: 0,
            time_zone: "Europe/Berlin".into(),
        };
        assert!(monthly.has_front());
        for window in [
            WindowSpec::Calendar {
                size: Period::Days(7),
                slide: Period::Days(1),
                origin: 0,
                time_zone: "Europe/Berlin".into(),
            },
            WindowSpec::Session { gap: 60_000_000 },
            WindowSpec::Hopping {
                size: 3_600_000_000,
                slide: 600_000_000,
                origin: 0,
            },
        ] {
            let mut o = def();
            o.window = window;
            others.push(o);
        }
        for o in others {
            assert!(!o.has_front());
            assert_eq!(o.sql_trigger_function(), o.trigger_function());
            assert!(o.create_front_function().is_none());
        }
        d.event_id = None;
        assert!(!d.ingest_on_time_statement().contains("fresh"));
    }

    #[test]
    fn bulk_loads_of_new_windows_try_the_plain_ledger_insert_first() {
        let mut d = def();
        let fresh = d.ingest_statement_for(Ledger::Fresh, Rows::All);
        let fresh_cte = &fresh[fresh.find("fresh AS (").unwrap()..fresh.find("kept AS").unwrap()];
        assert!(!fresh_cte.contains("ON CONFLICT") && !fresh_cte.contains("RETURNING"));
        assert!(fresh.contains("kept AS NOT MATERIALIZED (SELECT * FROM cls)"));
        // Every row is kept: the rows are read once for the ledger and once for the groups, not
        // materialized, and not numbered; the counts come from the groups.
        assert!(fresh.contains("cls AS NOT MATERIALIZED (") && !fresh.contains("_et_ord"));
        assert!(fresh.contains("FROM batch\n),\nkept AS"));
        let dedup = d.ingest_statement();
        assert!(dedup.contains("cls AS MATERIALIZED (") && dedup.contains("AS _et_ord"));
        let f = d.create_trigger_function();
        let try_at = f.find("IF (CASE WHEN v_row.n >= 1000 THEN (").unwrap();
        let handler = f
            .find("EXCEPTION WHEN unique_violation THEN\nv_done := false;")
            .unwrap();
        assert!(try_at < f.find(&fresh).unwrap() && f.find(&fresh).unwrap() < handler);
        // The statement that dedups, once, after the try: run when the try did not happen or
        // failed.
        assert_eq!(f.matches(&d.ingest_statement()).count(), 1);
        let dedup = f.find(&d.ingest_statement()).unwrap();
        assert!(f[handler..dedup].ends_with("IF NOT v_done THEN\n"));
        // Without event ids there is no ledger and nothing to try.
        d.event_id = None;
        let f = d.create_trigger_function();
        assert!(!f.contains("EXCEPTION") && !f.contains("IF (CASE WHEN v_row.n >="));
        assert_eq!(f.matches(&d.ingest_statement()).count(), 1);
    }

    #[test]
    fn the_statement_counts_from_its_groups_and_refuses_only_when_needed() {
        let sql = def().ingest_statement();
        let refused = &sql[sql.find("refused AS (").unwrap()..sql.find("up AS (").unwrap()];
        assert!(refused.contains("WHERE (SELECT max_landing FROM cls_n) = 3 AND c._et_landing = 3"));
        let counts = &sql[sql.find("counts AS MATERIALIZED (").unwrap()..];
        assert!(counts.contains("FROM batch") && !counts.contains("FROM kept"));
        assert_eq!(
            sql.matches("FROM kept").count(),
            2,
            "kept is read by batch and refused only"
        );
    }

    #[test]
    fn without_event_ids_the_rows_are_read_once_and_grouped_whatever_their_landing() {
        let mut d = def();
        d.event_id = None;
        let sql = d.ingest_statement();
        assert!(sql.contains("cls AS NOT MATERIALIZED (") && !sql.contains("cls AS MATERIALIZED"));
        let batch =
            &sql[sql.find("batch AS MATERIALIZED (").unwrap()..sql.find("cls_n AS").unwrap()];
        // Every row is grouped (no WHERE): the counts come from the groups; only open and late
        // rows make partials.
        assert!(
            batch.contains("FROM cls GROUP BY") && !batch.contains("WHERE _et_landing < 3 GROUP")
        );
        assert_eq!(
            batch.matches(" FILTER (WHERE _et_landing < 3)").count(),
            d.acc_cols().len()
        );
        assert!(
            !batch.contains("_et_max_et"),
            "no lag: no greatest event time"
        );
        let counts =
            &sql[sql.find("cls_n AS MATERIALIZED (").unwrap()..sql.find("kept AS").unwrap()];
        assert!(counts.contains("FROM batch") && counts.contains("NULL::timestamptz AS max_et"));
        // `cls` is read by the groups, and again only for refused rows (through `kept`) and the
        // first row without a window, each behind its condition.
        assert_eq!(
            sql.matches("FROM cls").count() - sql.matches("FROM cls_n").count(),
            3
        );
        assert_eq!(sql.matches("FROM kept").count(), 1);
        assert!(sql.contains(
            "CASE WHEN (SELECT bad FROM cls_n) > 0 THEN (SELECT (array_agg(_et_et) FILTER (WHERE _et_landing = 4))[1] FROM cls) END"
        ));
        assert!(sql.contains("WHERE (SELECT max_landing FROM cls_n) = 3 AND c._et_landing = 3"));
        // With a lag, each group keeps its greatest event time.
        d.watermark_lag = Some(60_000_000);
        let sql = d.ingest_statement();
        assert!(
            sql.contains(&format!(
                ", max({}) AS _et_max_et\n",
                d.lag_event_time("_et_et")
            )) && sql.contains("max(_et_max_et) AS max_et")
        );
    }

    #[test]
    fn the_trigger_function_is_the_owners_and_restricts_itself_first() {
        let mut d = def();
        let f = d.create_trigger_function();
        assert!(f.lines().next().unwrap().contains("SECURITY DEFINER"));
        let body = &f[f.find("BEGIN\n").unwrap() + "BEGIN\n".len()..];
        assert!(
            body.starts_with("v_restricted := _eventtime.restrict();\n"),
            "{body}"
        );
        let owner = "\"app owner\"";
        let handed = d.hand_over(owner);
        for t in ["state", "ids", "history", "refused", "folds"] {
            assert!(
                handed.contains(&format!(
                    "ALTER TABLE IF EXISTS {} OWNER TO {owner}",
                    d.table(t)
                )),
                "{t}"
            );
        }
        let revoke = handed
            .iter()
            .position(|s| s.starts_with("REVOKE ALL ON FUNCTION"))
            .unwrap();
        let alter = handed
            .iter()
            .position(|s| {
                s == &format!("ALTER FUNCTION {}() OWNER TO {owner}", d.trigger_function())
            })
            .unwrap();
        assert!(revoke < alter);
        // Without event ids there is no ledger to hand over.
        d.event_id = None;
        assert!(!d.hand_over(owner).iter().any(|s| s.contains("p7_ids")));
        // Four tables, and two functions (the front and the PL/pgSQL function behind it).
        assert_eq!(d.hand_over(owner).len(), 8);
    }

    #[test]
    fn no_keys_means_one_group_per_window() {
        let mut d = def();
        d.keys.clear();
        let sql = d.ingest_statement();
        assert!(sql.contains("GROUP BY \"_et_window_start\""));
        assert!(sql.contains("ON CONFLICT (window_start)"));
    }

    /// Everything a pipeline runs, in one text: the golden snapshots below compare it with the
    /// files in `src/core/snapshots/`, so that a change to what pipelines run shows up as a diff
    /// of those files. `UPDATE_SNAPSHOTS=1 cargo pgrx test` writes them anew.
    fn render(d: &PipelineDef) -> String {
        let mut sections: Vec<(&str, Vec<String>)> = vec![
            ("tables", d.create_tables()),
            ("trigger function", vec![d.create_trigger_function()]),
            ("front", d.create_front_function().into_iter().collect()),
            (
                "one on-time row",
                if d.has_front() {
                    vec![
                        d.ingest_on_time_statement(),
                        d.front_window_open_statement(),
                    ]
                } else {
                    vec![]
                },
            ),
            (
                "engine",
                if d.has_front() {
                    [
                        d.ingest_groups_statement(),
                        d.ingest_late_groups_statement(),
                        d.ingest_refused_rows_statement(),
                    ]
                    .into_iter()
                    .chain(d.ingest_ledger_statement())
                    .collect()
                } else {
                    vec![]
                },
            ),
            ("trigger", vec![d.create_trigger()]),
            ("views", d.create_views()),
            ("typed feed", d.create_feed_function()),
            ("hand over", d.hand_over("\"app owner\"")),
        ];
        sections.push(("fire", vec![d.fire_statement()]));
        sections.push((
            "late batches",
            d.late_batch_statement()
                .into_iter()
                .chain(d.late_batch_due_statement())
                .collect(),
        ));
        sections.push(("purge", vec![d.purge_statement()]));
        sections.push(("drop", d.drop_objects(true)));
        let mut out = String::new();
        for (what, stmts) in sections.into_iter().filter(|s| !s.1.is_empty()) {
            out += &format!("-- {what}\n");
            for s in stmts {
                out += &s;
                out += ";\n";
            }
            out += "\n";
        }
        out
    }

    fn check_snapshot(name: &str, d: &PipelineDef) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("src/core/snapshots/{name}.sql"));
        let got = render(d);
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &got).unwrap();
            return;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if got != want {
            let line = got
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(got.lines().count().min(want.lines().count()));
            panic!(
                "the SQL of pipeline {name} differs from {} from line {}: review the change, then write it with UPDATE_SNAPSHOTS=1\n  now:  {}\n  file: {}",
                path.display(),
                line + 1,
                got.lines().nth(line).unwrap_or("(end)"),
                want.lines().nth(line).unwrap_or("(end)")
            );
        }
    }

    #[test]
    fn golden_sql_of_a_keyed_daily_pipeline_with_event_ids() {
        check_snapshot("tumbling_keyed_event_id", &def());
    }

    #[test]
    fn golden_sql_of_a_keyed_daily_pipeline_with_batched_late_firings() {
        let mut d = def();
        d.late_firing = Some(60_000_000);
        check_snapshot("tumbling_late_firing", &d);
    }

    #[test]
    fn late_rows_wait_in_pending_rows_only_with_late_firing() {
        let mut d = def();
        assert!(d.late_batch_statement().is_none());
        assert!(!d.ingest_statement().contains("_et_pending"));
        d.late_firing = Some(60_000_000);
        let ingest = d.ingest_statement();
        // The late partials go to this backend's pending row; no late version is written.
        assert!(
            ingest.contains("_et_pending, _et_arrival) WHERE _et_pending IS NOT NULL DO UPDATE")
        );
        assert!(!ingest.contains("'late'"), "{ingest}");
        assert!(!d.ingest_late_groups_statement().contains("'late'"));
        let batch = d.late_batch_statement().unwrap();
        assert!(batch.contains("interval '0:01:00.000000'"));
        assert!(batch.contains("OR window_end <= $1::timestamptz - "));
        // A pipeline of an earlier layout never batches.
        d.late_row_flag = false;
        assert!(d.late_batch_statement().is_none());
        // Sessions mark a waiting session in its own row, and write no version for it.
        let mut s = def();
        s.window = WindowSpec::Session { gap: 1_800_000_000 };
        s.late_deltas = false;
        assert!(s.late_batch_statement().is_none());
        s.late_firing = Some(60_000_000);
        let batch = s.late_batch_statement().unwrap();
        assert!(batch.contains("SET version = s.version + 1, _et_since = NULL"));
        assert!(s
            .session_ingest_statement()
            .contains("_et_since = r._et_since_new"));
        assert!(s.create_tables()[0].contains("_et_since timestamptz"));
    }

    #[test]
    fn golden_sql_of_an_unkeyed_pipeline_with_a_watermark_lag() {
        let mut d = def();
        d.keys.clear();
        d.event_id = None;
        d.watermark_lag = Some(60_000_000);
        d.window = WindowSpec::Tumbling {
            size: 900_000_000,
            origin: 0,
        };
        check_snapshot("tumbling_unkeyed_lag", &d);
    }

    #[test]
    fn golden_sql_of_a_hopping_pipeline() {
        let mut d = def();
        d.window = WindowSpec::Hopping {
            size: 3 * 3_600_000_000,
            slide: 3_600_000_000,
            origin: 0,
        };
        d.refused_doc_once = true;
        check_snapshot("hopping_keyed_event_id", &d);
    }

    #[test]
    fn the_engine_inserts_ledger_entries_in_the_arrays_order_and_returns_them() {
        let d = def();
        let sql = d
            .ingest_ledger_statement()
            .expect("a daily pipeline with a ledger");
        assert!(sql.contains("FROM unnest($1::timestamptz[], "));
        assert!(sql.contains("ON CONFLICT DO NOTHING\nRETURNING i.window_start, "));
        // No ORDER BY: the engine sorts, and matches what comes back in the arrays' order.
        assert!(!sql.contains("ORDER BY"));
        let types = d.front_ledger_types().unwrap();
        assert_eq!(types.first().map(String::as_str), Some("timestamptz"));
        assert_eq!(types.len(), d.keys.len() + 2);
        let mut no_ids = def();
        no_ids.event_id = None;
        assert!(no_ids.ingest_ledger_statement().is_none());
        let mut cumulate = def();
        cumulate.window = WindowSpec::Cumulate {
            size: crate::core::window::Span::Days(1),
            step: crate::core::window::Span::Us(3_600_000_000),
            origin: 0,
            time_zone: None,
        };
        assert!(cumulate.ingest_ledger_statement().is_none());
    }

    #[test]
    fn golden_sql_of_a_cumulate_pipeline() {
        let mut d = def();
        d.window = WindowSpec::Cumulate {
            size: crate::core::window::Span::Days(1),
            step: crate::core::window::Span::Us(3_600_000_000),
            origin: 0,
            time_zone: Some("Europe/Berlin".into()),
        };
        d.refused_doc_once = true;
        check_snapshot("cumulate_keyed_event_id", &d);
    }

    #[test]
    fn golden_sql_of_a_monthly_pipeline_in_berlin() {
        let mut d = def();
        d.window = WindowSpec::Calendar {
            size: Period::Months(1),
            slide: Period::Months(1),
            origin: 0,
            time_zone: "Europe/Berlin".into(),
        };
        check_snapshot("calendar_month_berlin", &d);
    }

    #[test]
    fn golden_sql_of_a_session_pipeline() {
        let mut d = def();
        d.window = WindowSpec::Session {
            gap: 30 * 60_000_000,
        };
        d.late_deltas = false;
        check_snapshot("session_keyed_event_id", &d);
    }

    #[test]
    fn sessions_lock_their_keys_and_have_no_single_row_path() {
        let mut d = def();
        d.window = WindowSpec::Session {
            gap: 30 * 60_000_000,
        };
        let f = d.create_trigger_function();
        assert!(!f.contains("IF v_row.n = 1 THEN") && !f.contains(" IN EXCLUSIVE MODE"));
        // Nothing of it reads the first row of the transition table.
        assert!(!f.contains("v_row."));
        let lock = f.find("ORDER BY b.bucket FOR UPDATE OF b").unwrap();
        let table = f
            .find("LOCK TABLE _eventtime.\"p7_state\" IN ROW EXCLUSIVE MODE;")
            .unwrap();
        let check = f.find("current_setting('transaction_isolation')").unwrap();
        let stmt = f.find(&d.session_ingest_statement()).unwrap();
        assert!(check < table && table < lock && lock < stmt);
        // The key hash of the lock is the state's.
        assert!(f.contains(
            "b.bucket IN (SELECT pg_catalog.hash_record(ROW(r.\"store\")) & 1023 FROM new_rows r)"
        ));
        assert!(d.create_tables()[0]
            .contains("GENERATED ALWAYS AS (pg_catalog.hash_record(ROW(\"store\"))) STORED"));
        // The ledger has no window, the history a session's both bounds.
        let tables = d.create_tables().join(";\n");
        assert!(
            tables.contains("CREATE UNIQUE INDEX ON _eventtime.\"p7_ids\" (\"store\", event_id)")
        );
        assert!(tables.contains("(window_start, \"store\", window_end, version DESC)"));
        d.keys.clear();
        assert!(d
            .create_trigger_function()
            .contains("b.bucket IN (SELECT 0 & 1023 FROM new_rows r)"));
        assert!(d
            .session_ingest_statement()
            .contains("OVER (ORDER BY g.ws, g.we ROWS UNBOUNDED PRECEDING)"));
    }

    #[test]
    fn a_row_of_several_windows_takes_the_statement_for_many_rows() {
        let mut d = def();
        d.window = WindowSpec::Calendar {
            size: Period::Days(7),
            slide: Period::Days(1),
            origin: 0,
            time_zone: "UTC".into(),
        };
        let f = d.create_trigger_function();
        assert!(!f.contains("IF v_row.n = 1 THEN"));
        assert!(f.contains("LEFT JOIN LATERAL _eventtime.calendar(n.\"ordered_at\", 7, 1, false, 0, 'UTC') w ON true"));
        // Single-window calendar pipelines keep the single-row path.
        d.window = WindowSpec::Calendar {
            size: Period::Days(7),
            slide: Period::Days(7),
            origin: 0,
            time_zone: "UTC".into(),
        };
        assert!(d.create_trigger_function().contains("IF v_row.n = 1 THEN"));
    }
}
