//! The trigger function of a pipeline: the PL/pgSQL around the ingest statements.

use super::*;

/// The C symbol of the trigger front (`api::front`), in this extension's library.
pub const FRONT_SYMBOL: &str = "eventtime_ingest_front";

/// Whether the window ending at parameter `end` is open against the watermark of the pipeline's
/// catalog row `p`: the condition of both statements of the front.
fn front_window_open(end: &str) -> String {
    format!("p.watermark IS NULL OR {end}::timestamptz > p.watermark")
}

impl PipelineDef {
    /// Whether the pipeline's trigger is a front in Rust (`api::front`) before the PL/pgSQL
    /// function: for kinds that give a row one window computed from the row alone (tumbling, and
    /// calendar periods whose slide is their size), with no watermark lag, in the layout with
    /// late deltas. The front writes a statement's one on-time row with
    /// [`Self::ingest_on_time_statement`] and hands every other statement, and every other row,
    /// to the PL/pgSQL function, unchanged. With offsets, the front hands every statement of one
    /// row over, and the engine claims the offsets of those it takes (see `engine::route`).
    pub fn has_front(&self) -> bool {
        matches!(
            self.window,
            WindowSpec::Tumbling { .. } | WindowSpec::Calendar { .. }
        ) && !self.window.multi()
            && self.watermark_lag.is_none()
            && self.uses_late_deltas()
            && !self.has_expressions()
            && !self.aggs.iter().any(|a| a.generic.is_some())
    }

    /// The PL/pgSQL trigger function: the trigger's own function, or, behind a front, the
    /// function the front hands statements to.
    pub fn sql_trigger_function(&self) -> String {
        if self.has_front() {
            format!(
                "{}.{}",
                INTERNAL_SCHEMA,
                quote_ident(&format!("p{}_ingest_sql", self.id))
            )
        } else {
            self.trigger_function()
        }
    }

    /// The trigger's function when the pipeline has a front: a C function of this extension's
    /// library. Created by the catalog owner (only a superuser creates C functions), then
    /// handed to the pipeline's owner like the PL/pgSQL function, and not executable by
    /// `PUBLIC`. It is not `SECURITY DEFINER`: the front switches to the owner itself, in a
    /// security-restricted operation, for the one statement it runs.
    pub fn create_front_function(&self) -> Option<String> {
        self.has_front().then(|| {
            format!(
                "CREATE FUNCTION {}() RETURNS trigger LANGUAGE c AS '$libdir/pg_eventtime', '{FRONT_SYMBOL}'",
                self.trigger_function()
            )
        })
    }

