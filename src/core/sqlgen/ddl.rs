//! The DDL of a pipeline: its internal tables, trigger and views, their hand-over to the
//! pipeline's owner, and what `drop_pipeline` drops.

use super::*;

impl PipelineDef {
    /// Tables and indexes, in creation order.
    pub fn create_tables(&self) -> Vec<String> {
        let keys = self.key_names(None);
        let kd = prefix(&self.key_defs());
        let session = self.window.is_session();
        // A session is identified by its key and both bounds: a session extended at its end is
        // a new session with the same start.
        let session_end = if self.window.end_identifies() {
            "window_end, "
        } else {
            ""
        };
        let step_end = self.step_end();
        let mut out = vec![
            format!(
                "CREATE TABLE {} ({kd}window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, \
                 version integer NOT NULL DEFAULT 0, {INTERNAL_PREFIX}n bigint NOT NULL{}{}) WITH (fillfactor = 70)",
                self.table("state"),
                self.acc_defs().iter().map(|d| format!(", {d}")).collect::<String>(),
                // Sessions find the live sessions of a key by its hash.
                if session {
                    format!(
                        ", {INTERNAL_PREFIX}h integer GENERATED ALWAYS AS ({}) STORED{}",
                        self.key_hash(None),
                        // Since when a session's late rows wait for their batch.
                        if self.batches_sessions() { ", _et_since timestamptz" } else { "" }
                    )
                } else if self.flags_late_rows() {
                    // Marks a fired window's row of late rows, never updated (see
                    // `late_row_flag`); an open window's rows are one per writing backend
                    // (see `state_slots`).
                    format!(
                        ", _et_late boolean NOT NULL DEFAULT false{}{}",
                        if self.uses_slots() { ", _et_slot integer" } else { "" },
                        // A fired window's late rows waiting for their batch (see
                        // `core::sqlgen::batches`).
                        if self.batches_late() {
                            ", _et_pending integer, _et_arrival timestamptz, _et_since timestamptz"
                        } else {
                            ""
                        }
                    )
                } else {
                    String::new()
                }
            ),
            // Open windows get one row per ingest statement (version 0): writers never touch a
            // common row. A fired window within its grace has one row (its version): late
            // statements of a window take turns on it, for gapless versions.
            format!(
                "CREATE UNIQUE INDEX ON {} ({}{step_end}window_start) NULLS NOT DISTINCT WHERE {}",
                self.table("state"),
                prefix(&keys),
                self.late_row_predicate()
            ),
            format!("CREATE INDEX ON {} (window_end)", self.table("state")),
        ];
        // An open window's row of each backend that wrote it, which its statements upsert.
        if self.uses_slots() {
            out.push(format!(
                "CREATE UNIQUE INDEX ON {} ({}window_start, {step_end}_et_slot) NULLS NOT DISTINCT WHERE _et_slot IS NOT NULL",
                self.table("state"),
                prefix(&keys),
            ));
        }
        // A fired window's pending late rows, one per backend and arrival watermark, which its
        // late statements upsert; and the order in which their batches come due.
        if self.batches_late() {
            out.push(format!(
                "CREATE UNIQUE INDEX ON {} ({}window_start, {step_end}_et_pending, _et_arrival) NULLS NOT DISTINCT WHERE _et_pending IS NOT NULL",
                self.table("state"),
                prefix(&keys),
            ));
            out.push(format!(
                "CREATE INDEX ON {} (_et_since) WHERE _et_pending IS NOT NULL",
                self.table("state"),
            ));
        }
        out.extend([
            // Beside the published values, each version keeps the window's accumulators (what a
            // restatement adds to), and the transaction that wrote it and the order of writing
            // (what `eventtime.changes` reads).
            format!(
                "CREATE TABLE {} ({kd}window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, \
                 version integer NOT NULL, kind text NOT NULL, {}{}sealed boolean GENERATED ALWAYS AS (version = 1) STORED, \
                 watermark timestamptz NOT NULL, fired_at timestamptz NOT NULL DEFAULT now(), \
                 {INTERNAL_PREFIX}n bigint NOT NULL{}, \
                 {INTERNAL_PREFIX}xid xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(), \
                 {INTERNAL_PREFIX}seq bigint GENERATED ALWAYS AS IDENTITY)",
                self.table("history"),
                if session { "merged_into tstzrange, " } else { "" },
                self.aggs.iter().map(|a| format!("{} {}, ", quote_ident(&a.spec.alias), a.result_type)).collect::<String>(),
                self.acc_defs().iter().map(|d| format!(", {d}")).collect::<String>()
            ),
            // Window start first: one day of any view, and one window of one key, are ranges of
            // this index; `version DESC` gives `_latest` each window's greatest version first,
            // with no sort.
            format!(
                "CREATE UNIQUE INDEX ON {} (window_start, {}{session_end}version DESC) NULLS NOT DISTINCT",
                self.table("history"),
                prefix(&keys)
            ),
            format!(
                "CREATE INDEX ON {} ({INTERNAL_PREFIX}xid)",
                self.table("history")
            ),
            format!(
                "CREATE TABLE {} ({kd}event_id {}, event_time timestamptz NOT NULL, \"row\" jsonb{row_null}, \
                 window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, deadline timestamptz NOT NULL, \
                 watermark timestamptz NOT NULL, refused_at timestamptz NOT NULL DEFAULT now(), \
                 {INTERNAL_PREFIX}id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY{doc_of})",
                self.table("refused"),
                self.event_id.as_ref().map(|c| c.sql_type()).unwrap_or_else(|| "text".into()),
                // A row refused for several windows keeps its document in the first one's row.
                row_null = if self.refused_doc_once { "" } else { " NOT NULL" },
                doc_of = if self.refused_doc_once {
                    format!(", {INTERNAL_PREFIX}doc_of bigint CHECK (({INTERNAL_PREFIX}doc_of IS NULL) <> (\"row\" IS NULL))")
                } else {
                    String::new()
                }
            ),
            format!(
                "CREATE INDEX ON {} (window_start)",
                self.table("refused")
            ),
            // The refused rows a restatement folded in, by the version that folded them: refused
            // rows stay as they arrived.
            format!(
                "CREATE TABLE {} (refused_id bigint PRIMARY KEY, version integer NOT NULL)",
                self.table("folds")
            ),
        ]);
        // With batched late firings: the rows each batch wrote, by arrival watermark, which the
        // lateness account reads (a version's own watermark is the batch's).
        if self.batches_late() {
            out.push(format!(
                "CREATE TABLE {} ({kd}window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, \
                 watermark timestamptz NOT NULL, {INTERNAL_PREFIX}n bigint NOT NULL, fired_at timestamptz NOT NULL DEFAULT now())",
                self.table("arrivals")
            ));
            out.push(format!(
                "CREATE INDEX ON {} (window_start)",
                self.table("arrivals")
            ));
        }
        if session {
            out.push(format!(
                "CREATE INDEX ON {} ({INTERNAL_PREFIX}h)",
                self.table("state")
            ));
            if self.batches_sessions() {
                out.push(format!(
                    "CREATE INDEX ON {} (_et_since) WHERE _et_since IS NOT NULL",
                    self.table("state")
                ));
            }
            // The key locks of session writers (see `session_locks`): one row per bucket.
            out.push(format!(
                "CREATE TABLE {} (bucket integer PRIMARY KEY)",
                self.table("locks")
            ));
            out.push(format!(
                "INSERT INTO {} SELECT pg_catalog.generate_series(0, {})",
                self.table("locks"),
                super::sessions::KEY_LOCKS - 1
            ));
        }
        // Sessions dedup per key and id: a session has no window of its own to scope an id to.
        let ledger_window = if session {
            String::new()
        } else if step_end.is_empty() {
            "window_start timestamptz NOT NULL, ".to_string()
        } else {
            "window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, ".to_string()
        };
        if let Some(eid) = self.ledger() {
            out.push(format!(
                "CREATE TABLE {} ({ledger_window}{kd}event_id {} NOT NULL)",
                self.table("ids"),
                eid.sql_type()
            ));
            out.push(format!(
                "CREATE UNIQUE INDEX ON {} ({}{}event_id) NULLS NOT DISTINCT",
                self.table("ids"),
                if session {
                    String::new()
                } else {
                    format!("window_start, {step_end}")
                },
                prefix(&keys)
            ));
        }
        // The committed offset of each source (SPEC §12), which each ingest statement that brings
        // its rows moves to the greatest it brought, keeping the one before in `previous`: what
        // the statement's rows are compared with. One row per source, locked by the statement's
        // upsert, so writers of different sources never wait for each other.
        if self.offsets.is_some() {
            out.push(format!(
                "CREATE TABLE {} (source text PRIMARY KEY, \"offset\" bigint NOT NULL, previous bigint, \
                 committed_at timestamptz NOT NULL DEFAULT now())",
                self.table("offsets")
            ));
        }
        // History, refused rows, folds and the ledger are written by the pipeline only: an INSERT
        // from anywhere but the extension's own statements (which run in a security-restricted
        // operation) is refused, once per statement; updates, deletes and truncation always.
        let mut guarded = vec![
            ("history", "history"),
            ("refused", "refused rows"),
            ("folds", "folds"),
        ];
        if self.ledger().is_some() {
            guarded.push(("ids", "event-id ledger"));
        }
        if self.batches_late() {
            guarded.push(("arrivals", "late arrivals"));
        }
        // The offsets are also updated, by the ingest statements only.
        if self.offsets.is_some() {
            out.push(format!(
                "CREATE TRIGGER write_guard BEFORE INSERT OR UPDATE ON {} FOR EACH STATEMENT EXECUTE FUNCTION {INTERNAL_SCHEMA}.guard_insert({}, 'offsets')",
                self.table("offsets"),
                quote_literal(&self.name),
            ));
            out.push(format!(
                "CREATE TRIGGER read_only BEFORE DELETE ON {} FOR EACH ROW EXECUTE FUNCTION {INTERNAL_SCHEMA}.refuse_change({}, 'offsets')",
                self.table("offsets"),
                quote_literal(&self.name),
            ));
            out.push(format!(
                "CREATE TRIGGER read_only_truncate BEFORE TRUNCATE ON {} FOR EACH STATEMENT EXECUTE FUNCTION {INTERNAL_SCHEMA}.refuse_change({}, 'offsets')",
                self.table("offsets"),
                quote_literal(&self.name),
            ));
        }
        for (t, what) in &guarded {
            out.push(format!(
                "CREATE TRIGGER write_guard BEFORE INSERT ON {} FOR EACH STATEMENT EXECUTE FUNCTION {INTERNAL_SCHEMA}.guard_insert({}, {})",
                self.table(t),
                quote_literal(&self.name),
                quote_literal(what)
            ));
        }
        for (t, what) in guarded {
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
        let session = self.window.is_session();
        let merged_into = if session { "merged_into, " } else { "" };
        let history_cols = format!(
            "{k}window_start, window_end, version, kind, {merged_into}{aliases}sealed, watermark, fired_at"
        );
        let kc = self
            .key_names(None)
            .iter()
            .map(|c| format!(", {c}"))
            .collect::<String>();
        // The greatest version of each window, in the order of the history's unique index; a
        // session absorbed by another (its greatest version is `merged`) is not shown.
        let latest = if self.window.end_identifies() && !session {
            format!(
                "SELECT DISTINCT ON (window_start{kc}, window_end) {history_cols} FROM {} ORDER BY window_start{kc}, window_end, version DESC",
                self.table("history"),
            )
        } else if session {
            format!(
                "SELECT {history_cols} FROM (SELECT DISTINCT ON (window_start{kc}, window_end) {history_cols} FROM {} ORDER BY window_start{kc}, window_end, version DESC) l WHERE kind <> 'merged'",
                self.table("history"),
            )
        } else {
            format!(
                "SELECT DISTINCT ON (window_start{kc}) {history_cols} FROM {} ORDER BY window_start{kc}, version DESC",
                self.table("history"),
            )
        };
        let mut out = vec![
            format!("CREATE VIEW {} AS SELECT {history_cols} FROM {}", self.view("_history"), self.table("history")),
            format!("CREATE VIEW {} AS {latest}", self.view("_latest")),
            format!(
                "CREATE VIEW {} AS SELECT {history_cols} FROM {} WHERE version = 1",
                self.view("_sealed"),
                self.table("history")
            ),
            format!(
                "CREATE VIEW {} AS SELECT {kr}r.event_id, r.event_time, {row}, r.window_start, r.window_end, r.deadline, r.watermark, r.refused_at, \
                 f.version AS restated_in FROM {} r LEFT JOIN {} f ON f.refused_id = r.{INTERNAL_PREFIX}id{doc_join}",
                self.view("_refused"),
                self.table("refused"),
                self.table("folds"),
                kr = prefix(&self.key_names(Some("r"))),
                row = if self.refused_doc_once {
                    "coalesce(r.\"row\", d.\"row\") AS \"row\"".to_string()
                } else {
                    "r.\"row\"".to_string()
                },
                doc_join = if self.refused_doc_once {
                    format!(" LEFT JOIN {} d ON d.{INTERNAL_PREFIX}id = r.{INTERNAL_PREFIX}doc_of", self.table("refused"))
                } else {
                    String::new()
                },
            ),
        ];
        out.extend(
            ["_history", "_latest", "_sealed", "_refused"]
                .iter()
                .map(|s| self.read_only_trigger(s)),
        );
        out.extend(self.create_provisional_views());
        out
    }

    /// The trigger that refuses writes through the view of `suffix`: simple views would pass
    /// them through to the tables, and nobody writes history or refused rows but the pipeline.
    fn read_only_trigger(&self, suffix: &str) -> String {
        let what = match suffix {
            "_refused" => "refused rows",
            "_provisional" | "_current" => "results",
            _ => "history",
        };
        format!(
            "CREATE TRIGGER read_only INSTEAD OF INSERT OR UPDATE OR DELETE ON {} FOR EACH ROW EXECUTE FUNCTION {INTERNAL_SCHEMA}.refuse_change({}, {})",
            self.view(suffix),
            quote_literal(&self.name),
            quote_literal(what)
        )
    }

    /// The comments of the views of `suffixes`.
    pub fn view_comments(&self, suffixes: &[&str]) -> Vec<String> {
        [
            ("_history", "every firing of every window: version 1 sealed, then late versions and restatements"),
            ("_latest", "the greatest version of each window"),
            ("_sealed", "version 1 of each window, as first published; never changes"),
            ("_refused", "rows that arrived after their window's grace, with the window they missed and the watermark that refused them"),
            ("_provisional", "windows that have not fired, with the aggregates of their rows so far: no version, nothing published"),
            ("_current", "the latest version of each fired window, and the provisional results of the others"),
        ]
        .iter()
        .filter(|(suffix, _)| suffixes.contains(suffix))
        .map(|(suffix, what)| {
            format!(
                "COMMENT ON VIEW {} IS {}",
                self.view(suffix),
                quote_literal(&format!("pg_eventtime pipeline {}: {what}", self.name))
            )
        })
        .collect()
    }

    /// `_provisional`: each window with state that has not fired (its end after the pipeline
    /// watermark, or no watermark yet), with the aggregates of its accepted rows so far, combined
    /// from its state rows as the main firing combines them, and the watermark it was read at.
    /// No version is minted and nothing is published. The watermark comes from
    /// `_eventtime.provisional_watermark`, which checks that the caller may read the pipeline
    /// (the catalog's row-level security judges the caller, not the view's owner). Predicates on
    /// the keys and the window start reach the state's scan through the grouping.
    ///
    /// `_current`: `_latest` and `_provisional` together, with `provisional` telling which;
    /// a provisional window has no version, kind `provisional`, `sealed` false and no `fired_at`.
    pub fn create_provisional_views(&self) -> Vec<String> {
        let k = prefix(&self.key_names(None));
        let session = self.window.is_session();
        let merged_into = if session { "merged_into, " } else { "" };
        let no_merge = if session { "NULL::tstzrange, " } else { "" };
        // Read once per query: a subquery the planner keeps (OFFSET 0), which the grouping
        // reads laterally.
        let watermark = format!(
            "(SELECT {INTERNAL_SCHEMA}.provisional_watermark({}) AS w OFFSET 0) wm",
            self.id
        );
        let finals = self
            .finals("f")
            .iter()
            .zip(self.alias_cols())
            .map(|(e, a)| format!("{e} AS {a}, "))
            .collect::<String>();
        let aliases = prefix(&self.alias_cols());
        vec![
            format!(
                "CREATE VIEW {} AS SELECT {kf}f.window_start, f.window_end, {finals}wm.w AS watermark\n\
                 FROM {watermark} CROSS JOIN LATERAL (SELECT {k}window_start, window_end, sum({n})::bigint AS {n}{combined} FROM {state} s\n\
                       WHERE s.window_end > coalesce(wm.w, '-infinity'){slot} GROUP BY {k}window_start, window_end) f{pending}",
                self.view("_provisional"),
                pending = self.provisional_pending(&finals, &watermark),
                kf = prefix(&self.key_names(Some("f"))),
                n = format_args!("{INTERNAL_PREFIX}n"),
                combined = self.combined(),
                state = self.table("state"),
                // The rows of open windows are their writers' slots: a read of one window of one
                // key is then a range of the state's unique index on keys, start and slot.
                slot = if self.uses_slots() { " AND s._et_slot IS NOT NULL" } else { "" },
            ),
            format!(
                "CREATE VIEW {} AS\n\
                 SELECT {k}window_start, window_end, version, kind, {merged_into}{aliases}sealed, watermark, fired_at, false AS provisional FROM {}\n\
                 UNION ALL\n\
                 SELECT {k}window_start, window_end, NULL::integer, 'provisional', {no_merge}{aliases}false, watermark, NULL::timestamptz, true FROM {}",
                self.view("_current"),
                self.view("_latest"),
                self.view("_provisional"),
            ),
            self.read_only_trigger("_provisional"),
            self.read_only_trigger("_current"),
        ]
    }

    /// With batched late firings, the `UNION ALL` branch of `_provisional` for fired windows with
    /// pending late rows: their next version's values, the latest version's state with the
    /// pending rows added (see `core::sqlgen::batches`). Nothing otherwise.
    fn provisional_pending(&self, finals: &str, watermark: &str) -> String {
        if self.batches_sessions() {
            // A session's row holds its whole state, waiting rows included.
            return format!(
                "\nUNION ALL\n\
                 SELECT {kf}f.window_start, f.window_end, {finals}wm.w\n\
                 FROM {watermark} CROSS JOIN {state} f WHERE f._et_since IS NOT NULL",
                kf = prefix(&self.key_names(Some("f"))),
                state = self.table("state"),
            );
        }
        if !self.batches_late() {
            return String::new();
        }
        let k = prefix(&self.key_names(None));
        format!(
            "\nUNION ALL\n\
             SELECT {kf}f.window_start, f.window_end, {finals}wm.w\n\
             FROM {watermark} CROSS JOIN LATERAL (\n\
               SELECT {kp}p.window_start, p.window_end{merged}\n\
               FROM (SELECT {k}window_start, window_end, sum({n})::bigint AS {n}{combined} FROM {state} s\n\
                     WHERE s._et_pending IS NOT NULL GROUP BY {k}window_start, window_end) p\n\
               LEFT JOIN LATERAL (SELECT {state_h} FROM {history} h WHERE h.window_start = p.window_start{same_end}{same_key}\n\
                                  ORDER BY h.version DESC LIMIT 1) h ON true\n\
             ) f",
            kf = prefix(&self.key_names(Some("f"))),
            kp = prefix(&self.key_names(Some("p"))),
            merged = self.merged_state("h", "p"),
            n = format_args!("{INTERNAL_PREFIX}n"),
            combined = self.combined(),
            state = self.table("state"),
            state_h = self.state_cols_of("h"),
            history = self.table("history"),
            same_end = self.same_end("h", "p"),
            same_key = self.same_key("h", "p"),
        )
    }

    /// The aggregates so far of one window of one key, as a `jsonb` object by alias, from its
    /// state rows that match `filter` (a condition on the state aliased `t`), combined as
    /// `_provisional` combines them; no row when it has none. For `explain`.
    pub fn provisional_values(&self, filter: &str) -> String {
        let pairs = self
            .finals("f")
            .iter()
            .zip(&self.aggs)
            .map(|(e, a)| format!("{}, {e}", quote_literal(&a.spec.alias)))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "SELECT pg_catalog.jsonb_build_object({pairs}) FROM (SELECT sum({n})::bigint AS {n}{combined} FROM {state} t WHERE {filter}) f WHERE f.{n} > 0",
            n = format_args!("{INTERNAL_PREFIX}n"),
            combined = self.combined(),
            state = self.table("state"),
        )
    }

