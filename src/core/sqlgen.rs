//! The SQL each pipeline runs, generated from its definition. One pipeline owns four tables in
//! the internal schema (window state, event-id ledger, history, refused rows), one trigger
//! function on its source table and four views beside the source table. Every statement here is
//! set-based: the ingest statement handles a whole transition table, the advance statements a
//! whole range of windows.
//!
//! Names are always quoted with [`quote_ident`]; values reach the SQL as numbers formatted here or
//! as parameters, never as user text.

use super::aggregates::{AggFunc, AvgKind, ResolvedAgg};
use super::ident::{quote_ident, quote_literal};
use super::window::WindowSpec;

pub const INTERNAL_SCHEMA: &str = "_eventtime";

/// Column names the extension puts beside key and aggregate columns in its tables and views.
pub const RESERVED_COLUMNS: &[&str] = &[
    "window_start", "window_end", "version", "kind", "sealed", "watermark", "fired_at",
    "event_id", "event_time", "row", "deadline", "refused_at",
];

/// Prefix of the internal columns of the window state; user names may not start with it.
pub const INTERNAL_PREFIX: &str = "_et_";

/// The window start each row gets in the ingest statement, beside the source columns; source
/// tables may not have a column of that name.
pub const WINDOW_START_COLUMN: &str = "_et_window_start";

/// The setting `eventtime.ingest` turns on while its INSERT runs, so that the trigger hands it the
/// counts; plain INSERT and COPY statements skip that call.
pub const COLLECT_COUNTS: &str = "pg_eventtime.collect_counts";

/// The views of a pipeline, by suffix.
pub const VIEW_SUFFIXES: &[&str] = &["_history", "_latest", "_sealed", "_refused"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// The type as `format_type` prints it, typmod included.
    pub type_name: String,
}

#[derive(Debug, Clone)]
pub struct PipelineDef {
    pub id: i32,
    pub name: String,
    /// The source table, schema-qualified and quoted.
    pub source: String,
    /// The schema of the source table, where the views go.
    pub view_schema: String,
    pub event_time: String,
    pub keys: Vec<Column>,
    pub event_id: Option<Column>,
    pub window: WindowSpec,
    pub lateness: i64,
    pub aggs: Vec<ResolvedAgg>,
    /// With a lag, each ingest statement advances the pipeline's `watermark_lag` source to the
    /// greatest event time it saw minus the lag, and fires what that makes due.
    pub watermark_lag: Option<i64>,
}

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
    format!("{}.{}", INTERNAL_SCHEMA, quote_ident(&format!("p{id}_{what}")))
}

/// `items` followed by ", " when not empty, to put before other columns.
fn prefix(items: &[String]) -> String {
    if items.is_empty() { String::new() } else { format!("{}, ", items.join(", ")) }
}

impl PipelineDef {
    pub fn table(&self, what: &str) -> String {
        internal_table(self.id, what)
    }

    pub fn trigger_function(&self) -> String {
        format!("{}.{}", INTERNAL_SCHEMA, quote_ident(&format!("p{}_ingest", self.id)))
    }

    pub fn trigger_name(&self) -> String {
        quote_ident(&format!("eventtime_ingest_p{}", self.id))
    }

    pub fn view(&self, suffix: &str) -> String {
        format!("{}.{}", quote_ident(&self.view_schema), quote_ident(&format!("{}{}", self.name, suffix)))
    }

