//! The ingest statement of session windows. A row's own window is `[t, t + gap)`; the sessions of
//! a key are the islands of its windows that overlap strictly (touching windows stay apart).
//! Unlike the windows of the other kinds, a session depends on the rows before it, so the
//! statement reads the live sessions of its keys (the state: sessions not yet purged, fired or
//! not) and computes, for all its accepted rows at once, the islands they form with them:
//!
//! - an island with no live session is a new session;
//! - an island of one live session with the same bounds: the rows join it (a late version if it
//!   had fired);
//! - any other island is a new session `[min start, max end)`, made of its members' rows; each
//!   absorbed session that had published a version gets one more, kind `merged`, naming the new
//!   one in `merged_into`, and leaves the state.
//!
//! A new session that is already due (its end at or before the watermark) writes its version 1,
//! kind `late`, in the same statement; otherwise it fires with the others (`fire_statement`,
//! which serves every kind). Ingest statements of one key take turns (see
//! [`PipelineDef::session_locks`]), so each sees the sessions the one before it wrote.

use super::*;

/// The number of transaction locks the keys of a session pipeline are spread over: writers of
/// keys of the same bucket take turns.
pub const KEY_LOCKS: i32 = 1024;

impl PipelineDef {
    /// The gap of a session pipeline.
    fn gap(&self) -> i64 {
        match self.window {
            WindowSpec::Session { gap } => gap,
            _ => unreachable!("not a session pipeline"),
        }
    }

    /// The key hash of the rows aliased `a` (`_et_h` of the state): `hash_record` of the key
    /// columns, which hashes each value with its type's hash function, consistent with the
    /// type's equality; 0 without keys.
    pub(super) fn key_hash(&self, a: Option<&str>) -> String {
        if self.keys.is_empty() {
            "0".to_string()
        } else {
            format!(
                "pg_catalog.hash_record(ROW({}))",
                self.key_names(a).join(", ")
            )
        }
    }

    /// The own window of a row at `et`: `[et, et + gap)`, NULL bounds for an event time that is
    /// infinite or so late that the end would leave the timestamp range.
    pub(super) fn session_window_of(&self, et: &str) -> String {
        let last = crate::core::time::iso(crate::core::time::MAX_FINITE - self.gap());
        format!(
            "(SELECT x.s AS window_start, x.s + {d} AS window_end FROM (SELECT CASE WHEN {et} > '-infinity'::timestamptz AND {et} <= '{last}'::timestamptz THEN {et} END AS s) x)",
            d = duration_literal(self.gap()),
        )
    }

    /// What the trigger function runs before the ingest statement of a session pipeline: the
    /// check of the isolation level (a statement must see the sessions that the writer before it
    /// committed, so READ COMMITTED, as for a watermark lag), the state table's lock (taken before
    /// the key locks, in the order every writer and the advance take them, so that a writer
    /// holding a key lock never waits for the advance while the advance waits for it), and the
    /// locks of the statement's keys, in order: the rows of the pipeline's table `p<id>_locks`, one
    /// per bucket of [`KEY_LOCKS`] key hashes, locked `FOR UPDATE`, so that a statement of many
    /// keys takes a bounded number of locks. They are rows of a table only the pipeline's owner
    /// may lock, not advisory locks, which any role may take (and so stop every writer).
    pub(super) fn session_locks(&self) -> String {
        let lock = if self.watermark_lag.is_some() {
            String::new()
        } else {
            format!(
                "LOCK TABLE {} IN ROW EXCLUSIVE MODE;\n",
                self.table("state")
            )
        };
        format!(
            "IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN\n\
               PERFORM {INTERNAL_SCHEMA}.refuse_lag_isolation({id});\n\
             END IF;\n\
             {lock}\
             PERFORM FROM {buckets} b WHERE b.bucket IN (SELECT {hash} & {mask} FROM new_rows r) ORDER BY b.bucket FOR UPDATE OF b;\n",
            mask = KEY_LOCKS - 1,
            id = self.id,
            hash = self.key_hash(Some("r")),
            buckets = self.table("locks"),
        )
    }