    /// The source columns the front passes to [`Self::ingest_on_time_statement`] as `$3`,
    /// `$4`, ..., in this order, after the window's start (`$1`) and end (`$2`).
    pub fn front_columns(&self) -> Vec<&str> {
        let mut out = self.one_row_columns();
        // The engine reads a row's offset and source too (`engine::route`).
        for c in self
            .offsets
            .iter()
            .flat_map(|o| std::iter::once(o.column.as_str()).chain(o.source_column.as_deref()))
        {
            if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }

    /// The statement the front runs for a statement's one row whose window the front computed
    /// (`$1`, `$2`) and whose columns it read from the transition table (see
    /// [`Self::front_columns`]). It writes only when the window is open against the watermark it
    /// reads: the ledger entry, then, when the id is new, the row's partials appended to the
    /// state. The number of rows it inserts into the state (1 or 0) is what it tells the front;
    /// when it inserted none with an event id, the front asks
    /// [`Self::front_window_open_statement`] why (without, the window was closed). The
    /// front runs it only for a row with an event time and, with an event id, an id.
    ///
    /// Its plan locks the state `ROW EXCLUSIVE` before the statement's snapshot, as the ingest
    /// statements' plans do, so the watermark it reads is the latest until the transaction ends.
    /// It is one `INSERT` (with the ledger's in a `WITH` before it) and no other node than the
    /// watermark's index scan: the shortest plan to start for the statement an application runs
    /// most.
    pub fn ingest_on_time_statement(&self) -> String {
        let param = |name: &str| {
            let i = self
                .front_columns()
                .iter()
                .position(|c| *c == name)
                .expect("column passed by the front");
            format!("${}", i + 3)
        };
        let vk = prefix(&self.keys.iter().map(|c| param(&c.name)).collect::<Vec<_>>());
        let open = format!(
            "FROM {INTERNAL_SCHEMA}.pipeline p\n\
             WHERE p.id = {id} AND ({cond})",
            id = self.id,
            cond = front_window_open("$2"),
        );
        let partials = self
            .one_row_partials(|c| param(c))
            .iter()
            .map(|p| format!(", {p}"))
            .collect::<String>();
        let row = format!("SELECT {vk}$1::timestamptz, $2::timestamptz, 1{partials}");
        match self.ledger() {
            Some(eid) => {
                let k = prefix(&self.key_names(None));
                format!(
                    "WITH /* pg_eventtime ingest, one on-time row */ fresh AS (\n\
                       INSERT INTO {ids} (window_start, {k}event_id)\n\
                       SELECT $1::timestamptz, {vk}{v}\n\
                       {open}\n\
                       ON CONFLICT DO NOTHING\n\
                       RETURNING 1\n\
                     )\n\
                     {append}",
                    ids = self.table("ids"),
                    v = param(&eid.name),
                    append = self.state_append(&format!("{row}\nFROM fresh")),
                )
            }
            None => format!(
                "/* pg_eventtime ingest, one on-time row */\n{}",
                self.state_append(&format!("{row}\n{open}"))
            ),
        }
    }

    /// The statement the front runs for the groups of a statement whose rows are all in open
    /// windows (`engine`): parameter `$j` is the array of column `j` of the groups, in the order
    /// keys, window start, window end, rows, then one partial per state column (see
    /// [`Self::front_group_types`]). The groups are appended to this backend's state rows as the
    /// statement for many rows appends its own, sums checked.
    pub fn ingest_groups_statement(&self) -> String {
        format!(
            "/* pg_eventtime ingest, groups of open windows */\n{}",
            self.state_append(&self.front_group_rows())
        )
    }

    /// The groups of [`Self::ingest_groups_statement`]'s arrays as rows (keys, window start and
    /// end, rows, partials), in (window start, keys) order.
    fn front_group_rows(&self) -> String {
        let k = self.keys.len();
        let order: Vec<String> = std::iter::once(format!("u.c{k}"))
            .chain((0..k).map(|j| format!("u.c{j}")))
            .collect();
        format!(
            "{} ORDER BY {}",
            unnest_select(&self.front_group_types()),
            order.join(", ")
        )
    }

    /// The statement the front runs for the groups of a statement's rows in fired windows within
    /// their grace (`engine`): the arrays of [`Self::ingest_groups_statement`], then `$n + 1` the
    /// watermark the rows were classified against. Each group is upserted into its window's late
    /// row, which counts one more late version, and that version is written to history, as the
    /// statement for many rows does (`up`, `late_versions`); returns the number of versions.
    pub fn ingest_late_groups_statement(&self) -> String {
        let types = self.front_group_types();
        let wm = format!("${}::timestamptz", types.len() + 1);
        if self.batches_late() {
            return format!(
                "WITH /* pg_eventtime ingest, groups of fired windows */ up AS (\n{}\n)\n\
                 SELECT 0::bigint FROM (SELECT count(*) FROM up) u",
                self.pending_append(&self.front_group_rows(), &wm)
            );
        }
        let up = self.state_upsert(&self.front_group_rows(), "s.*");
        let late_versions = self.late_version_insert("up u", &format!("u.window_end <= {wm}"), &wm);
        format!(
            "WITH /* pg_eventtime ingest, groups of fired windows */ up AS (\n{up}\n),\n\
             late_versions AS (\n{late_versions}\nRETURNING 1\n)\n\
             SELECT count(*) FROM late_versions"
        )
    }

    /// The statement the engine runs for the rows of a statement past their window's grace
    /// (`engine`): `$1` the rows, an array of the source's row type, and `$2` the watermark that
    /// refused them. Each becomes a refused row as the statement for many rows writes it: its
    /// window computed from its event time by the same assignment, its document the row as
    /// `jsonb`. Kinds whose rows have several windows have no engine, so each row is one refused
    /// row here.
    pub fn ingest_refused_rows_statement(&self) -> String {
        let et = quote_ident(&self.event_time);
        let eid = match &self.event_id {
            Some(c) => format!("t.{}", quote_ident(&c.name)),
            None => "NULL::text".to_string(),
        };
        format!(
            "/* pg_eventtime ingest, refused rows */\n{}",
            self.refused_insert(
                &format!(
                    "{kt}{eid}, t.{et}, pg_catalog.to_jsonb(t.*) - '{WINDOW_START_COLUMN}' - '{WINDOW_END_COLUMN}'",
                    kt = prefix(&self.key_names(Some("t"))),
                ),
                ("w.window_start", "w.window_end"),
                "$2::timestamptz",
                &format!(
                    "FROM pg_catalog.unnest($1) t CROSS JOIN LATERAL {} w",
                    self.windows_of(&format!("t.{et}"))
                ),
            )
        )
    }

    /// The statement the engine runs for the event ids of a part of a statement whose rows are
    /// all in open windows, with the pipeline's own ledger: parameter `$j` is the array of column
    /// `j` (window start, keys, event id; see [`Self::front_ledger_types`]), inserted into the
    /// ledger in the arrays' order, which `RETURNING` keeps: the entries it returns are the new
    /// ones, a subsequence of the arrays. `None` where the ledger's identity has a window end too
    /// (cumulate windows, which have no front).
    pub fn ingest_ledger_statement(&self) -> Option<String> {
        if !self.step_end().is_empty() {
            return None;
        }
        let types = self.front_ledger_types()?;
        let k = prefix(&self.key_names(None));
        let ki = prefix(&self.key_names(Some("i")));
        Some(format!(
            "/* pg_eventtime ingest, event ids of open windows */\n\
             INSERT INTO {ids} AS i (window_start, {k}event_id)\n\
             {rows}\n\
             ON CONFLICT DO NOTHING\n\
             RETURNING i.window_start, {ki}i.event_id",
            ids = self.table("ids"),
            rows = unnest_select(&types),
        ))
    }

    /// The element types of [`Self::ingest_ledger_statement`]'s arrays: window start, the keys,
    /// the event id.
    pub fn front_ledger_types(&self) -> Option<Vec<String>> {
        let eid = self.ledger()?;
        let mut out = vec!["timestamptz".to_string()];
        out.extend(self.keys.iter().map(|c| c.type_name.clone()));
        out.push(eid.type_name.clone());
        Some(out)
    }

    /// The element types of [`Self::ingest_groups_statement`]'s arrays.
    pub fn front_group_types(&self) -> Vec<String> {
        let mut out: Vec<String> = self.keys.iter().map(|c| c.type_name.clone()).collect();
        out.extend(["timestamptz".into(), "timestamptz".into(), "bigint".into()]);
        for a in &self.aggs {
            out.push(a.acc_type.clone());
            if a.avg_kind.is_some() {
                out.push("bigint".into());
            }
        }
        out
    }

    /// Whether the window ending at `$1` is open against the pipeline's watermark: what the front
    /// asks when [`Self::ingest_on_time_statement`] inserted nothing. The answer is the one that
    /// statement read: its lock on the state keeps an advance of the watermark from committing
    /// until the transaction ends. Open, the row's id was in the ledger (a duplicate); closed, the
    /// statement goes to the PL/pgSQL function.
    pub fn front_window_open_statement(&self) -> String {
        format!(
            "SELECT /* pg_eventtime ingest, one row's window */ {cond}\n\
             FROM {INTERNAL_SCHEMA}.pipeline p WHERE p.id = {id}",
            id = self.id,
            cond = front_window_open("$1"),
        )
    }

    /// The PL/pgSQL of the single-row path, after the row's columns are in their variables:
    /// [`Self::ingest_one_statement`], then the counts, and the late version or the refused row
    /// when the landing asks for one.
    pub(super) fn one_row_block(&self) -> String {
        let kr = prefix(&self.key_names(Some("r")));
        let eid = match &self.event_id {
            Some(c) => format!("r.{}", quote_ident(&c.name)),
            None => "NULL::text".to_string(),
        };
        format!(
            "{stmt}\n\
             INTO v_ws, v_we, v_landing, v_w, v_kept, v_tid;\n\
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
            late = if self.batches_late() {
                // The row waits in its pending row for the batch.
                "NULL".to_string()
            } else {
                format!(
                    "n_versions := 1;\n{}",
                    self.late_version_insert(&format!("{} u", self.table("state")), &format!("u.ctid = {FN_LABEL}.v_tid"), &format!("{FN_LABEL}.v_w"))
                )
            },
            refused = self.refused_insert(
                &format!("{kr}{eid}, r.{}, to_jsonb(r.*)", quote_ident(&self.event_time)),
                (&format!("{FN_LABEL}.v_ws"), &format!("{FN_LABEL}.v_we")),
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
    pub(super) fn bulk_block(&self) -> String {
        let into = "INTO n_accepted, n_late, n_refused, n_duplicates, max_event_time, n_bad, v_bad, n_versions, v_w;\n";
        let stmt = format!("{}\n{into}", self.ingest_statement());
        let Some(_) = self.ledger() else {
            return stmt;
        };
        // One copy of the statement that dedups, run when the try did not happen or failed.
        let et = quote_ident(&self.event_time);
        format!(
            "IF (CASE WHEN v_row.n >= {FRESH_BULK_ROWS} THEN (\n\
               SELECT NOT EXISTS (SELECT FROM {ids} i WHERE i.window_start BETWEEN (SELECT min(w.window_start) FROM {lo} w) AND (SELECT max(w.window_start) FROM {hi} w))\n\
               FROM (SELECT min(n.{et}) AS lo, max(n.{et}) AS hi FROM new_rows n) m\n\
             ) ELSE false END) THEN\n\
               BEGIN\n\
             {fresh}\n\
               {into}\
               v_done := true;\n\
               EXCEPTION WHEN unique_violation THEN\n\
                 v_done := false;\n\
               END;\n\
             END IF;\n\
             IF NOT v_done THEN\n\
             {stmt}\
             END IF;\n",
            ids = self.table("ids"),
            lo = self.windows_of("m.lo"),
            hi = self.windows_of("m.hi"),
            fresh = self.ingest_statement_for(Ledger::Fresh, Rows::All),
        )
    }

    /// Whether the trigger function reads `v_row`: for the single-row path (kinds that give a row
    /// one window) and for the try of a plain ledger insert (pipelines with an event id). Session
    /// pipelines do neither.
    fn reads_first_row(&self) -> bool {
        !self.window.is_session() && (!self.window.multi() || self.ledger().is_some())
    }

    /// The single-row path when the statement has one row and the pipeline's windows give a row
    /// one window, the statement for many rows otherwise.
    fn branches(&self) -> String {
        if self.window.is_session() {
            format!(
                "{}\nINTO n_accepted, n_late, n_refused, n_duplicates, max_event_time, n_bad, v_bad, n_versions, v_w, n_merged;\n",
                self.session_ingest_statement()
            )
        } else if self.window.multi() {
            self.bulk_block()
        } else {
            format!(
                "IF v_row.n = 1 THEN\n{}ELSE\n{}END IF;\n",
                self.one_row_block(),
                self.bulk_block()
            )
        }
    }

    /// With offsets (SPEC §12): the claim of the statement's offsets, then [`Self::branches`]
    /// over the transition table when no row is a duplicate by its offset, and otherwise the
    /// statement for many rows over the rows after the offsets, with the pairs (row, window) of
    /// the rows it left out counted as duplicates.
    fn offset_branches(&self, first_row: &str) -> String {
        let Some(claim) = self.offsets_claim() else {
            return format!("{first_row}{}", self.branches());
        };
        let into = "INTO n_accepted, n_late, n_refused, n_duplicates, max_event_time, n_bad, v_bad, n_versions, v_w";
        let filtered = if self.window.is_session() {
            format!(
                "{}
{into}, n_merged;
",
                self.session_ingest_statement_from(Rows::AfterOffsets)
            )
        } else {
            format!(
                "{}
{into};
",
                self.ingest_statement_for(Ledger::Dedup, Rows::AfterOffsets)
            )
        };
        let pairs = if self.window.multi() {
            format!(
                "(SELECT count(*) FROM new_rows n LEFT JOIN LATERAL {} w ON true)",
                self.windows_of(&format!("n.{}", quote_ident(&self.event_time)))
            )
        } else {
            "(SELECT count(*) FROM new_rows)".to_string()
        };
        format!(
            "{claim}             IF v_committed IS NULL THEN
             {first_row}{branches}             ELSE
             {filtered}             n_duplicates := {pairs} - n_accepted - n_late - n_refused;
             END IF;
",
            branches = self.branches(),
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
    /// [`FRESH_BULK_ROWS`]) and the columns of its first row into the record `v_row`, when a
    /// branch reads it (see [`Self::reads_first_row`]).
    ///
    /// The ingest statements read the watermark without a row lock: in READ COMMITTED each takes
    /// its snapshot after its plan's `ROW EXCLUSIVE` lock on the state, which an advance's
    /// `EXCLUSIVE` lock waits for and makes wait, so the watermark it reads stays the latest until
    /// the transaction ends. Under REPEATABLE READ or SERIALIZABLE the snapshot is the
    /// transaction's: the function first takes that lock, then locks the pipeline's catalog row
    /// `FOR SHARE`, which fails with a serialization error (40001) when an advance committed after
    /// the snapshot, and makes a later advance wait. Writers of a pipeline lock no common row.
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
                format!(
                    "PERFORM {INTERNAL_SCHEMA}.advance_by_watermark_lag({id}, max_event_time, n_versions{merged});\n",
                    id = self.id,
                    merged = if self.window.is_session() { ", n_merged" } else { "" },
                ),
            ),
            // Late versions are announced here; with a lag, by the advance, in one notification
            // with what it fires.
            None => (
                if self.window.is_session() {
                    // Sessions refuse any other level than READ COMMITTED (`session_locks`).
                    String::new()
                } else {
                    format!(
                        "IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN\n\
                           LOCK TABLE {state} IN ROW EXCLUSIVE MODE;\n\
                           PERFORM FROM {INTERNAL_SCHEMA}.pipeline p WHERE p.id = {id} FOR SHARE;\n\
                         END IF;\n",
                        id = self.id,
                        state = self.table("state"),
                    )
                },
                if self.window.is_session() {
                    format!(
                        "IF n_versions + n_merged > 0 THEN\n\
                           PERFORM {INTERNAL_SCHEMA}.announce({name}, 0, n_versions, 0, {FN_LABEL}.v_w, n_merged);\n\
                         END IF;\n",
                        name = quote_literal(&self.name),
                    )
                } else {
                    format!(
                        "IF n_versions > 0 THEN\n\
                           PERFORM {INTERNAL_SCHEMA}.announce({name}, 0, n_versions, 0, {FN_LABEL}.v_w);\n\
                         END IF;\n",
                        name = quote_literal(&self.name),
                    )
                },
            ),
        };
        let reads: String = self
            .one_row_columns()
            .iter()
            .enumerate()
            .map(|(i, c)| format!(", r.{} AS c{i}", quote_ident(c)))
            .chain(self.aggs.iter().enumerate().filter_map(|(i, a)| {
                a.spec
                    .expr
                    .as_ref()
                    .map(|e| format!(", ({}) AS x{i}", e.sql))
            }))
            .collect();
        // Only the single-row path and the try of a plain ledger insert read it.
        let first_row = if self.reads_first_row() {
            format!(
                "SELECT (SELECT count(*) FROM (SELECT FROM new_rows LIMIT {FRESH_BULK_ROWS}) n) AS n{reads}\n\
                 INTO v_row FROM new_rows r{} LIMIT 1;\n",
                self.expression_row("r")
            )
        } else {
            String::new()
        };
        format!(
            "CREATE FUNCTION {f}() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER\n\
             SET search_path = pg_catalog, pg_temp SET jit = off{no_seqscan} AS $eventtime$\n\
             #variable_conflict use_column\n\
             <<{FN_LABEL}>>\n\
             DECLARE\n  n_accepted bigint; n_late bigint; n_refused bigint; n_duplicates bigint; max_event_time timestamptz;\n\
               v_row record; v_ws timestamptz; v_we timestamptz; v_landing integer; v_w timestamptz; v_kept boolean; v_tid tid; v_done boolean := false;\n\
               v_restricted boolean; n_bad bigint := 0; v_bad timestamptz; n_versions bigint := 0;{merged_var}{offsets_var}\n\
             BEGIN\n\
             v_restricted := {INTERNAL_SCHEMA}.restrict();\n\
             {before}\
             {session_locks}\
             {branches}\
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
            f = self.sql_trigger_function(),
            branches = self.offset_branches(&first_row),
            session_locks = if self.window.is_session() { self.session_locks() } else { String::new() },
            // The session statement looks each key's live sessions up by index and its state
            // rows up by tid, and a late version looks its window's main firing up by index: a
            // plan cached while the state or the history was empty (and analyzed so) must not
            // scan the whole table once per key or per late window.
            no_seqscan = if self.window.is_session() || self.uses_late_deltas() {
                " SET enable_seqscan = off"
            } else {
                ""
            },
            merged_var = if self.window.is_session() { " n_merged bigint := 0;" } else { "" },
            offsets_var = if self.offsets.is_some() { " v_committed jsonb;" } else { "" },
            id = self.id,
        )
    }
}

/// `SELECT u.c0, ... FROM unnest($1::<type 0>[], ...) AS u(c0, ...)`: the rows of the arrays the
/// engine passes as parameters, one per element type of `types`, in the arrays' order.
fn unnest_select(types: &[String]) -> String {
    let cols: Vec<String> = (0..types.len()).map(|j| format!("u.c{j}")).collect();
    let params: Vec<String> = types
        .iter()
        .enumerate()
        .map(|(j, t)| format!("${}::{t}[]", j + 1))
        .collect();
    let bare: Vec<String> = (0..types.len()).map(|j| format!("c{j}")).collect();
    format!(
        "SELECT {} FROM unnest({}) AS u({})",
        cols.join(", "),
        params.join(", "),
        bare.join(", ")
    )
}
