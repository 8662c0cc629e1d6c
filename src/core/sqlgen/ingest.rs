//! The ingest statements: the set-based statement over a statement's transition table, and the
//! short statement for a single row, with the pieces they share (watermark, window and landing of
//! each row, the state upsert, late versions, refused rows).

use super::*;

/// The rows of an ingest statement that its statements read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rows {
    /// Every row of the transition table `new_rows`.
    All,
    /// Those above their source's committed offset, each (source, offset) once
    /// ([`PipelineDef::rows_after_offsets`]).
    AfterOffsets,
}

impl PipelineDef {
    /// The rows of the transition table that are not duplicates by their offsets (SPEC §12):
    /// above the offset their source had committed before the statement (the trigger function's
    /// `v_committed`, `{"source": offset}`, from `_eventtime.offsets_claim`; a source it does not
    /// name had none), and of the rows with one source and offset, the first in the statement's
    /// order. The columns are the source table's, as in `new_rows`.
    pub(super) fn rows_after_offsets(&self) -> String {
        let o = self
            .offsets
            .as_ref()
            .expect("rows after offsets of a pipeline with offsets");
        let source = match &o.source_column {
            Some(c) => format!("_et_t.{}::text", quote_ident(c)),
            None => quote_literal(SINGLE_SOURCE),
        };
        let committed = format!("({FN_LABEL}.v_committed ->> _et_o.s)");
        format!(
            "(SELECT (_et_d.r).* FROM (
               SELECT DISTINCT ON (_et_o.s, _et_o.o) _et_o.r FROM (
                 SELECT _et_t AS r, {source} AS s, _et_t.{off}::bigint AS o, pg_catalog.row_number() OVER () AS ord FROM new_rows _et_t
               ) _et_o
               WHERE {committed} IS NULL OR _et_o.o > {committed}::bigint
               ORDER BY _et_o.s, _et_o.o, _et_o.ord
             ) _et_d)",
            off = quote_ident(&o.column),
        )
    }

    /// The scan and claim of a statement's offsets (see `api::offsets`): the offsets committed
    /// before the statement of the sources whose rows must be filtered, into `v_committed`
    /// (NULL: no row of the statement is a duplicate by its offset).
    pub(super) fn offsets_claim(&self) -> Option<String> {
        let o = self.offsets.as_ref()?;
        let source = match &o.source_column {
            Some(c) => format!("r.{}::text", quote_ident(c)),
            None => format!("{}::text", quote_literal(SINGLE_SOURCE)),
        };
        Some(format!(
            "v_committed := {INTERNAL_SCHEMA}.offsets_claim({id}, (SELECT {INTERNAL_SCHEMA}.offset_scan({id}, {source}, r.{off}::bigint) FROM new_rows r));
",
            id = self.id,
            off = quote_ident(&o.column),
        ))
    }

    /// The event time `et` as it may move the `watermark_lag` source: NULL when it is later than
    /// `now()` plus `max_ahead` (a row from the future joins its window but moves no watermark).
    pub(super) fn lag_event_time(&self, et: &str) -> String {
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

    /// `wm`: the pipeline's watermark `w`, and the window ends after which a row is open
    /// (`w_open`) or late (`w_late`). A plain read, no row lock: in READ COMMITTED the statement
    /// takes its snapshot after the locks of its plan (SPI plans, then snapshots), so after the
    /// `ROW EXCLUSIVE` lock on the state that every advance waits for; in REPEATABLE READ the
    /// trigger function first locks the catalog row `FOR SHARE` (see
    /// [`Self::create_trigger_function`] and *Locks* in the design note).
    pub(super) fn watermark_cte(&self) -> String {
        format!(
            "wm AS MATERIALIZED (\n\
               SELECT p.watermark AS w,\n\
                      coalesce(p.watermark, '-infinity') AS w_open,\n\
                      coalesce(p.watermark - {late}, '-infinity') AS w_late\n\
               FROM {INTERNAL_SCHEMA}.pipeline p WHERE p.id = {id}\n\
             ),\n",
            late = self.late(),
            id = self.id,
        )
    }

    /// The landing of SPEC §2 for a row's window ending at `we`, against `wm`: 1 open
    /// (`w < end`), 2 late (`end <= w < end + lateness`), 3 refused, and [`NO_WINDOW`] for a row
    /// whose event time has no window (NULL, infinite, or out of range): nothing is written for
    /// it, and the trigger function raises its error after the statement, which undoes the whole
    /// `INSERT`.
    pub(super) fn landing_case(we: &str) -> String {
        format!(
            "CASE WHEN {we} IS NULL THEN {NO_WINDOW} WHEN {we} > wm.w_open THEN 1 WHEN {we} > wm.w_late THEN 2 ELSE 3 END"
        )
    }

    /// The windows of event time `et`, as a from-item to join `LATERAL ... ON true`: columns
    /// `window_start` and `window_end`, one row per window (see `core::window`). A row whose event
    /// time has no window gets NULLs.
    pub(super) fn windows_of(&self, et: &str) -> String {
        match &self.window {
            WindowSpec::Tumbling { size, origin } => format!(
                "(SELECT x.s AS window_start, x.s + {d} AS window_end FROM (SELECT {INTERNAL_SCHEMA}.tumble_start({et}, {size}, {origin}) AS s) x)",
                d = duration_literal(*size),
            ),
            WindowSpec::Hopping {
                size,
                slide,
                origin,
            } => format!("{INTERNAL_SCHEMA}.hop({et}, {size}, {slide}, {origin})"),
            WindowSpec::Calendar {
                size,
                slide,
                origin,
                time_zone,
            } => format!(
                "{INTERNAL_SCHEMA}.calendar({et}, {n}, {s}, {months}, {origin}, {zone})",
                n = size.count(),
                s = slide.count(),
                months = matches!(size, Period::Months(_)),
                zone = quote_literal(time_zone),
            ),
            WindowSpec::Cumulate {
                size,
                step,
                origin,
                time_zone,
            } => format!(
                "{INTERNAL_SCHEMA}.cumulate({et}, {size}, {step}, {origin}, {zone})",
                size = quote_literal(&size.text()),
                step = quote_literal(&step.text()),
                zone = time_zone
                    .as_deref()
                    .map(quote_literal)
                    .unwrap_or_else(|| "NULL".into()),
            ),
            WindowSpec::Session { .. } => self.session_window_of(et),
        }
    }

    /// The number of windows of event time `et`, as a scalar expression: what a row counts for in
    /// the counts of `eventtime.ingest`, which are per (row, window) pair. 1 for kinds that give
    /// a row one window, sessions included.
    pub fn window_count(&self, et: &str) -> String {
        if self.window.is_session() || !self.window.multi() {
            "1".into()
        } else {
            format!("(SELECT count(*) FROM {} w)", self.windows_of(et))
        }
    }

    /// The start of the statement for many rows: `wm`, and `cls`, each row of the transition
    /// table `new_rows` with its window and landing, and with an event id numbered in the order of
    /// the statement (`_et_ord`: of two rows with one event id, the first is kept). `cls` is
    /// materialized when `materialized`, and otherwise computed again by each of its readers.
    pub(super) fn ingest_prelude(&self, materialized: bool, from: Rows) -> String {
        let base = match from {
            Rows::All => "new_rows".to_string(),
            Rows::AfterOffsets => self.rows_after_offsets(),
        };
        let kr = prefix(&self.key_names(Some("r")));
        let et = quote_ident(&self.event_time);
        let ws = quote_ident(WINDOW_START_COLUMN);
        let we = quote_ident(WINDOW_END_COLUMN);
        let args: String = self.arg_items("r").into_iter().map(|v| v + ", ").collect();
        let eid = match &self.event_id {
            Some(c) => format!("r.{}", quote_ident(&c.name)),
            None => "NULL::text".to_string(),
        };
        format!(
            "WITH /* pg_eventtime ingest */ {wm}\
             cls AS {materialized}MATERIALIZED (\n\
               SELECT {kr}r.{ws}, r.{we}, {eid} AS _et_eid, r.{et} AS _et_et, {args}\n\
                      {landing} AS _et_landing,\n\
                      CASE WHEN r.{we} <= wm.w_late THEN to_jsonb(r.*) - '{ws_name}' - '{we_name}'{rn_minus} END AS _et_doc{ord}{rn_col}\n\
               FROM (SELECT n.*, w.window_start AS {ws}, w.window_end AS {we}\n\
                     FROM {rows} n LEFT JOIN LATERAL {windows} w ON true OFFSET 0) r{expression_row}\n\
               CROSS JOIN wm\n\
             ),\n",
            wm = self.watermark_cte(),
            expression_row = self.expression_row("r"),
            materialized = if materialized { "" } else { "NOT " },
            // Only dedup reads the order of the rows, from a materialized `cls`.
            ord = if materialized && self.ledger().is_some() {
                ",\npg_catalog.row_number() OVER () AS _et_ord"
            } else {
                ""
            },
            landing = Self::landing_case(&format!("r.{we}")),
            windows = self.windows_of(&format!("n.{et}")),
            ws_name = WINDOW_START_COLUMN,
            we_name = WINDOW_END_COLUMN,
            // A row refused for several windows keeps its document once: its pairs know their row.
            rows = if self.refused_doc_once {
                format!("(SELECT t.*, pg_catalog.row_number() OVER () AS {rn} FROM {base} t)", rn = quote_ident(ROW_NUMBER_COLUMN))
            } else {
                base
            },
            rn_minus = if self.refused_doc_once {
                format!(" - '{ROW_NUMBER_COLUMN}'")
            } else {
                String::new()
            },
            rn_col = if self.refused_doc_once {
                format!(", r.{} AS _et_rn", quote_ident(ROW_NUMBER_COLUMN))
            } else {
                String::new()
            },
        )
    }

    /// `cls_n`: the statement's rows, rows with an event id, greatest event time (as it may move a
    /// lag), greatest landing, and the rows with no window and the first of their event times.
    pub(super) fn cls_counts(&self) -> String {
        format!(
            "cls_n AS MATERIALIZED (\n\
                   SELECT count(*) AS rows, count(_et_eid) AS ids, max({max_et}) AS max_et, max(_et_landing) AS max_landing,\n\
                          count(*) FILTER (WHERE _et_landing = {NO_WINDOW}) AS bad,\n\
                          (array_agg(_et_et) FILTER (WHERE _et_landing = {NO_WINDOW}))[1] AS bad_et\n\
                   FROM cls\n\
                 ),\n",
            max_et = self.lag_event_time("_et_et"),
        )
    }

    /// `fresh`, `all_fresh` and `kept` with an event id: the ledger insert and the rows it keeps.
    /// The ledger holds every id the pipeline has seen, refused rows included, for the
    /// pipeline's lifetime: per window and key (`windowed`), or per key for sessions, which have
    /// no window of their own to scope an id to. When every row with an id was new (the common
    /// case), every row is kept; otherwise the first row (in the statement's order) of each new
    /// id is.
    pub(super) fn dedup_ctes(&self, windowed: bool) -> String {
        let k = prefix(&self.key_names(None));
        let kc = prefix(&self.key_names(Some("c")));
        let ws = quote_ident(WINDOW_START_COLUMN);
        let we = quote_ident(WINDOW_END_COLUMN);
        let (w, wc, wi, wj) = if windowed && !self.step_end().is_empty() {
            (
                format!("{ws}, {we}, "),
                format!("c.{ws}, c.{we}, "),
                "i.window_start, i.window_end, ".to_string(),
                format!("f.window_start = c.{ws} AND f.window_end = c.{we} AND "),
            )
        } else if windowed {
            (
                format!("{ws}, "),
                format!("c.{ws}, "),
                "i.window_start, ".to_string(),
                format!("f.window_start = c.{ws} AND "),
            )
        } else {
            Default::default()
        };
        let ledger_cols = if windowed {
            format!("window_start, {}", self.step_end())
        } else {
            String::new()
        };
        format!(
            "fresh AS (\n\
               INSERT INTO {ids} AS i ({ledger_cols}{k}event_id)\n\
               SELECT {w}{k}_et_eid FROM cls WHERE _et_eid IS NOT NULL AND _et_landing < {NO_WINDOW} ORDER BY {w}{k}_et_eid\n\
               ON CONFLICT DO NOTHING\n\
               RETURNING {wi}{ki}i.event_id\n\
             ),\n\
             all_fresh AS MATERIALIZED (\n\
               SELECT (SELECT count(*) FROM fresh) = (SELECT ids FROM cls_n) AS yes\n\
             ),\n\
             kept AS MATERIALIZED (\n\
               SELECT c.* FROM cls c WHERE (SELECT yes FROM all_fresh)\n\
               UNION ALL\n\
               SELECT d.* FROM (\n\
                 SELECT DISTINCT ON ({wc}{kc}c._et_eid) c.*\n\
                 FROM cls c JOIN fresh f ON {wj}f.event_id = c._et_eid{key_match}\n\
                 WHERE NOT (SELECT yes FROM all_fresh)\n\
                 ORDER BY {wc}{kc}c._et_eid, c._et_ord\n\
               ) d\n\
               UNION ALL\n\
               SELECT c.* FROM cls c WHERE c._et_eid IS NULL AND NOT (SELECT yes FROM all_fresh)\n\
             ),\n",
            ids = self.table("ids"),
            ki = prefix(&self.key_names(Some("i"))),
            key_match = self.same_key("f", "c"),
        )
    }

    /// The partials of an open window, `rows` (key, window start, window end, row count and one
    /// partial per accumulator column, in that order), written to the state (version 0) where no
    /// other writer waits for them. With [`PipelineDef::state_slots`], each is upserted into the
    /// window's row of this backend (`_et_slot`), which no other live backend writes, with its
    /// sums checked ([`Self::acc_checked`]); without, appended as a row of its own.
    pub(super) fn state_append(&self, rows: &str) -> String {
        let k = prefix(&self.key_names(None));
        let acc_list = self
            .acc_cols()
            .iter()
            .map(|c| format!(", {c}"))
            .collect::<String>();
        if !self.uses_slots() {
            return format!(
                "INSERT INTO {state} ({k}window_start, window_end, {INTERNAL_PREFIX}n{acc_list})\n\
                 {rows}",
                state = self.table("state"),
            );
        }
        self.backend_row_upsert(
            rows,
            &[("_et_slot", format!("{INTERNAL_SCHEMA}.backend_slot()"))],
            1,
        )
    }

    /// The upsert of `rows` (as for [`Self::state_append`]) into rows of the state that only
    /// this backend writes: each row's `own` columns (column, value) are appended to it, and the
    /// row is found by the unique index on key, window and the first `identity` of the `own`
    /// columns, whose predicate is that the first is not NULL. Its partials are added, with the
    /// sums checked; the other `own` columns keep their first values.
    pub(super) fn backend_row_upsert(
        &self,
        rows: &str,
        own: &[(&str, String)],
        identity: usize,
    ) -> String {
        let k = prefix(&self.key_names(None));
        let n = format!("{INTERNAL_PREFIX}n");
        let acc_list: String = self.acc_cols().iter().map(|c| format!(", {c}")).collect();
        let own_cols: String = own.iter().map(|(c, _)| format!(", {c}")).collect();
        let own_vals: String = own.iter().map(|(_, v)| format!(", {v}")).collect();
        let target: Vec<&str> = own[..identity].iter().map(|(c, _)| *c).collect();
        format!(
            "INSERT INTO {state} AS s ({k}window_start, window_end, {n}{acc_list}{own_cols})\n\
             SELECT *{own_vals} FROM ({checked}) c\n\
             ON CONFLICT ({k}window_start, {step_end}{target}) WHERE {marker} IS NOT NULL DO UPDATE SET\n\
               {n} = s.{n} + excluded.{n}{merges}",
            state = self.table("state"),
            checked = self.checked_state_rows(rows),
            step_end = self.step_end(),
            target = target.join(", "),
            marker = own[0].0,
            merges = self
                .checked_merges()
                .iter()
                .map(|m| format!(", {m}"))
                .collect::<String>(),
        )
    }

    /// The upsert of the partials of a fired window, `rows` (as for [`Self::state_append`]),
    /// into its one state row, which moves to the next version (version 1 when the window had
    /// no rows when it fired). With [`PipelineDef::late_row_flag`] the row is inserted marked
    /// `_et_late`, and the update changes no indexed column.
    pub(super) fn state_upsert(&self, rows: &str, returning: &str) -> String {
        let k = prefix(&self.key_names(None));
        let predicate = self.late_row_predicate();
        let (flag_col, flag_val) = if self.flags_late_rows() {
            (", _et_late", ", true")
        } else {
            ("", "")
        };
        let merges = if self.uses_slots() {
            self.checked_merges()
        } else {
            self.merges()
        };
        format!(
            "INSERT INTO {state} AS s ({k}window_start, window_end, {INTERNAL_PREFIX}n{acc_list}, version{flag_col})\n\
             SELECT *, 1{flag_val} FROM ({rows}) r\n\
             ON CONFLICT ({k}{step_end}window_start) WHERE {predicate} DO UPDATE SET\n\
               version = s.version + 1, {INTERNAL_PREFIX}n = s.{INTERNAL_PREFIX}n + excluded.{INTERNAL_PREFIX}n{merges}\n\
             RETURNING {returning}",
            state = self.table("state"),
            acc_list = self.acc_cols().iter().map(|c| format!(", {c}")).collect::<String>(),
            rows = self.checked_state_rows(rows),
            step_end = self.step_end(),
            merges = merges.iter().map(|m| format!(", {m}")).collect::<String>(),
        )
    }

    /// A late version of each state row `u` of `rows` (FROM items that name it `u`) that meets
    /// `cond`, written under `watermark`. With [`PipelineDef::late_deltas`], the state row holds
    /// only the window's late rows and counts its late versions: the version adds them to the
    /// window's main firing ([`Self::main_lookup`]) and comes after it.
    pub(super) fn late_version_insert(&self, rows: &str, cond: &str, watermark: &str) -> String {
        let head = format!(
            "INSERT INTO {history} ({k}window_start, window_end, version, kind, {aliases}watermark, {accs})",
            history = self.table("history"),
            k = prefix(&self.key_names(None)),
            aliases = prefix(&self.alias_cols()),
            accs = self.state_cols().join(", "),
        );
        let select = |u: &str, w: &str| {
            format!(
                "SELECT {ku}{u}.window_start, {u}.window_end, {u}.version, 'late', {finals}{w}, {accs_u}",
                ku = prefix(&self.key_names(Some(u))),
                finals = prefix(&self.finals(u)),
                accs_u = self.state_cols_of(u),
            )
        };
        if !self.uses_late_deltas() {
            return format!(
                "{head}\n{}\nFROM {rows} WHERE {cond}",
                select("u", watermark)
            );
        }
        let n = format!("{INTERNAL_PREFIX}n");
        format!(
            "{head}\n{select}\n\
             FROM (SELECT {ku}u.window_start, u.window_end, u.version + (m.{n} IS NOT NULL)::integer AS version, {watermark} AS _et_w{merged}\n\
             FROM {rows}{lookup} WHERE {cond}) v",
            select = select("v", "v._et_w"),
            ku = prefix(&self.key_names(Some("u"))),
            merged = self.merged_state("m", "u"),
            lookup = self.main_lookup("u"),
        )
    }

    /// `, <expr> AS <column>` for each state column: the state of the row aliased `old` (all
    /// NULL: none) with that of the row aliased `new` added.
    pub(super) fn merged_state(&self, old: &str, new: &str) -> String {
        let n = format!("{INTERNAL_PREFIX}n");
        std::iter::once(format!("coalesce({old}.{n}, 0) + {new}.{n}"))
            .chain(self.aggs.iter().enumerate().flat_map(|(i, a)| {
                let delta: Vec<String> = a
                    .acc_columns(i)
                    .into_iter()
                    .map(|(c, _)| format!("{new}.{c}"))
                    .collect();
                a.merge_values(i, old, &delta)
            }))
            .zip(self.state_cols())
            .map(|(e, c)| format!(", {e} AS {c}"))
            .collect()
    }

    /// `LEFT JOIN LATERAL (...) m ON true`: the state columns of the main firing (version 1,
    /// kind `main`) of the window of the row aliased `u`, from history; all NULL when the window
    /// had no rows when it fired. Keys compare with their type's btree equality (`eq_op`), so
    /// each lookup is a scan of the history's unique index: one branch per combination of NULL
    /// keys, a NULL key matching with `IS NULL` (the index's NULLS NOT DISTINCT), of which only
    /// the branch of the row's NULLs runs. With more than [`MAX_KEY_BRANCHES`] keys the keys are
    /// compared in one branch, and the lookup reads every version of the window start.
    pub(super) fn main_lookup(&self, u: &str) -> String {
        let cols = self.state_cols_of("m");
        let head = format!(
            "SELECT {cols} FROM {history} m WHERE m.window_start = {u}.window_start{end} AND m.version = 1 AND m.kind = 'main'",
            history = self.table("history"),
            end = if self.step_end().is_empty() {
                String::new()
            } else {
                format!(" AND m.window_end = {u}.window_end")
            },
        );
        let ops: Option<Vec<&str>> = self.keys.iter().map(|k| k.eq_op.as_deref()).collect();
        let branches: Vec<String> = match ops {
            Some(ops) if self.keys.len() <= MAX_KEY_BRANCHES => (0..1usize << self.keys.len())
                .map(|nulls| {
                    let conds: String = self
                        .keys
                        .iter()
                        .zip(ops.iter())
                        .enumerate()
                        .map(|(i, (k, op))| {
                            let c = quote_ident(&k.name);
                            if nulls & (1 << i) == 0 {
                                format!(" AND m.{c} {op} {u}.{c}")
                            } else {
                                format!(" AND m.{c} IS NULL AND {u}.{c} IS NULL")
                            }
                        })
                        .collect();
                    format!("{head}{conds}")
                })
                .collect(),
            _ => vec![format!("{head}{}", self.same_key("m", u))],
        };
        format!(
            "\nLEFT JOIN LATERAL (\n{}\n) m ON true",
            branches.join("\nUNION ALL\n")
        )
    }

    /// Refused rows from `select`, whose columns are: keys, event id, event time, the row as
    /// `jsonb`; `ws` and `we` are the bounds of the window it missed, `watermark` the refusing
    /// watermark.
    pub(super) fn refused_insert(
        &self,
        select: &str,
        (ws, we): (&str, &str),
        watermark: &str,
        from: &str,
    ) -> String {
        let late = self.late();
        format!(
            "INSERT INTO {refused} ({k}event_id, event_time, \"row\", window_start, window_end, deadline, watermark)\n\
             SELECT {select}, {ws}, {we}, {we} + {late}, {watermark}\n\
             {from}",
            refused = self.table("refused"),
            k = prefix(&self.key_names(None)),
        )
    }

    /// The refused rows of the statement for many rows when a row refused for several windows
    /// keeps its document once ([`PipelineDef::refused_doc_once`]): the refused row of its
    /// earliest window holds `row`, and those of its other windows name that one in `_et_doc_of`.
    /// The ids are drawn from the identity's sequence before the insert, so that each pair knows
    /// its document's id. One row per pair, as [`Self::refused_insert`].
    fn refused_insert_doc_once(&self) -> String {
        let k = prefix(&self.key_names(None));
        let kc = prefix(&self.key_names(Some("c")));
        let ws = quote_ident(WINDOW_START_COLUMN);
        let we = quote_ident(WINDOW_END_COLUMN);
        let refused = self.table("refused");
        let next = format!(
            "pg_catalog.nextval((SELECT pg_catalog.pg_get_serial_sequence({}, '{INTERNAL_PREFIX}id'))::pg_catalog.regclass)",
            quote_literal(&refused)
        );
        format!(
            "WITH pairs AS MATERIALIZED (\n\
               SELECT c.*, pg_catalog.row_number() OVER (PARTITION BY c._et_rn ORDER BY c.{ws}, c.{we}) = 1 AS _et_first\n\
               FROM kept c WHERE (SELECT max_landing FROM cls_n) = 3 AND c._et_landing = 3\n\
             ), docs AS MATERIALIZED (\n\
               SELECT p._et_rn, {next} AS _et_doc_id FROM pairs p WHERE p._et_first\n\
             )\n\
             INSERT INTO {refused} ({INTERNAL_PREFIX}id, {k}event_id, event_time, \"row\", window_start, window_end, deadline, watermark, {INTERNAL_PREFIX}doc_of)\n\
             OVERRIDING SYSTEM VALUE\n\
             SELECT CASE WHEN c._et_first THEN d._et_doc_id ELSE {next} END, {kc}c._et_eid, c._et_et,\n\
                    CASE WHEN c._et_first THEN c._et_doc END, c.{ws}, c.{we}, c.{we} + {late}, wm.w,\n\
                    CASE WHEN NOT c._et_first THEN d._et_doc_id END\n\
             FROM pairs c JOIN docs d ON d._et_rn = c._et_rn CROSS JOIN wm\n\
             RETURNING 1",
            late = self.late(),
        )
    }

    /// The set-based statement run once per ingest statement of several rows against the
    /// transition table `new_rows`. It returns one row: accepted, late, refused, duplicates, and
    /// the greatest event time of the statement.
    pub fn ingest_statement(&self) -> String {
        self.ingest_statement_for(Ledger::Dedup, Rows::All)
    }

    /// [`Self::ingest_statement`] over the rows `from`, with the ledger insert of `ledger`.
    pub(super) fn ingest_statement_for(&self, ledger: Ledger, from: Rows) -> String {
        let k = prefix(&self.key_names(None));
        let ws = quote_ident(WINDOW_START_COLUMN);
        let we = quote_ident(WINDOW_END_COLUMN);
        let partials = |filter: &str| {
            self.partials(filter)
                .iter()
                .enumerate()
                .map(|(i, p)| format!(", {p} AS _et_p{i}"))
                .collect::<String>()
        };
        if self.ledger().is_none() || ledger == Ledger::Fresh {
            // Without event ids, or when every id must be new, every row is kept, and one pass
            // over the rows makes the groups (a second one, with ids, the ledger's entries): `cls`
            // is not materialized (a million rows of a `COPY` would be written to a temporary
            // file and read again by each reader), `batch` groups every row, refused and
            // windowless ones included, and the statement's counts come from the groups. A
            // group's rows share its window, so its landing; only the partials of open and late
            // groups are computed. The refused rows, and the first row without a window, are read
            // again only when the groups say that there are some.
            // The greatest event time only moves a `watermark_lag` source.
            let (max_et, max_et_of_groups) = match self.watermark_lag {
                Some(_) => (
                    format!(", max({}) AS _et_max_et", self.lag_event_time("_et_et")),
                    "max(_et_max_et)",
                ),
                None => (String::new(), "NULL::timestamptz"),
            };
            let mut sql = self.ingest_prelude(false, from);
            if self.ledger().is_some() {
                sql += &self.fresh_insert();
            }
            sql += &format!(
                "batch AS MATERIALIZED (\n\
                   SELECT {k}{ws}, {we}, max(_et_landing) AS _et_landing, count(*) AS _et_n{partials}{max_et}\n\
                   FROM cls GROUP BY {k}{ws}, {we}\n\
                 ),\n\
                 cls_n AS MATERIALIZED (\n\
                   SELECT coalesce(sum(_et_n), 0) AS rows, {max_et_of_groups} AS max_et, max(_et_landing) AS max_landing,\n\
                          coalesce(sum(_et_n) FILTER (WHERE _et_landing = {NO_WINDOW}), 0) AS bad\n\
                   FROM batch\n\
                 ),\n\
                 kept AS NOT MATERIALIZED (SELECT * FROM cls),\n",
                partials = partials(" FILTER (WHERE _et_landing < 3)"),
            );
            sql += &self.ingest_writes(&format!(
                "CASE WHEN (SELECT bad FROM cls_n) > 0 THEN \
                 (SELECT (array_agg(_et_et) FILTER (WHERE _et_landing = {NO_WINDOW}))[1] FROM cls) END"
            ));
            return sql;
        }
        let mut sql = self.ingest_prelude(true, from);
        sql += &self.cls_counts();
        sql += &self.dedup_ctes(true);
        sql += &format!(
            "batch AS (\n\
               SELECT {k}{ws}, {we}, max(_et_landing) AS _et_landing, count(*) AS _et_n{partials}\n\
               FROM kept WHERE _et_landing < 3 GROUP BY {k}{ws}, {we}\n\
             ),\n",
            partials = partials(""),
        );
        sql += &self.ingest_writes("(SELECT bad_et FROM cls_n)");
        sql
    }

    /// `fresh`, the ledger insert of a statement whose ids must all be new: a duplicate anywhere
    /// fails the statement with a unique violation, and the trigger function then runs the
    /// statement that dedups.
    fn fresh_insert(&self) -> String {
        let k = prefix(&self.key_names(None));
        let ws = quote_ident(WINDOW_START_COLUMN);
        format!(
            "fresh AS (\n\
               INSERT INTO {ids} (window_start, {step_end}{k}event_id)\n\
               SELECT {ws}, {cls_end}{k}_et_eid FROM cls WHERE _et_eid IS NOT NULL AND _et_landing < {NO_WINDOW} ORDER BY {ws}, {cls_end}{k}_et_eid\n\
             ),\n",
            ids = self.table("ids"),
            step_end = self.step_end(),
            cls_end = if self.step_end().is_empty() {
                String::new()
            } else {
                format!("{}, ", quote_ident(WINDOW_END_COLUMN))
            },
        )
    }

    /// The rest of the statement for many rows, after `wm`, `cls`, `cls_n`, `kept` and `batch`
    /// (groups of a key and window, with `_et_landing`, `_et_n` and the partials `_et_p<i>`): the
    /// refused rows (read from `kept` when `cls_n` says there are some), the state's append and
    /// upsert, the late versions, and the final row of counts, whose first row without a window
    /// is `bad_et`.
    fn ingest_writes(&self, bad_et: &str) -> String {
        let k = prefix(&self.key_names(None));
        let kc = prefix(&self.key_names(Some("c")));
        let ws = quote_ident(WINDOW_START_COLUMN);
        let we = quote_ident(WINDOW_END_COLUMN);
        let accs = self.acc_cols();
        // The refused rows' scan is skipped when no row of the statement is past its grace.
        let refused = if self.refused_doc_once {
            self.refused_insert_doc_once()
        } else {
            self.refused_insert(
                &format!("{kc}c._et_eid, c._et_et, c._et_doc"),
                (&format!("c.{ws}"), &format!("c.{we}")),
                "wm.w",
                "FROM kept c CROSS JOIN wm WHERE (SELECT max_landing FROM cls_n) = 3 AND c._et_landing = 3\nRETURNING 1",
            )
        };
        let rows = |landing: i32| {
            format!(
                "SELECT {k}{ws}, {we}, _et_n{partial_cols}\n\
                 FROM batch WHERE _et_landing = {landing} ORDER BY {ws}{k_after}",
                partial_cols = (0..accs.len())
                    .map(|i| format!(", _et_p{i}"))
                    .collect::<String>(),
                k_after = self
                    .key_names(None)
                    .iter()
                    .map(|c| format!(", {c}"))
                    .collect::<String>(),
            )
        };
        let appended = self.state_append(&rows(1));
        // With batched late firings the late partials wait in pending rows, and no version is
        // written now.
        let (up, late_versions) = if self.batches_late() {
            (
                self.pending_append(&rows(2), "(SELECT w FROM wm)"),
                "SELECT FROM up WHERE false".to_string(),
            )
        } else {
            (
                self.state_upsert(&rows(2), "s.*"),
                format!(
                    "{}\nRETURNING 1",
                    self.late_version_insert("up u CROSS JOIN wm", "u.window_end <= wm.w", "wm.w")
                ),
            )
        };
        // The counts come from the groups and the refused rows, not from another scan of the rows:
        // all rows of a group share its window, so its landing. Rows of several windows count once
        // per window.
        format!(
            "refused AS (\n{refused}\n),\n\
             appended AS (\n{appended}\n),\n\
             up AS (\n{up}\n),\n\
             late_versions AS (\n{late_versions}\n),\n\
             counts AS MATERIALIZED (\n\
               SELECT coalesce(sum(_et_n) FILTER (WHERE _et_landing = 1), 0)::bigint AS accepted,\n\
                      coalesce(sum(_et_n) FILTER (WHERE _et_landing = 2), 0)::bigint AS late,\n\
                      (SELECT count(*) FROM refused) AS refused\n\
               FROM batch\n\
             )\n\
             SELECT accepted, late, refused, (SELECT rows FROM cls_n) - accepted - late - refused, (SELECT max_et FROM cls_n),\n\
                    (SELECT bad FROM cls_n), {bad_et}, (SELECT count(*) FROM late_versions), (SELECT w FROM wm) FROM counts"
        )
    }

    /// The source columns a single-row statement reads into the record `v_row` of the trigger
    /// function: keys, event id, event time and aggregate arguments, each once. Field `c<i>` holds
    /// column `i` of this list. A record, not variables declared `%TYPE` after the source
    /// columns, so that the function names no source table and survives its renaming.
    pub(super) fn one_row_columns(&self) -> Vec<&str> {
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
    pub(super) fn one_row_var(&self, name: &str) -> String {
        let i = self
            .one_row_columns()
            .iter()
            .position(|c| *c == name)
            .expect("column read by the single-row path");
        format!("{FN_LABEL}.v_row.c{i}")
    }

    /// The partial aggregates of [`Self::partials`] over one row whose aggregate argument `c` is
    /// the expression `arg(c)`.
    /// An expression argument is read from field `x<i>` of the single-row path's record
    /// ([`Self::one_row_var`]); the front, which has none, never meets one.
    pub(super) fn one_row_partials(&self, arg: impl Fn(&str) -> String) -> Vec<String> {
        self.aggs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| {
                let v = match (&a.spec.expr, &a.spec.arg) {
                    (Some(_), _) => Some(format!("{FN_LABEL}.v_row.x{i}")),
                    (None, c) => c.as_deref().map(&arg),
                };
                a.one_row_partials(v)
            })
            .collect()
    }

    /// The statement for a transition table of exactly one row, the single-row `INSERT`, whose
    /// columns the trigger function has read into its variables: the watermark, the ledger
    /// insert and the state upsert, and nothing else, so a short plan with few nodes to start.
    /// It returns the window's start and end, the landing, the watermark, whether the row is
    /// kept (not a duplicate) and the `ctid` of the state row it upserted; the trigger function
    /// writes the rare rest (a late version, a refused row) only when the landing asks for it.
    /// Only for kinds that give a row one window (see `WindowSpec::multi`).
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
        let we = quote_ident(WINDOW_END_COLUMN);
        let mut sql = format!(
            "WITH /* pg_eventtime ingest */ {wm}\
             c AS MATERIALIZED (\n\
               SELECT x.window_start AS {ws}, x.window_end AS {we}, {landing} AS _et_landing, wm.w\n\
               FROM wm LEFT JOIN LATERAL {windows} x ON true\n\
             ),\n",
            wm = self.watermark_cte(),
            landing = Self::landing_case("x.window_end"),
            windows = self.windows_of(&self.one_row_var(&self.event_time)),
        );
        let kept = match self.ledger() {
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
        let rows = |landing: i32| {
            format!(
                "SELECT {vk}c.{ws}, c.{we}, 1{partials}\n\
                 FROM c WHERE c._et_landing = {landing} AND {kept}",
                partials = self
                    .one_row_partials(|c| self.one_row_var(c))
                    .iter()
                    .map(|p| format!(", {p}"))
                    .collect::<String>(),
            )
        };
        let appended = self.state_append(&rows(1));
        let up = if self.batches_late() {
            self.pending_append(&rows(2), "(SELECT w FROM c)")
        } else {
            self.state_upsert(&rows(2), "s.ctid")
        };
        sql += &format!(
            "appended AS (\n{appended}\n),\n\
             up AS (\n{up}\n)\n\
             SELECT c.{ws}, c.{we}, c._et_landing, c.w, {kept}, (SELECT ctid FROM up) FROM c"
        );
        sql
    }
}
