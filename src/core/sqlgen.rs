//! The SQL each pipeline runs, generated from its definition. One pipeline owns four tables in
//! the internal schema (window state, event-id ledger, history, refused rows), one trigger
//! function on its source table and four views beside the source table. Every statement here is
//! set-based: the ingest statement handles a whole transition table, the advance statements a
//! whole range of windows.
//!
//! Names are always quoted with [`quote_ident`]; values reach the SQL as numbers formatted here or
//! as parameters, never as user text.

use super::aggregates::{AggFunc, AvgKind};
use super::ident::{quote_ident, quote_literal};
pub use super::model::{Column, PipelineDef};
use super::window::WindowSpec;

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
];

/// Prefix of the internal columns of the window state; user names may not start with it.
pub const INTERNAL_PREFIX: &str = "_et_";

/// The window start each row gets in the ingest statement, beside the source columns; source
/// tables may not have a column of that name.
pub const WINDOW_START_COLUMN: &str = "_et_window_start";

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

/// How an ingest statement of several rows writes the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ledger {
    /// `ON CONFLICT DO NOTHING`: duplicates are found and counted.
    Dedup,
    /// A plain insert that fails on the first duplicate: no probe of the index before each entry.
    Fresh,
}

/// The views of a pipeline, by suffix.
pub const VIEW_SUFFIXES: &[&str] = &["_history", "_latest", "_sealed", "_refused"];

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

    fn size(&self) -> String {
        duration_literal(self.window.size())
    }

    fn late(&self) -> String {
        duration_literal(self.lateness)
    }

    /// The event time `et` as it may move the `watermark_lag` source: NULL when it is later than
    /// `now()` plus `max_ahead` (a row from the future joins its window but moves no watermark).
    fn lag_event_time(&self, et: &str) -> String {
        match (self.watermark_lag, self.max_ahead) {
            (Some(_), Some(ahead)) => {
                format!(
                    "CASE WHEN {et} <= pg_catalog.now() + {} THEN {et} END",
                    duration_literal(ahead)
                )
            }
            _ => et.to_string(),
        }
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

    fn key_defs(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| format!("{} {}", quote_ident(&k.name), k.type_name))
            .collect()
    }

    fn acc(i: usize) -> String {
        quote_ident(&format!("{INTERNAL_PREFIX}a{i}"))
    }

    fn acc_n(i: usize) -> String {
        quote_ident(&format!("{INTERNAL_PREFIX}a{i}_n"))
    }

    fn arg_col(i: usize) -> String {
        quote_ident(&format!("{INTERNAL_PREFIX}v{i}"))
    }

    fn acc_defs(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, a) in self.aggs.iter().enumerate() {
            out.push(format!("{} {}", Self::acc(i), a.acc_type));
            if a.avg_kind.is_some() {
                out.push(format!("{} bigint NOT NULL", Self::acc_n(i)));
            }
        }
        out
    }

    fn acc_cols(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, a) in self.aggs.iter().enumerate() {
            out.push(Self::acc(i));
            if a.avg_kind.is_some() {
                out.push(Self::acc_n(i));
            }
        }
        out
    }

    /// Partial aggregates over the accepted rows of one statement, grouped by key and window.
    fn partials(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, a) in self.aggs.iter().enumerate() {
            let v = Self::arg_col(i);
            out.push(match (a.spec.func, a.spec.arg.is_some(), a.avg_kind) {
                (AggFunc::Count, false, _) => "count(*)".to_string(),
                (AggFunc::Count, true, _) => format!("count({v})"),
                (AggFunc::Sum, _, _) => format!("sum({v})"),
                (AggFunc::Min, _, _) => format!("min({v})"),
                (AggFunc::Max, _, _) => format!("max({v})"),
                (AggFunc::Avg, _, Some(AvgKind::Numeric)) => format!("sum({v})::numeric"),
                (AggFunc::Avg, _, Some(AvgKind::Float)) => format!("sum({v}::double precision)"),
                (AggFunc::Avg, _, _) => format!("sum({v})"),
            });
            if a.avg_kind.is_some() {
                out.push(format!("count({v})"));
            }
        }
        out
    }

    /// `SET` items that merge a statement's partials (`excluded`) into the stored state (`s`).
    fn merges(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, a) in self.aggs.iter().enumerate() {
            let c = Self::acc(i);
            out.push(match a.spec.func {
                AggFunc::Count => format!("{c} = s.{c} + excluded.{c}"),
                AggFunc::Min => format!("{c} = LEAST(s.{c}, excluded.{c})"),
                AggFunc::Max => format!("{c} = GREATEST(s.{c}, excluded.{c})"),
                AggFunc::Sum | AggFunc::Avg => format!(
                    "{c} = CASE WHEN s.{c} IS NULL THEN excluded.{c} WHEN excluded.{c} IS NULL THEN s.{c} ELSE s.{c} + excluded.{c} END"
                ),
            });
            if a.avg_kind.is_some() {
                let n = Self::acc_n(i);
                out.push(format!("{n} = s.{n} + excluded.{n}"));
            }
        }
        out
    }

    /// The published values computed from a state row aliased `u`.
    fn finals(&self, u: &str) -> Vec<String> {
        self.aggs
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let c = format!("{u}.{}", Self::acc(i));
                let n = format!("{u}.{}", Self::acc_n(i));
                let e = match a.avg_kind {
                    None => c,
                    Some(AvgKind::Interval) => format!("{c} / NULLIF({n}, 0)::double precision"),
                    Some(_) => format!("{c} / NULLIF({n}, 0)"),
                };
                format!("({e})::{}", a.result_type)
            })
            .collect()
    }

    fn alias_cols(&self) -> Vec<String> {
        self.aggs
            .iter()
            .map(|a| quote_ident(&a.spec.alias))
            .collect()
    }

    /// Tables and indexes, in creation order.
    pub fn create_tables(&self) -> Vec<String> {
        let keys = self.key_names(None);
        let kd = prefix(&self.key_defs());
        let mut out = vec![
            format!(
                "CREATE TABLE {} ({kd}window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, \
                 version integer NOT NULL DEFAULT 0, {INTERNAL_PREFIX}n bigint NOT NULL{}) WITH (fillfactor = 70)",
                self.table("state"),
                self.acc_defs().iter().map(|d| format!(", {d}")).collect::<String>()
            ),
            format!(
                "CREATE UNIQUE INDEX ON {} ({}window_start) NULLS NOT DISTINCT",
                self.table("state"),
                prefix(&keys)
            ),
            format!("CREATE INDEX ON {} (window_end)", self.table("state")),
            format!(
                "CREATE TABLE {} ({kd}window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, \
                 version integer NOT NULL, kind text NOT NULL, {}sealed boolean GENERATED ALWAYS AS (version = 1) STORED, \
                 watermark timestamptz NOT NULL, fired_at timestamptz NOT NULL DEFAULT now())",
                self.table("history"),
                self.aggs.iter().map(|a| format!("{} {}, ", quote_ident(&a.spec.alias), a.result_type)).collect::<String>()
            ),
            format!(
                "CREATE UNIQUE INDEX ON {} ({}window_start, version) NULLS NOT DISTINCT",
                self.table("history"),
                prefix(&keys)
            ),
            format!(
                "CREATE TABLE {} ({kd}event_id {}, event_time timestamptz NOT NULL, \"row\" jsonb NOT NULL, \
                 window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, deadline timestamptz NOT NULL, \
                 watermark timestamptz NOT NULL, refused_at timestamptz NOT NULL DEFAULT now())",
                self.table("refused"),
                self.event_id.as_ref().map(|c| c.type_name.as_str()).unwrap_or("text")
            ),
        ];
        if let Some(eid) = &self.event_id {
            out.push(format!(
                "CREATE TABLE {} (window_start timestamptz NOT NULL, {kd}event_id {} NOT NULL)",
                self.table("ids"),
                eid.type_name
            ));
            out.push(format!(
                "CREATE UNIQUE INDEX ON {} (window_start, {}event_id) NULLS NOT DISTINCT",
                self.table("ids"),
                prefix(&keys)
            ));
        }
        // History and refused rows are written by the pipeline only.
        for (t, what) in [("history", "history"), ("refused", "refused rows")] {
            out.push(format!(
                "CREATE TRIGGER read_only BEFORE UPDATE OR DELETE ON {} FOR EACH ROW EXECUTE FUNCTION {INTERNAL_SCHEMA}.refuse_change({}, {})",
                self.table(t),
                quote_literal(&self.name),
                quote_literal(what)
            ));
            out.push(format!(
                "CREATE TRIGGER read_only_truncate BEFORE TRUNCATE ON {} FOR EACH STATEMENT EXECUTE FUNCTION {INTERNAL_SCHEMA}.refuse_change({}, {})",
                self.table(t),
                quote_literal(&self.name),
                quote_literal(what)
            ));
        }
        out
    }

    /// `wm`: the pipeline's watermark and the window starts after which a row is open or late,
    /// read `FOR SHARE` (see *Locks* in the design note).
    fn watermark_cte(&self) -> String {
        let (size, late) = (self.size(), self.late());
        format!(
            "wm AS MATERIALIZED (\n\
               SELECT p.watermark AS w,\n\
                      coalesce(p.watermark - {size}, '-infinity') AS t_open,\n\
                      coalesce(p.watermark - {size} - {late}, '-infinity') AS t_late\n\
               FROM {INTERNAL_SCHEMA}.pipeline p WHERE p.id = {id} FOR SHARE\n\
             ),\n",
            id = self.id,
        )
    }

    /// The landing of a row whose window starts at `ws`, against `wm`: 1 open, 2 late, 3 refused,
    /// and [`NO_WINDOW`] for a row whose event time has no window (NULL, infinite, or out of
    /// range): nothing is written for it, and the trigger function raises its error after the
    /// statement, which undoes the whole `INSERT`.
    fn landing_case(ws: &str) -> String {
        format!(
            "CASE WHEN {ws} IS NULL THEN {NO_WINDOW} WHEN {ws} > wm.t_open THEN 1 WHEN {ws} > wm.t_late THEN 2 ELSE 3 END"
        )
    }

    /// The start of the window of event time `et`; NULL when it has none.
    fn window_start_of(&self, et: &str) -> String {
        let (size_us, origin_us) = match self.window {
            WindowSpec::Tumbling { size, origin } => (size, origin),
        };
        format!("{INTERNAL_SCHEMA}.tumble_start({et}, {size_us}, {origin_us})")
    }

    /// The start of the statement for many rows: `wm`, and `cls`, each row of the transition
    /// table `new_rows` with its window and landing.
    fn ingest_prelude(&self) -> String {
        let kr = prefix(&self.key_names(Some("r")));
        let et = quote_ident(&self.event_time);
        let ws = quote_ident(WINDOW_START_COLUMN);
        let args: String = self
            .aggs
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                a.spec
                    .arg
                    .as_ref()
                    .map(|c| format!("r.{} AS {}, ", quote_ident(c), Self::arg_col(i)))
            })
            .collect();
        let eid = match &self.event_id {
            Some(c) => format!("r.{}", quote_ident(&c.name)),
            None => "NULL::text".to_string(),
        };
        format!(
            "WITH /* pg_eventtime ingest */ {wm}\
             cls AS MATERIALIZED (\n\
               SELECT {kr}r.{ws}, {eid} AS _et_eid, r.{et} AS _et_et, {args}\n\
                      {landing} AS _et_landing,\n\
                      CASE WHEN r.{ws} <= wm.t_late THEN to_jsonb(r) - '{ws_name}' END AS _et_doc\n\
               FROM (SELECT n.*, {start} AS {ws} FROM new_rows n OFFSET 0) r\n\
               CROSS JOIN wm\n\
             ),\n",
            wm = self.watermark_cte(),
            landing = Self::landing_case(&format!("r.{ws}")),
            start = self.window_start_of(&format!("n.{et}")),
            ws_name = WINDOW_START_COLUMN,
        )
    }

    /// The upsert of `rows` (key, window start, window end, 1 for a late row or batch and 0
    /// otherwise, row count and one partial per accumulator column, in that order) into the
    /// state: a late one moves `version` to the next version.
    fn state_upsert(&self, rows: &str, returning: &str) -> String {
        let k = prefix(&self.key_names(None));
        format!(
            "INSERT INTO {state} AS s ({k}window_start, window_end, version, {INTERNAL_PREFIX}n{acc_list})\n\
             {rows}\n\
             ON CONFLICT ({k}window_start) DO UPDATE SET\n\
               version = CASE WHEN excluded.version > 0 THEN greatest(s.version, 1) + 1 ELSE s.version END, {INTERNAL_PREFIX}n = s.{INTERNAL_PREFIX}n + excluded.{INTERNAL_PREFIX}n{merges}\n\
             RETURNING {returning}",
            state = self.table("state"),
            acc_list = self.acc_cols().iter().map(|c| format!(", {c}")).collect::<String>(),
            merges = self.merges().iter().map(|m| format!(", {m}")).collect::<String>(),
        )
    }

    /// A late version of each state row `u` that `from` (a FROM clause and its conditions)
    /// yields, written under `watermark`.
    fn late_version_insert(&self, from: &str, watermark: &str) -> String {
        format!(
            "INSERT INTO {history} ({k}window_start, window_end, version, kind, {aliases}watermark)\n\
             SELECT {ku}u.window_start, u.window_end, u.version, 'late', {finals}{watermark}\n\
             {from}",
            history = self.table("history"),
            k = prefix(&self.key_names(None)),
            ku = prefix(&self.key_names(Some("u"))),
            aliases = prefix(&self.alias_cols()),
            finals = prefix(&self.finals("u")),
        )
    }

    /// Refused rows from `select`, whose columns are: keys, event id, event time, the row as
    /// `jsonb`, and the window start `ws` it yields; `watermark` is the refusing watermark.
    fn refused_insert(&self, select: &str, ws: &str, watermark: &str, from: &str) -> String {
        let (size, late) = (self.size(), self.late());
        format!(
            "INSERT INTO {refused} ({k}event_id, event_time, \"row\", window_start, window_end, deadline, watermark)\n\
             SELECT {select}, {ws}, {ws} + {size}, {ws} + {size} + {late}, {watermark}\n\
             {from}",
            refused = self.table("refused"),
            k = prefix(&self.key_names(None)),
        )
    }

    /// The set-based statement run once per ingest statement of several rows against the
    /// transition table `new_rows`. It returns one row: accepted, late, refused, duplicates, and
    /// the greatest event time of the statement.
    pub fn ingest_statement(&self) -> String {
        self.ingest_statement_for(Ledger::Dedup)
    }

    /// [`Self::ingest_statement`] with the ledger insert of `ledger`.
    fn ingest_statement_for(&self, ledger: Ledger) -> String {
        let k = prefix(&self.key_names(None));
        let kc = prefix(&self.key_names(Some("c")));
        let ws = quote_ident(WINDOW_START_COLUMN);
        let mut sql = self.ingest_prelude();
        sql += &format!(
            "cls_n AS MATERIALIZED (\n\
                   SELECT count(*) AS rows, count(_et_eid) AS ids, max({max_et}) AS max_et, max(_et_landing) AS max_landing,\n\
                          count(*) FILTER (WHERE _et_landing = {NO_WINDOW}) AS bad,\n\
                          (array_agg(_et_et) FILTER (WHERE _et_landing = {NO_WINDOW}))[1] AS bad_et\n\
                   FROM cls\n\
                 ),\n",
            max_et = self.lag_event_time("_et_et"),
        );
        if self.event_id.is_some() && ledger == Ledger::Fresh {
            // Every id must be new: a duplicate anywhere fails the statement with a unique
            // violation, and the trigger function then runs the statement that dedups.
            sql += &format!(
                "fresh AS (\n\
                   INSERT INTO {ids} (window_start, {k}event_id)\n\
                   SELECT {ws}, {k}_et_eid FROM cls WHERE _et_eid IS NOT NULL AND _et_landing < {NO_WINDOW} ORDER BY {ws}, {k}_et_eid\n\
                 ),\n\
                 kept AS NOT MATERIALIZED (SELECT * FROM cls),\n",
                ids = self.table("ids"),
            );
        } else if self.event_id.is_some() {
            let key_match: String = self
                .keys
                .iter()
                .map(|c| {
                    format!(
                        " AND f.{0} IS NOT DISTINCT FROM c.{0}",
                        quote_ident(&c.name)
                    )
                })
                .collect();
            // The ledger holds every (window, key, id) the pipeline has seen, refused rows included,
            // for the pipeline's lifetime. When every row with an id was new (the common case),
            // every row is kept; otherwise the first row of each new id is.
            sql += &format!(
                "fresh AS (\n\
                   INSERT INTO {ids} AS i (window_start, {k}event_id)\n\
                   SELECT {ws}, {k}_et_eid FROM cls WHERE _et_eid IS NOT NULL AND _et_landing < {NO_WINDOW} ORDER BY {ws}, {k}_et_eid\n\
                   ON CONFLICT DO NOTHING\n\
                   RETURNING i.window_start, {ki}i.event_id\n\
                 ),\n\
                 all_fresh AS MATERIALIZED (\n\
                   SELECT (SELECT count(*) FROM fresh) = (SELECT ids FROM cls_n) AS yes\n\
                 ),\n\
                 kept AS MATERIALIZED (\n\
                   SELECT c.* FROM cls c WHERE (SELECT yes FROM all_fresh)\n\
                   UNION ALL\n\
                   SELECT d.* FROM (\n\
                     SELECT DISTINCT ON (c.{ws}, {kc}c._et_eid) c.*\n\
                     FROM cls c JOIN fresh f ON f.window_start = c.{ws} AND f.event_id = c._et_eid{key_match}\n\
                     WHERE NOT (SELECT yes FROM all_fresh)\n\
                     ORDER BY c.{ws}, {kc}c._et_eid\n\
                   ) d\n\
                   UNION ALL\n\
                   SELECT c.* FROM cls c WHERE c._et_eid IS NULL AND NOT (SELECT yes FROM all_fresh)\n\
                 ),\n",
                ids = self.table("ids"),
                ki = prefix(&self.key_names(Some("i"))),
            );
        } else {
            sql += "kept AS NOT MATERIALIZED (SELECT * FROM cls),\n";
        }
        let accs = self.acc_cols();
        sql += &format!(
            "batch AS (\n\
               SELECT {k}{ws}, max(_et_landing) AS _et_landing, count(*) AS _et_n{partials}\n\
               FROM kept WHERE _et_landing < 3 GROUP BY {k}{ws}\n\
             ),\n",
            partials = self
                .partials()
                .iter()
                .enumerate()
                .map(|(i, p)| format!(", {p} AS _et_p{i}"))
                .collect::<String>(),
        );
        // The refused rows' scan is skipped when no row of the statement is past its grace.
        let refused = self.refused_insert(
            &format!("{kc}c._et_eid, c._et_et, c._et_doc"),
            &format!("c.{ws}"),
            "wm.w",
            "FROM kept c CROSS JOIN wm WHERE (SELECT max_landing FROM cls_n) = 3 AND c._et_landing = 3\nRETURNING 1",
        );
        let up = self.state_upsert(
            &format!(
                "SELECT {k}{ws}, {ws} + {size}, CASE WHEN _et_landing = 2 THEN 1 ELSE 0 END, _et_n{partial_cols}\n\
                 FROM batch ORDER BY {ws}{k_after}",
                size = self.size(),
                partial_cols = (0..accs.len()).map(|i| format!(", _et_p{i}")).collect::<String>(),
                k_after = self.key_names(None).iter().map(|c| format!(", {c}")).collect::<String>(),
            ),
            "s.*",
        );
        let late_versions = self.late_version_insert(
            "FROM up u CROSS JOIN wm WHERE u.window_end <= wm.w\nRETURNING 1",
            "wm.w",
        );
        // The counts come from the groups and the refused rows, not from another scan of the rows:
        // all rows of a group share its window, so its landing.
        sql += &format!(
            "refused AS (\n{refused}\n),\n\
             up AS (\n{up}\n),\n\
             late_versions AS (\n{late_versions}\n),\n\
             counts AS MATERIALIZED (\n\
               SELECT coalesce(sum(_et_n) FILTER (WHERE _et_landing = 1), 0)::bigint AS accepted,\n\
                      coalesce(sum(_et_n) FILTER (WHERE _et_landing = 2), 0)::bigint AS late,\n\
                      (SELECT count(*) FROM refused) AS refused\n\
               FROM batch\n\
             )\n\
             SELECT accepted, late, refused, (SELECT rows FROM cls_n) - accepted - late - refused, (SELECT max_et FROM cls_n),\n\
                    (SELECT bad FROM cls_n), (SELECT bad_et FROM cls_n) FROM counts"
        );
        sql
    }

    /// The source columns a single-row statement reads into the record `v_row` of the trigger
    /// function: keys, event id, event time and aggregate arguments, each once. Field `c<i>` holds
    /// column `i` of this list. A record, not variables declared `%TYPE` after the source
    /// columns, so that the function names no source table and survives its renaming.
    fn one_row_columns(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        let names = self
            .keys
            .iter()
            .map(|k| k.name.as_str())
            .chain(self.event_id.iter().map(|c| c.name.as_str()))
            .chain(std::iter::once(self.event_time.as_str()))
            .chain(self.aggs.iter().filter_map(|a| a.spec.arg.as_deref()));
        for n in names {
            if !out.contains(&n) {
                out.push(n);
            }
        }
        out
    }

    /// The field that holds source column `name` in the single-row path, as the function's SQL
    /// names it.
    fn one_row_var(&self, name: &str) -> String {
        let i = self
            .one_row_columns()
            .iter()
            .position(|c| *c == name)
            .expect("column read by the single-row path");
        format!("{FN_LABEL}.v_row.c{i}")
    }

    /// The partial aggregates of [`Self::partials`] over one row whose aggregate argument `c` is
    /// the expression `arg(c)`: the aggregate of one value is the value in the accumulator's type
    /// (NULL for NULL), and a count is 1 or 0.
    fn one_row_partials(&self, arg: impl Fn(&str) -> String) -> Vec<String> {
        let mut out = Vec::new();
        for a in &self.aggs {
            let v = a.spec.arg.as_deref().map(&arg).unwrap_or_default();
            let present = format!("CASE WHEN {v} IS NULL THEN 0::bigint ELSE 1::bigint END");
            out.push(match (a.spec.func, a.spec.arg.is_some()) {
                (AggFunc::Count, false) => "1::bigint".to_string(),
                (AggFunc::Count, true) => present.clone(),
                _ => format!("({v})::{}", a.acc_type),
            });
            if a.avg_kind.is_some() {
                out.push(present);
            }
        }
        out
    }

    /// The statement for a transition table of exactly one row, the single-row `INSERT`, whose
    /// columns the trigger function has read into its variables: the watermark, the ledger
    /// insert and the state upsert, and nothing else, so a short plan with few nodes to start.
    /// It returns the window start, the landing, the watermark, whether the row is kept (not a
    /// duplicate) and the `ctid` of the state row it upserted; the trigger function writes the
    /// rare rest (a late version, a refused row) only when the landing asks for it.
    pub fn ingest_one_statement(&self) -> String {
        let k = prefix(&self.key_names(None));
        let vk = prefix(
            &self
                .keys
                .iter()
                .map(|c| self.one_row_var(&c.name))
                .collect::<Vec<_>>(),
        );
        let ws = quote_ident(WINDOW_START_COLUMN);
        let mut sql = format!(
            "WITH /* pg_eventtime ingest */ {wm}\
             c AS MATERIALIZED (\n\
               SELECT x.{ws}, {landing} AS _et_landing, wm.w\n\
               FROM (SELECT {start} AS {ws}) x CROSS JOIN wm\n\
             ),\n",
            wm = self.watermark_cte(),
            landing = Self::landing_case(&format!("x.{ws}")),
            start = self.window_start_of(&self.one_row_var(&self.event_time)),
        );
        let kept = match &self.event_id {
            Some(eid) => {
                let v = self.one_row_var(&eid.name);
                sql += &format!(
                    "fresh AS (\n\
                       INSERT INTO {ids} (window_start, {k}event_id)\n\
                       SELECT c.{ws}, {vk}{v} FROM c WHERE {v} IS NOT NULL AND c._et_landing < {NO_WINDOW}\n\
                       ON CONFLICT DO NOTHING\n\
                       RETURNING 1\n\
                     ),\n",
                    ids = self.table("ids"),
                );
                format!("({v} IS NULL OR EXISTS (SELECT FROM fresh))")
            }
            None => "true".to_string(),
        };
        let up = self.state_upsert(
            &format!(
                "SELECT {vk}c.{ws}, c.{ws} + {size}, CASE WHEN c._et_landing = 2 THEN 1 ELSE 0 END, 1{partials}\n\
                 FROM c WHERE c._et_landing < 3 AND {kept}",
                size = self.size(),
                partials = self.one_row_partials(|c| self.one_row_var(c)).iter().map(|p| format!(", {p}")).collect::<String>(),
            ),
            "s.ctid",
        );
        sql += &format!("up AS (\n{up}\n)\nSELECT c.{ws}, c._et_landing, c.w, {kept}, (SELECT ctid FROM up) FROM c");
        sql
    }

    /// The PL/pgSQL of the single-row path, after the row's columns are in their variables:
    /// [`Self::ingest_one_statement`], then the counts, and the late version or the refused row
    /// when the landing asks for one.
    fn one_row_block(&self) -> String {
        let kr = prefix(&self.key_names(Some("r")));
        let eid = match &self.event_id {
            Some(c) => format!("r.{}", quote_ident(&c.name)),
            None => "NULL::text".to_string(),
        };
        format!(
            "{stmt}\n\
             INTO v_ws, v_landing, v_w, v_kept, v_tid;\n\
             n_accepted := 0; n_late := 0; n_refused := 0; n_duplicates := 0; max_event_time := {max_et};\n\
             IF v_landing = {NO_WINDOW} THEN\n\
               n_bad := 1;\n\
               v_bad := {et};\n\
             ELSIF NOT v_kept THEN\n\
               n_duplicates := 1;\n\
             ELSIF v_landing = 1 THEN\n\
               n_accepted := 1;\n\
             ELSIF v_landing = 2 THEN\n\
               n_late := 1;\n\
               {late};\n\
             ELSE\n\
               n_refused := 1;\n\
               {refused};\n\
             END IF;\n",
            stmt = self.ingest_one_statement(),
            max_et = self.lag_event_time(&self.one_row_var(&self.event_time)),
            et = self.one_row_var(&self.event_time),
            late = self.late_version_insert(&format!("FROM {} u WHERE u.ctid = {FN_LABEL}.v_tid", self.table("state")), &format!("{FN_LABEL}.v_w")),
            refused = self.refused_insert(
                &format!("{kr}{eid}, r.{}, to_jsonb(r)", quote_ident(&self.event_time)),
                &format!("{FN_LABEL}.v_ws"),
                &format!("{FN_LABEL}.v_w"),
                "FROM new_rows r",
            ),
        )
    }

    /// The PL/pgSQL that runs a statement of several rows: [`Self::ingest_statement`], after a
    /// try of the statement with a plain ledger insert (`Ledger::Fresh`) when the statement has at
    /// least [`FRESH_BULK_ROWS`] rows and no event id is in the ledger for any window between its
    /// first and its last. That is the bulk load of new periods, where every id is new and the
    /// index probe before each entry of `ON CONFLICT` is most of the statement's cost. A
    /// duplicate (in the statement, in the ledger, or from a concurrent statement, whose entry the
    /// unique index waits for) fails the try with a unique violation; its subtransaction is rolled
    /// back and the statement that dedups runs instead.
    fn bulk_block(&self) -> String {
        let stmt = format!(
            "{}\nINTO n_accepted, n_late, n_refused, n_duplicates, max_event_time, n_bad, v_bad;\n",
            self.ingest_statement()
        );
        let Some(_) = &self.event_id else {
            return format!("ELSE\n{stmt}");
        };
        // One copy of the statement that dedups, run when the try did not happen or failed.
        let et = quote_ident(&self.event_time);
        format!(
            "ELSE\n\
             IF (CASE WHEN v_row.n >= {FRESH_BULK_ROWS} THEN (\n\
               SELECT NOT EXISTS (SELECT FROM {ids} i WHERE i.window_start BETWEEN {lo} AND {hi})\n\
               FROM (SELECT min(n.{et}) AS lo, max(n.{et}) AS hi FROM new_rows n) m\n\
             ) ELSE false END) THEN\n\
               BEGIN\n\
             {fresh}\n\
               INTO n_accepted, n_late, n_refused, n_duplicates, max_event_time, n_bad, v_bad;\n\
               v_done := true;\n\
               EXCEPTION WHEN unique_violation THEN\n\
                 v_done := false;\n\
               END;\n\
             END IF;\n\
             IF NOT v_done THEN\n\
             {stmt}\
             END IF;\n",
            ids = self.table("ids"),
            lo = self.window_start_of("m.lo"),
            hi = self.window_start_of("m.hi"),
            fresh = self.ingest_statement_for(Ledger::Fresh),
        )
    }

    /// The trigger function that runs, for each INSERT or COPY statement on the source table,
    /// [`Self::ingest_statement`], or for a single row [`Self::one_row_block`]; records
    /// duplicates, and hands the counts to `eventtime.ingest` when it is the caller.
    ///
    /// It is `SECURITY DEFINER`, owned by the pipeline's owner (see [`Self::hand_over`]), and its
    /// first statement makes the rest a security-restricted operation (`_eventtime.restrict()`):
    /// whoever inserts, the pipeline's statements run as the owner of the tables they write,
    /// never above.
    ///
    /// The first query reads the number of rows of the transition table (up to
    /// [`FRESH_BULK_ROWS`]) and the columns of its first row into the record `v_row`.
    ///
    /// With a watermark lag, the statement ends with an advance, which needs the advance's locks.
    /// It checks the isolation level and takes the state table's EXCLUSIVE lock before anything
    /// else, never as an upgrade from the ROW EXCLUSIVE lock the ingest statement takes (two
    /// ingest transactions upgrading would deadlock), and the ingest statement that follows takes
    /// a fresh snapshot after it.
    pub fn create_trigger_function(&self) -> String {
        let (before, after) = match self.watermark_lag {
            Some(_) => (
                format!(
                    "IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN\n\
                       PERFORM {INTERNAL_SCHEMA}.refuse_lag_isolation({id});\n\
                     END IF;\n\
                     LOCK TABLE {state} IN EXCLUSIVE MODE;\n",
                    id = self.id,
                    state = self.table("state"),
                ),
                format!("PERFORM {INTERNAL_SCHEMA}.advance_by_watermark_lag({id}, max_event_time);\n", id = self.id),
            ),
            None => (String::new(), String::new()),
        };
        let reads: String = self
            .one_row_columns()
            .iter()
            .enumerate()
            .map(|(i, c)| format!(", r.{} AS c{i}", quote_ident(c)))
            .collect();
        format!(
            "CREATE FUNCTION {f}() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER\n\
             SET search_path = pg_catalog, pg_temp SET jit = off AS $eventtime$\n\
             #variable_conflict use_column\n\
             <<{FN_LABEL}>>\n\
             DECLARE\n  n_accepted bigint; n_late bigint; n_refused bigint; n_duplicates bigint; max_event_time timestamptz;\n\
               v_row record; v_ws timestamptz; v_landing integer; v_w timestamptz; v_kept boolean; v_tid tid; v_done boolean := false;\n\
               v_restricted boolean; n_bad bigint := 0; v_bad timestamptz;\n\
             BEGIN\n\
             v_restricted := {INTERNAL_SCHEMA}.restrict();\n\
             {before}\
             SELECT (SELECT count(*) FROM (SELECT FROM new_rows LIMIT {FRESH_BULK_ROWS}) n) AS n{reads}\n\
             INTO v_row FROM new_rows r LIMIT 1;\n\
             IF v_row.n = 1 THEN\n\
             {one}\
             {bulk}\
             END IF;\n\
             IF n_bad > 0 THEN\n\
               PERFORM {INTERNAL_SCHEMA}.raise_event_time_error({id}, {FN_LABEL}.v_bad);\n\
             END IF;\n\
             IF n_duplicates > 0 THEN\n\
               INSERT INTO {INTERNAL_SCHEMA}.duplicate_counts (pipeline_id, duplicates) VALUES ({id}, n_duplicates);\n\
             END IF;\n\
             IF current_setting('{COLLECT_COUNTS}', true) = 'on' THEN\n\
               PERFORM {INTERNAL_SCHEMA}.note_counts({id}, n_accepted, n_late, n_refused, n_duplicates);\n\
             END IF;\n\
             {after}\
             RETURN NULL;\n\
             END {FN_LABEL}\n$eventtime$",
            f = self.trigger_function(),
            one = self.one_row_block(),
            bulk = self.bulk_block(),
            id = self.id,
        )
    }

    pub fn create_trigger(&self) -> String {
        format!(
            "CREATE TRIGGER {} AFTER INSERT ON {} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {}()",
            self.trigger_name(),
            self.source,
            self.trigger_function()
        )
    }

    /// The views, typed with the key and aggregate columns.
    pub fn create_views(&self) -> Vec<String> {
        let k = prefix(&self.key_names(None));
        let aliases = prefix(&self.alias_cols());
        let history_cols = format!(
            "{k}window_start, window_end, version, kind, {aliases}sealed, watermark, fired_at"
        );
        let mut out = vec![
            format!("CREATE VIEW {} AS SELECT {history_cols} FROM {}", self.view("_history"), self.table("history")),
            format!(
                "CREATE VIEW {} AS SELECT DISTINCT ON ({k}window_start) {history_cols} FROM {} ORDER BY {k}window_start, version DESC",
                self.view("_latest"),
                self.table("history")
            ),
            format!(
                "CREATE VIEW {} AS SELECT {history_cols} FROM {} WHERE version = 1",
                self.view("_sealed"),
                self.table("history")
            ),
            format!(
                "CREATE VIEW {} AS SELECT {k}event_id, event_time, \"row\", window_start, window_end, deadline, watermark, refused_at FROM {}",
                self.view("_refused"),
                self.table("refused")
            ),
        ];
        // Simple views would pass writes through to the tables: nobody writes history or
        // refused rows but the pipeline.
        for suffix in VIEW_SUFFIXES {
            let what = if *suffix == "_refused" {
                "refused rows"
            } else {
                "history"
            };
            out.push(format!(
                "CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON {} FOR EACH ROW EXECUTE FUNCTION {INTERNAL_SCHEMA}.refuse_change({}, {})",
                self.view(suffix),
                quote_literal(&self.name),
                quote_literal(what)
            ));
        }
        out
    }

    /// Purges the state of every window whose deadline is at or before `$1`. Runs after
    /// [`Self::fire_statement`], so every purged window has fired. Returns the number of windows
    /// purged.
    pub fn purge_statement(&self) -> String {
        format!(
            "WITH gone AS (DELETE FROM {state} s WHERE s.window_end <= $1 - {late} RETURNING 1)\n\
             SELECT count(*) FROM gone",
            state = self.table("state"),
            late = self.late(),
        )
    }

    /// Writes the main firing (version 1) of every window with state that ends after the previous
    /// watermark `$2` (NULL before the first advance) and at or before the new one `$1`: exactly the
    /// windows this advance fires, so the state needs no mark. Returns the number of windows fired.
    pub fn fire_statement(&self) -> String {
        let k = prefix(&self.key_names(None));
        let kf = prefix(&self.key_names(Some("f")));
        format!(
            "WITH fired AS (\n\
               INSERT INTO {history} ({k}window_start, window_end, version, kind, {aliases}watermark)\n\
               SELECT {kf}f.window_start, f.window_end, 1, 'main', {finals}$1 FROM {state} f\n\
               WHERE f.window_end <= $1 AND ($2::timestamptz IS NULL OR f.window_end > $2)\n\
               RETURNING 1\n\
             )\n\
             SELECT count(*) FROM fired",
            state = self.table("state"),
            history = self.table("history"),
            aliases = prefix(&self.alias_cols()),
            finals = prefix(&self.finals("f")),
        )
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
            .chain(self.aggs.iter().filter_map(|a| a.spec.arg.as_deref()));
        for c in others {
            if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }

    /// The internal tables of the pipeline, by `what` (see [`internal_table`]).
    fn tables(&self) -> &'static [&'static str] {
        if self.event_id.is_some() {
            &["state", "ids", "history", "refused"]
        } else {
            &["state", "history", "refused"]
        }
    }

    /// Hands the internal tables and the trigger function, created by the catalog owner, to the
    /// pipeline's owner `owner` (a quoted role name): the trigger function, `SECURITY DEFINER`,
    /// then runs as that owner, and nobody but the trigger calls it.
    pub fn hand_over(&self, owner: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .tables()
            .iter()
            .map(|t| format!("ALTER TABLE {} OWNER TO {owner}", self.table(t)))
            .collect();
        out.push(format!(
            "REVOKE ALL ON FUNCTION {}() FROM PUBLIC",
            self.trigger_function()
        ));
        out.push(format!(
            "ALTER FUNCTION {}() OWNER TO {owner}",
            self.trigger_function()
        ));
        out
    }

    /// Everything the pipeline created, in an order that drops dependents first. The source
    /// table is left alone except for the trigger.
    pub fn drop_objects(&self, source_exists: bool) -> Vec<String> {
        let mut out: Vec<String> = VIEW_SUFFIXES
            .iter()
            .map(|s| format!("DROP VIEW IF EXISTS {}", self.view(s)))
            .collect();
        if source_exists {
            out.push(format!(
                "DROP TRIGGER IF EXISTS {} ON {}",
                self.trigger_name(),
                self.source
            ));
        }
        out.push(format!(
            "DROP FUNCTION IF EXISTS {}()",
            self.trigger_function()
        ));
        for t in self.tables() {
            out.push(format!("DROP TABLE IF EXISTS {}", self.table(t)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::aggregates::{AggSpec, AvgKind, ResolvedAgg};

    fn def() -> PipelineDef {
        PipelineDef {
            id: 7,
            name: "Orders \"daily\"".into(),
            source: "\"public\".\"orders\"".into(),
            view_schema: "public".into(),
            event_time: "ordered_at".into(),
            keys: vec![Column {
                name: "store".into(),
                type_name: "text".into(),
            }],
            event_id: Some(Column {
                name: "order_id".into(),
                type_name: "bigint".into(),
            }),
            window: WindowSpec::Tumbling {
                size: 86_400_000_000,
                origin: -946_684_800_000_000,
            },
            lateness: 86_400_000_000,
            watermark_lag: None,
            idle_timeout: None,
            clock_lag: None,
            max_ahead: Some(86_400_000_000),
            aggs: vec![
                ResolvedAgg {
                    spec: AggSpec {
                        func: AggFunc::Count,
                        arg: None,
                        alias: "orders".into(),
                    },
                    result_type: "bigint".into(),
                    acc_type: "bigint".into(),
                    avg_kind: None,
                },
                ResolvedAgg {
                    spec: AggSpec {
                        func: AggFunc::Avg,
                        arg: Some("amount".into()),
                        alias: "mean".into(),
                    },
                    result_type: "numeric".into(),
                    acc_type: "numeric".into(),
                    avg_kind: Some(AvgKind::Numeric),
                },
            ],
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
    fn ingest_dedups_only_with_an_event_id() {
        let mut d = def();
        assert!(d.ingest_statement().contains("ON CONFLICT DO NOTHING"));
        d.event_id = None;
        let sql = d.ingest_statement();
        assert!(!sql.contains("\"p7_ids\""));
        assert!(sql.contains("kept AS NOT MATERIALIZED (SELECT * FROM cls)"));
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
            d.partials().len()
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
            d.trigger_function()
        )));
        assert!(f.lines().nth(1).unwrap().contains("SET jit = off"));
    }

    #[test]
    fn bulk_loads_of_new_windows_try_the_plain_ledger_insert_first() {
        let mut d = def();
        let fresh = d.ingest_statement_for(Ledger::Fresh);
        let fresh_cte = &fresh[fresh.find("fresh AS (").unwrap()..fresh.find("kept AS").unwrap()];
        assert!(!fresh_cte.contains("ON CONFLICT") && !fresh_cte.contains("RETURNING"));
        assert!(fresh.contains("kept AS NOT MATERIALIZED (SELECT * FROM cls)"));
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
        for t in ["state", "ids", "history", "refused"] {
            assert!(
                handed.contains(&format!("ALTER TABLE {} OWNER TO {owner}", d.table(t))),
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
        assert_eq!(d.hand_over(owner).len(), 5);
    }

    #[test]
    fn no_keys_means_one_group_per_window() {
        let mut d = def();
        d.keys.clear();
        let sql = d.ingest_statement();
        assert!(sql.contains("GROUP BY \"_et_window_start\""));
        assert!(sql.contains("ON CONFLICT (window_start)"));
    }
}