    /// The set-based ingest statement of a session pipeline, run once per ingest statement
    /// against the transition table `new_rows` (see the module comment). It returns the counts
    /// of [`Self::ingest_statement`] followed by the number of `merged` versions it wrote.
    pub fn session_ingest_statement(&self) -> String {
        self.session_ingest_statement_from(Rows::All)
    }

    /// [`Self::session_ingest_statement`] over the statement's rows `rows`.
    pub(super) fn session_ingest_statement_from(&self, rows: Rows) -> String {
        let batched = self.batches_sessions();
        let k = prefix(&self.key_names(None));
        let kc = prefix(&self.key_names(Some("c")));
        let kg = prefix(&self.key_names(Some("g")));
        let kr = prefix(&self.key_names(Some("r")));
        let ws = quote_ident(WINDOW_START_COLUMN);
        let we = quote_ident(WINDOW_END_COLUMN);
        let n = format!("{INTERNAL_PREFIX}n");
        let accs = self.acc_cols();
        let acc_types: Vec<String> = self
            .aggs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.acc_columns(i))
            .map(|(_, t)| t.trim_end_matches(" NOT NULL").to_string())
            .collect();
        let list = |a: &str, cols: &[String]| -> String {
            cols.iter().map(|c| format!(", {a}{c}")).collect()
        };
        let partition = if self.keys.is_empty() {
            String::new()
        } else {
            format!("PARTITION BY {} ", self.key_names(None).join(", "))
        };
        let mut sql = self.ingest_prelude(true, rows);
        sql += &self.cls_counts();
        if self.ledger().is_some() {
            sql += &self.dedup_ctes(false);
        } else {
            sql += "kept AS NOT MATERIALIZED (SELECT * FROM cls),\n";
        }
        // The statement's rows, one group per key and own window (rows at the same instant).
        sql += &format!(
            "batch AS MATERIALIZED (\n\
               SELECT {k}{ws} AS ws, {we} AS we, max(_et_landing) AS _et_landing, count(*) AS {n}{partials}, {hash} AS _et_h\n\
               FROM kept WHERE _et_landing < 3 GROUP BY {k}{ws}, {we}\n\
             ),\n",
            partials = self
                .partials("")
                .iter()
                .zip(&accs)
                .map(|(p, c)| format!(", {p} AS {c}"))
                .collect::<String>(),
            hash = self.key_hash(None),
        );
        let refused = self.refused_insert(
            &format!("{kc}c._et_eid, c._et_et, c._et_doc"),
            (&format!("c.{ws}"), &format!("c.{we}")),
            "wm.w",
            "FROM kept c CROSS JOIN wm WHERE (SELECT max_landing FROM cls_n) = 3 AND c._et_landing = 3\nRETURNING 1",
        );
        let kb = prefix(&self.key_names(Some("b")));
        let ks = prefix(&self.key_names(Some("s")));
        // The live sessions of the statement's keys that overlap the span of the key's new
        // windows, looked up by key hash, key by key (the lateral subquery is kept as it is, so
        // the plan stays an index lookup per key whatever the statistics said when it was made).
        // A key's live sessions are disjoint, so a live session can join an island only by
        // overlapping one of its new windows: those outside the span are islands of their own,
        // which the statement would sort and leave as they are. The span is a filter above the
        // lookup (`OFFSET 0` keeps it out of the subquery), never an index condition: as one,
        // the planner may choose a scan of the state's `window_end` index per key.
        sql += &format!(
            "refused AS (\n{refused}\n),\n\
             live AS MATERIALIZED (\n\
               SELECT l.* FROM (SELECT {kb}b._et_h, min(b.ws) AS ws, max(b.we) AS we FROM batch b GROUP BY {kb}b._et_h) b\n\
               CROSS JOIN LATERAL (\n\
                 SELECT s.ctid AS _et_tid, {ks}s._et_h, s.window_start AS ws, s.window_end AS we, s.version{since_s}, s.{n}{accs_s}\n\
                 FROM {state} s WHERE s._et_h = b._et_h{key_match} OFFSET 0\n\
               ) l WHERE l.ws < b.we AND l.we > b.ws\n\
             ),\n",
            state = self.table("state"),
            accs_s = list("s.", &accs),
            since_s = if batched { ", s._et_since" } else { "" },
            key_match = self.same_key("b", "s"),
        );
        // Islands: a member starts a new one unless it starts before the greatest end of the
        // members before it (strict overlap).
        sql += &format!(
            "members AS (\n\
               SELECT {k}_et_h, ws, we, NULL::tid AS _et_tid, NULL::integer AS version{since_null}, {n}{accs_cast}, true AS _et_new FROM batch\n\
               UNION ALL\n\
               SELECT {k}_et_h, ws, we, _et_tid, version{since_live}, {n}{accs_plain}, false FROM live\n\
             ),\n\
             grouped AS MATERIALIZED (\n\
               SELECT g.*, sum(g._et_brk) OVER ({partition}ORDER BY g.ws, g.we ROWS UNBOUNDED PRECEDING) AS _et_isl\n\
               FROM (SELECT m.*, CASE WHEN m.ws < max(m.we) OVER ({partition}ORDER BY m.ws, m.we ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) THEN 0 ELSE 1 END AS _et_brk\n\
                     FROM members m) g\n\
             ),\n",
            accs_cast = accs
                .iter()
                .zip(&acc_types)
                .map(|(c, t)| format!(", {c}::{t} AS {c}"))
                .collect::<String>(),
            accs_plain = list("", &accs),
            since_null = if batched { ", NULL::timestamptz AS _et_since" } else { "" },
            since_live = if batched { ", _et_since" } else { "" },
        );
        let combined = self.combined();
        // Each island with a row of the statement: its bounds, its live sessions, and what it
        // becomes. `joined`: one live session with the same bounds, which the rows join; its
        // version moves on when it had fired. Otherwise a new session, version 1 at once when
        // it is already due.
        // With batched late firings a session's late rows wait for the batch (`_et_since` set,
        // its version unchanged): rows that join a fired session, and a session of new rows that
        // is already due. A statement whose rows merge sessions that had published versions
        // writes them at once, with the new session's version 1, as without batches: an
        // absorbed session leaves `_latest` only when the session that absorbs it is published.
        let island_batch = if batched {
            ", coalesce(bool_or(version > 0), false) AS _et_published, min(_et_since) AS _et_since"
        } else {
            ""
        };
        let (version_case, write_case, since_case) = if batched {
            (
                "CASE WHEN j.joined THEN i._et_live_version\n\
                      WHEN i.we <= wm.w AND i._et_published THEN 1 ELSE 0 END",
                "CASE WHEN j.joined THEN false ELSE coalesce(i.we <= wm.w AND i._et_published, false) END",
                ",\n\
                 CASE WHEN j.joined AND i._et_live_version > 0 THEN coalesce(i._et_since, pg_catalog.clock_timestamp())\n\
                      WHEN j.joined THEN i._et_since\n\
                      WHEN i.we <= wm.w AND NOT i._et_published THEN coalesce(i._et_since, pg_catalog.clock_timestamp()) END AS _et_since_new",
            )
        } else {
            (
                "CASE WHEN j.joined THEN CASE WHEN i._et_live_version > 0 THEN i._et_live_version + 1 ELSE 0 END\n\
                      WHEN i.we <= wm.w THEN 1 ELSE 0 END",
                "CASE WHEN j.joined THEN i._et_live_version > 0 ELSE coalesce(i.we <= wm.w, false) END",
                "",
            )
        };
        sql += &format!(
            "islands AS MATERIALIZED (\n\
               SELECT {k}_et_isl, min(_et_h) AS _et_h, min(ws) AS ws, max(we) AS we, count(_et_tid) AS _et_live,\n\
                      min(ws) FILTER (WHERE NOT _et_new) AS _et_live_ws, max(we) FILTER (WHERE NOT _et_new) AS _et_live_we,\n\
                      max(version) AS _et_live_version{island_batch},\n\
                      (array_agg(_et_tid ORDER BY ws) FILTER (WHERE NOT _et_new))[1] AS _et_survivor,\n\
                      sum({n})::bigint AS {n}{combined}\n\
               FROM grouped GROUP BY {k}_et_isl HAVING bool_or(_et_new)\n\
             ),\n\
             res AS MATERIALIZED (\n\
               SELECT i.*, j.joined,\n\
                      {version_case} AS version,\n\
                      {write_case} AS _et_write{since_case}\n\
               FROM islands i CROSS JOIN wm\n\
               CROSS JOIN LATERAL (SELECT i._et_live = 1 AND i.ws = i._et_live_ws AND i.we = i._et_live_we AS joined) j\n\
             ),\n",
        );
        // An island is its key and its number among the key's islands; with the key hash, the
        // join hashes on both, not on island numbers alone, which repeat from key to key.
        let key_island = |a: &str, b: &str| {
            format!(
                "{a}._et_h = {b}._et_h AND {a}._et_isl = {b}._et_isl{}",
                self.same_key(a, b)
            )
        };
        let mut set_accs: String = accs.iter().map(|c| format!(", {c} = r.{c}")).collect();
        let (since_col, since_val) = if batched {
            set_accs += ", _et_since = r._et_since_new";
            (", _et_since", ", r._et_since_new")
        } else {
            ("", "")
        };
        let history_cols = format!(
            "{k}window_start, window_end, version, kind, merged_into, {aliases}watermark, {state_cols}",
            aliases = prefix(&self.alias_cols()),
            state_cols = self.state_cols().join(", "),
        );
        // The state: the survivor (the island's earliest live session) takes the island's
        // bounds, rows and version; the other live sessions of the island leave; islands without
        // a live session are inserted.
        sql += &format!(
            "survived AS (\n\
               UPDATE {state} s SET window_start = r.ws, window_end = r.we, version = r.version, {n} = r.{n}{set_accs}\n\
               FROM res r WHERE s.ctid = ANY (ARRAY(SELECT _et_survivor FROM res)) AND s.ctid = r._et_survivor\n\
             ),\n\
             absorbed AS (\n\
               DELETE FROM {state} s WHERE s.ctid = ANY (ARRAY(\n\
                 SELECT g._et_tid FROM grouped g JOIN res r ON {gr}\n\
                 WHERE g._et_tid IS NOT NULL AND g._et_tid <> r._et_survivor))\n\
             ),\n\
             formed AS (\n\
               INSERT INTO {state} ({k}window_start, window_end, version, {state_cols}{since_col})\n\
               SELECT {kr}r.ws, r.we, r.version, {state_r}{since_val} FROM res r WHERE r._et_survivor IS NULL\n\
             ),\n\
             versions AS (\n\
               INSERT INTO {history} ({history_cols})\n\
               SELECT {kr}r.ws, r.we, r.version, 'late', NULL::tstzrange, {finals_r}wm.w, {state_r}\n\
               FROM res r CROSS JOIN wm WHERE r._et_write\n\
               UNION ALL\n\
               SELECT {kg}g.ws, g.we, g.version + 1, 'merged', pg_catalog.tstzrange(r.ws, r.we), {finals_g}wm.w, {state_g}\n\
               FROM grouped g JOIN res r ON {gr} CROSS JOIN wm\n\
               WHERE NOT r.joined AND g.version > 0\n\
               RETURNING kind\n\
             ),\n\
             counts AS MATERIALIZED (\n\
               SELECT coalesce(sum({n}) FILTER (WHERE _et_landing = 1), 0)::bigint AS accepted,\n\
                      coalesce(sum({n}) FILTER (WHERE _et_landing = 2), 0)::bigint AS late,\n\
                      (SELECT count(*) FROM refused) AS refused\n\
               FROM batch\n\
             )\n\
             SELECT accepted, late, refused, (SELECT rows FROM cls_n) - accepted - late - refused, (SELECT max_et FROM cls_n),\n\
                    (SELECT bad FROM cls_n), (SELECT bad_et FROM cls_n), (SELECT count(*) FILTER (WHERE kind = 'late') FROM versions), (SELECT w FROM wm),\n\
                    (SELECT count(*) FILTER (WHERE kind = 'merged') FROM versions) FROM counts",
            state = self.table("state"),
            history = self.table("history"),
            gr = key_island("g", "r"),
            state_cols = self.state_cols().join(", "),
            state_r = self.state_cols_of("r"),
            state_g = self.state_cols_of("g"),
            finals_r = prefix(&self.finals("r")),
            finals_g = prefix(&self.finals("g")),
        );
        sql
    }
}