    /// The typed feed `<name>_changes(after text DEFAULT NULL)`: the rows of
    /// `eventtime.changes(name, after)` with the keys and aggregates in the history's own columns
    /// and types (read back from the feed's `jsonb` through the history view's row type, which
    /// `to_jsonb` wrote them from), so that a driver gets `numeric`, `timestamptz` and arrays as
    /// themselves. It runs as its caller: `eventtime.changes` checks what the caller may read.
    pub fn create_feed_function(&self) -> Vec<String> {
        let session = self.window.is_session();
        let typed = |c: &Column| format!("{} {}", quote_ident(&c.name), c.type_name);
        let mut out_cols: Vec<String> = self.keys.iter().map(typed).collect();
        out_cols.extend(
            [
                "window_start timestamptz",
                "window_end timestamptz",
                "version integer",
                "kind text",
            ]
            .map(String::from),
        );
        if session {
            out_cols.push("merged_into tstzrange".into());
        }
        out_cols.extend(
            self.aggs
                .iter()
                .map(|a| format!("{} {}", quote_ident(&a.spec.alias), a.result_type)),
        );
        out_cols.extend(
            [
                "sealed boolean",
                "watermark timestamptz",
                "fired_at timestamptz",
                "\"cursor\" text",
            ]
            .map(String::from),
        );
        let mut sel: Vec<String> = self.key_names(Some("r"));
        sel.extend(["c.window_start", "c.window_end", "c.version", "c.kind"].map(String::from));
        if session {
            sel.push("c.merged_into".into());
        }
        sel.extend(
            self.aggs
                .iter()
                .map(|a| format!("r.{}", quote_ident(&a.spec.alias))),
        );
        sel.extend(["c.sealed", "c.watermark", "c.fired_at", "c.\"cursor\""].map(String::from));
        let body = format!(
            "SELECT {} FROM eventtime.changes({}, $1) c \
             CROSS JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::{}, c.key OPERATOR(pg_catalog.||) c.aggregates) r",
            sel.join(", "),
            quote_literal(&self.name),
            self.view("_history"),
        );
        let f = self.view(FEED_SUFFIX);
        vec![
            format!(
                "CREATE FUNCTION {f}(after text DEFAULT NULL) RETURNS TABLE ({}) LANGUAGE sql VOLATILE \
                 SET search_path = pg_catalog, pg_temp AS {}",
                out_cols.join(", "),
                quote_literal(&body)
            ),
            format!(
                "COMMENT ON FUNCTION {f}(text) IS {}",
                quote_literal(&format!(
                    "pg_eventtime pipeline {}: the versions committed since a cursor (eventtime.changes), keys and aggregates in their own types",
                    self.name
                ))
            ),
        ]
    }