    fn size(&self) -> String {
        duration_literal(self.window.size())
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

    fn key_defs(&self) -> Vec<String> {
        self.keys.iter().map(|k| format!("{} {}", quote_ident(&k.name), k.type_name)).collect()
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
        self.aggs.iter().map(|a| quote_ident(&a.spec.alias)).collect()
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

    /// The start of both ingest statements: `wm`, the watermark read `FOR SHARE`, and `cls`,
    /// each row of the transition table `new_rows` with its window and landing.
    fn ingest_prelude(&self) -> String {
        let (size, late) = (self.size(), self.late());
        let kr = prefix(&self.key_names(Some("r")));
        let et = quote_ident(&self.event_time);
        let (size_us, origin_us) = match self.window {
            WindowSpec::Tumbling { size, origin } => (size, origin),
        };
        let args: String = self
            .aggs
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.spec.arg.as_ref().map(|c| format!("r.{} AS {}, ", quote_ident(c), Self::arg_col(i))))
            .collect();
        let eid = match &self.event_id {
            Some(c) => format!("r.{}", quote_ident(&c.name)),
            None => "NULL::text".to_string(),
        };
        format!(
            "WITH /* pg_eventtime ingest */ wm AS MATERIALIZED (\n\
               SELECT p.watermark AS w,\n\
                      coalesce(p.watermark - {size}, '-infinity') AS t_open,\n\
                      coalesce(p.watermark - {size} - {late}, '-infinity') AS t_late\n\
               FROM {INTERNAL_SCHEMA}.pipeline p WHERE p.id = {id} FOR SHARE\n\
             ),\n\
             cls AS MATERIALIZED (\n\
               SELECT {kr}r.{ws}, {eid} AS _et_eid, r.{et} AS _et_et, {args}\n\
                      CASE WHEN r.{ws} > wm.t_open THEN 1 WHEN r.{ws} > wm.t_late THEN 2 ELSE 3 END AS _et_landing,\n\
                      CASE WHEN r.{ws} <= wm.t_late THEN to_jsonb(r) - '{ws_name}' END AS _et_doc\n\
               FROM (SELECT n.*, {INTERNAL_SCHEMA}.tumble_start(n.{et}, {size_us}, {origin_us}, {id}) AS {ws} FROM new_rows n OFFSET 0) r\n\
               CROSS JOIN wm\n\
             ),\n",
            id = self.id,
            ws = quote_ident(WINDOW_START_COLUMN),
            ws_name = WINDOW_START_COLUMN,
        )
    }

    /// The writes of both ingest statements, from the CTE `kept` (the rows that are not
    /// duplicates): refused rows, the state upsert of `up_rows` (key, window start, landing, row
    /// count and one partial per accumulator column, in that order, sorted by window and key), and
    /// a late version of every upserted window that has fired. `refused_gate` is a condition that
    /// is false when the statement has no row to refuse, so that the refused rows' scan is skipped.
    fn ingest_writes(&self, up_rows: &str, refused_gate: &str) -> String {
        let (size, late) = (self.size(), self.late());
        let k = prefix(&self.key_names(None));
        let kc = prefix(&self.key_names(Some("c")));
        let ku = prefix(&self.key_names(Some("u")));
        let accs = self.acc_cols();
        format!(
            "refused AS (\n\
               INSERT INTO {refused} ({k}event_id, event_time, \"row\", window_start, window_end, deadline, watermark)\n\
               SELECT {kc}c._et_eid, c._et_et, c._et_doc, c.{ws}, c.{ws} + {size}, c.{ws} + {size} + {late}, wm.w\n\
               FROM kept c CROSS JOIN wm WHERE {refused_gate} AND c._et_landing = 3\n\
               RETURNING 1\n\
             ),\n\
             up AS (\n\
               INSERT INTO {state} AS s ({k}window_start, window_end, version, {INTERNAL_PREFIX}n{acc_list})\n\
               {up_rows}\n\
               ON CONFLICT ({k}window_start) DO UPDATE SET\n\
                 version = CASE WHEN excluded.version > 0 THEN greatest(s.version, 1) + 1 ELSE s.version END, {INTERNAL_PREFIX}n = s.{INTERNAL_PREFIX}n + excluded.{INTERNAL_PREFIX}n{merges}\n\
               RETURNING s.*\n\
             ),\n\
             late_versions AS (\n\
               INSERT INTO {history} ({k}window_start, window_end, version, kind, {aliases}watermark)\n\
               SELECT {ku}u.window_start, u.window_end, u.version, 'late', {finals}wm.w\n\
               FROM up u CROSS JOIN wm WHERE u.window_end <= wm.w\n\
               RETURNING 1\n\
             )\n",
            refused = self.table("refused"),
            ws = quote_ident(WINDOW_START_COLUMN),
            state = self.table("state"),
            history = self.table("history"),
            acc_list = accs.iter().map(|c| format!(", {c}")).collect::<String>(),
            merges = self.merges().iter().map(|m| format!(", {m}")).collect::<String>(),
            aliases = prefix(&self.alias_cols()),
            finals = prefix(&self.finals("u")),
        )
    }

    /// The set-based statement run once per ingest statement against the transition table
    /// `new_rows`. It returns one row: accepted, late, refused, duplicates, and the greatest event
    /// time of the statement.
    pub fn ingest_statement(&self) -> String {
        let k = prefix(&self.key_names(None));
        let kc = prefix(&self.key_names(Some("c")));
        let ws = quote_ident(WINDOW_START_COLUMN);
        let mut sql = self.ingest_prelude();
        sql += "cls_n AS MATERIALIZED (\n\
                   SELECT count(*) AS rows, count(_et_eid) AS ids, max(_et_et) AS max_et, max(_et_landing) AS max_landing FROM cls\n\
                 ),\n";
        if self.event_id.is_some() {
            let key_match: String = self
                .keys
                .iter()
                .map(|c| format!(" AND f.{0} IS NOT DISTINCT FROM c.{0}", quote_ident(&c.name)))
                .collect();
            // The ledger holds every (window, key, id) the pipeline has seen, refused rows included,
            // for the pipeline's lifetime. When every row with an id was new (the common case),
            // every row is kept; otherwise the first row of each new id is.
            sql += &format!(
                "fresh AS (\n\
                   INSERT INTO {ids} AS i (window_start, {k}event_id)\n\
                   SELECT {ws}, {k}_et_eid FROM cls WHERE _et_eid IS NOT NULL ORDER BY {ws}, {k}_et_eid\n\
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
            sql += "kept AS (SELECT * FROM cls),\n";
        }
        let accs = self.acc_cols();
        sql += &format!(
            "batch AS (\n\
               SELECT {k}{ws}, max(_et_landing) AS _et_landing, count(*) AS _et_n{partials}\n\
               FROM kept WHERE _et_landing < 3 GROUP BY {k}{ws}\n\
             ),\n",
            partials = self.partials().iter().enumerate().map(|(i, p)| format!(", {p} AS _et_p{i}")).collect::<String>(),
        );
        sql += &self.ingest_writes(&format!(
            "SELECT {k}{ws}, {ws} + {size}, CASE WHEN _et_landing = 2 THEN 1 ELSE 0 END, _et_n{partial_cols}\n\
               FROM batch ORDER BY {ws}{k_after}",
            size = self.size(),
            partial_cols = (0..accs.len()).map(|i| format!(", _et_p{i}")).collect::<String>(),
            k_after = self.key_names(None).iter().map(|c| format!(", {c}")).collect::<String>(),
        ), "(SELECT max_landing FROM cls_n) = 3");
        // The counts come from the groups and the refused rows, not from another scan of the rows:
        // all rows of a group share its window, so its landing.
        sql += ", counts AS MATERIALIZED (\n\
               SELECT coalesce(sum(_et_n) FILTER (WHERE _et_landing = 1), 0)::bigint AS accepted,\n\
                      coalesce(sum(_et_n) FILTER (WHERE _et_landing = 2), 0)::bigint AS late,\n\
                      (SELECT count(*) FROM refused) AS refused\n\
               FROM batch\n\
             )\n\
             SELECT accepted, late, refused, (SELECT rows FROM cls_n) - accepted - late - refused, (SELECT max_et FROM cls_n) FROM counts";
        sql
    }

    /// The partial aggregates of [`Self::partials`] over one row, as expressions on the row's
    /// columns: the aggregate of one value is the value in the accumulator's type (NULL for
    /// NULL), and a count is 1 or 0.
    fn one_row_partials(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, a) in self.aggs.iter().enumerate() {
            let v = Self::arg_col(i);
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

    /// [`Self::ingest_statement`] for a transition table of exactly one row, the single-row
    /// `INSERT`: no grouping, no duplicates inside the statement, so a shorter plan with fewer
    /// nodes to start. Same result row.
    pub fn ingest_one_statement(&self) -> String {
        let k = prefix(&self.key_names(None));
        let ws = quote_ident(WINDOW_START_COLUMN);
        let mut sql = self.ingest_prelude();
        if self.event_id.is_some() {
            sql += &format!(
                "fresh AS (\n\
                   INSERT INTO {ids} (window_start, {k}event_id)\n\
                   SELECT {ws}, {k}_et_eid FROM cls WHERE _et_eid IS NOT NULL\n\
                   ON CONFLICT DO NOTHING\n\
                   RETURNING 1\n\
                 ),\n\
                 kept AS MATERIALIZED (SELECT c.* FROM cls c WHERE c._et_eid IS NULL OR EXISTS (SELECT 1 FROM fresh)),\n",
                ids = self.table("ids"),
            );
        } else {
            sql += "kept AS (SELECT * FROM cls),\n";
        }
        sql += &self.ingest_writes(&format!(
            "SELECT {k}{ws}, {ws} + {size}, CASE WHEN _et_landing = 2 THEN 1 ELSE 0 END, 1{partials}\n\
               FROM kept WHERE _et_landing < 3",
            size = self.size(),
            partials = self.one_row_partials().iter().map(|p| format!(", {p}")).collect::<String>(),
        ), "true");
        sql += "SELECT count(*) FILTER (WHERE _et_landing = 1), count(*) FILTER (WHERE _et_landing = 2),\n\
                       count(*) FILTER (WHERE _et_landing = 3), 1 - count(*), (SELECT _et_et FROM cls)\n\
                FROM kept";
        sql
    }

    /// The trigger function that runs [`Self::ingest_statement`] (or, for one row,
    /// [`Self::ingest_one_statement`]) for each INSERT or COPY statement on the source table,
    /// records duplicates, and hands the counts to `eventtime.ingest` when it is the caller.
    ///
    /// With a watermark lag, the statement ends with an advance, which needs the advance's locks.
    /// It checks the isolation level and takes the state table's EXCLUSIVE lock before anything else, never as an upgrade from
    /// the ROW EXCLUSIVE lock the ingest statement takes (two ingest transactions upgrading would
    /// deadlock), and the ingest statement that follows takes a fresh snapshot after it.
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
        format!(
            "CREATE FUNCTION {f}() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER\n\
             SET search_path = pg_catalog, pg_temp SET jit = off AS $eventtime$\n\
             DECLARE\n  n_accepted bigint; n_late bigint; n_refused bigint; n_duplicates bigint; max_event_time timestamptz;\n\
             BEGIN\n\
             {before}\
             IF (SELECT count(*) FROM (SELECT FROM new_rows LIMIT 2) n) = 1 THEN\n\
             {one}\n\
             INTO n_accepted, n_late, n_refused, n_duplicates, max_event_time;\n\
             ELSE\n\
             {stmt}\n\
             INTO n_accepted, n_late, n_refused, n_duplicates, max_event_time;\n\
             END IF;\n\
             IF n_duplicates > 0 THEN\n\
               INSERT INTO {INTERNAL_SCHEMA}.duplicate_counts (pipeline_id, duplicates) VALUES ({id}, n_duplicates);\n\
             END IF;\n\
             IF current_setting('{COLLECT_COUNTS}', true) = 'on' THEN\n\
               PERFORM {INTERNAL_SCHEMA}.note_counts({id}, n_accepted, n_late, n_refused, n_duplicates);\n\
             END IF;\n\
             {after}\
             RETURN NULL;\n\
             END\n$eventtime$",
            f = self.trigger_function(),
            one = self.ingest_one_statement(),
            stmt = self.ingest_statement(),
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
        let history_cols = format!("{k}window_start, window_end, version, kind, {aliases}sealed, watermark, fired_at");
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
            let what = if *suffix == "_refused" { "refused rows" } else { "history" };
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

    /// Everything the pipeline created, in an order that drops dependents first. The source
    /// table is left alone except for the trigger.
    pub fn drop_objects(&self, source_exists: bool) -> Vec<String> {
        let mut out: Vec<String> = VIEW_SUFFIXES.iter().map(|s| format!("DROP VIEW IF EXISTS {}", self.view(s))).collect();
        if source_exists {
            out.push(format!("DROP TRIGGER IF EXISTS {} ON {}", self.trigger_name(), self.source));
        }
        out.push(format!("DROP FUNCTION IF EXISTS {}()", self.trigger_function()));
        let tables: &[&str] = if self.event_id.is_some() { &["state", "ids", "history", "refused"] } else { &["state", "history", "refused"] };
        for t in tables {
            out.push(format!("DROP TABLE IF EXISTS {}", self.table(t)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::aggregates::{AggSpec, AvgKind};

    fn def() -> PipelineDef {
        PipelineDef {
            id: 7,
            name: "Orders \"daily\"".into(),
            source: "\"public\".\"orders\"".into(),
            view_schema: "public".into(),
            event_time: "ordered_at".into(),
            keys: vec![Column { name: "store".into(), type_name: "text".into() }],
            event_id: Some(Column { name: "order_id".into(), type_name: "bigint".into() }),
            window: WindowSpec::Tumbling { size: 86_400_000_000, origin: -946_684_800_000_000 },
            lateness: 86_400_000_000,
            watermark_lag: None,
            aggs: vec![
                ResolvedAgg {
                    spec: AggSpec { func: AggFunc::Count, arg: None, alias: "orders".into() },
                    result_type: "bigint".into(),
                    acc_type: "bigint".into(),
                    avg_kind: None,
                },
                ResolvedAgg {
                    spec: AggSpec { func: AggFunc::Avg, arg: Some("amount".into()), alias: "mean".into() },
                    result_type: "numeric".into(),
                    acc_type: "numeric".into(),
                    avg_kind: Some(AvgKind::Numeric),
                },
            ],
        }
    }

    #[test]
    fn durations_have_no_day_field() {
        assert_eq!(duration_literal(86_400_000_000), "interval '24:00:00.000000'");
        assert_eq!(duration_literal(90_061_000_001), "interval '25:01:01.000001'");
        assert_eq!(duration_literal(0), "interval '0:00:00.000000'");
        assert_eq!(duration_literal(-1), "interval '-0:00:00.000001'");
    }

    #[test]
    fn names_are_quoted_everywhere() {
        let d = def();
        assert_eq!(d.view("_latest"), "\"public\".\"Orders \"\"daily\"\"_latest\"");
        assert!(d.create_views().iter().filter(|v| v.starts_with("CREATE VIEW")).all(|v| v.contains("\"store\"")));
    }

    #[test]
    fn avg_is_published_from_sum_and_count() {
        let d = def();
        assert_eq!(d.finals("u")[1], "(u.\"_et_a1\" / NULLIF(u.\"_et_a1_n\", 0))::numeric");
        assert!(d.fire_statement().contains("(f.\"_et_a1\" / NULLIF(f.\"_et_a1_n\", 0))::numeric"));
        assert!(!d.fire_statement().contains("UPDATE"));
    }

    #[test]
    fn ingest_dedups_only_with_an_event_id() {
        let mut d = def();
        assert!(d.ingest_statement().contains("ON CONFLICT DO NOTHING"));
        d.event_id = None;
        let sql = d.ingest_statement();
        assert!(!sql.contains("\"p7_ids\""));
        assert!(sql.contains("kept AS (SELECT * FROM cls)"));
    }

    #[test]
    fn one_row_partials_are_the_aggregates_of_one_value() {
        let d = def();
        // count(*), then avg(amount) as a numeric sum and a count of non-NULL values.
        assert_eq!(
            d.one_row_partials(),
            [
                "1::bigint",
                "(\"_et_v1\")::numeric",
                "CASE WHEN \"_et_v1\" IS NULL THEN 0::bigint ELSE 1::bigint END",
            ]
        );
        assert_eq!(d.one_row_partials().len(), d.partials().len());
        let one = d.ingest_one_statement();
        assert!(one.starts_with("WITH /* pg_eventtime ingest */"));
        assert!(!one.contains("GROUP BY") && !one.contains("DISTINCT"));
    }

    #[test]
    fn the_trigger_takes_the_one_row_statement_for_one_row() {
        let d = def();
        let f = d.create_trigger_function();
        let one = f.find(&d.ingest_one_statement()).expect("one-row statement");
        let many = f.find(&d.ingest_statement()).expect("statement");
        assert!(f.find("IF (SELECT count(*) FROM (SELECT FROM new_rows LIMIT 2) n) = 1 THEN").unwrap() < one && one < many);
        assert!(f.contains(COLLECT_COUNTS));
        assert!(f.starts_with(&format!("CREATE FUNCTION {}() RETURNS trigger", d.trigger_function())));
        assert!(f.lines().nth(1).unwrap().contains("SET jit = off"));
    }

    #[test]
    fn the_statement_counts_from_its_groups_and_refuses_only_when_needed() {
        let sql = def().ingest_statement();
        let refused = &sql[sql.find("refused AS (").unwrap()..sql.find("up AS (").unwrap()];
        assert!(refused.contains("WHERE (SELECT max_landing FROM cls_n) = 3 AND c._et_landing = 3"));
        let counts = &sql[sql.find("counts AS MATERIALIZED (").unwrap()..];
        assert!(counts.contains("FROM batch") && !counts.contains("FROM kept"));
        assert_eq!(sql.matches("FROM kept").count(), 2, "kept is read by batch and refused only");
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