    /// Hands the internal tables, the trigger functions and the aggregates' helper objects
    /// ([`ResolvedAgg::helpers`]), created by the catalog owner, to the
    /// pipeline's owner `owner` (a quoted role name): the PL/pgSQL function, `SECURITY DEFINER`,
    /// then runs as that owner, the front runs its statement as that owner, and nobody but the
    /// trigger calls either.
    pub fn hand_over(&self, owner: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .tables()
            .iter()
            .map(|t| format!("ALTER TABLE IF EXISTS {} OWNER TO {owner}", self.table(t)))
            .collect();
        for f in self.trigger_functions() {
            out.push(format!("REVOKE ALL ON FUNCTION {f}() FROM PUBLIC"));
            out.push(format!("ALTER FUNCTION {f}() OWNER TO {owner}"));
        }
        for (kind, signature) in self.aggs.iter().flat_map(|a| a.helpers()) {
            out.push(format!("ALTER {kind} {signature} OWNER TO {owner}"));
        }
        out
    }

    /// The trigger's function, and the PL/pgSQL function behind it when it is a front.
    fn trigger_functions(&self) -> Vec<String> {
        let mut out = vec![self.trigger_function()];
        if self.has_front() {
            out.push(self.sql_trigger_function());
        }
        out
    }

    /// Everything the pipeline created, in an order that drops dependents first. The source
    /// table is left alone except for the trigger.
    pub fn drop_objects(&self, source_exists: bool) -> Vec<String> {
        let mut out = vec![format!(
            "DROP FUNCTION IF EXISTS {}(text)",
            self.view(FEED_SUFFIX)
        )];
        out.extend(
            VIEW_SUFFIXES
                .iter()
                .map(|s| format!("DROP VIEW IF EXISTS {}", self.view(s))),
        );
        if source_exists {
            out.push(format!(
                "DROP TRIGGER IF EXISTS {} ON {}",
                self.trigger_name(),
                self.source
            ));
        }
        for f in self.trigger_functions() {
            out.push(format!("DROP FUNCTION IF EXISTS {f}()"));
        }
        for (kind, signature) in self.aggs.iter().flat_map(|a| a.helpers()) {
            out.push(format!("DROP {kind} IF EXISTS {signature}"));
        }
        for t in self.tables() {
            out.push(format!("DROP TABLE IF EXISTS {}", self.table(t)));
        }
        out
    }
}
