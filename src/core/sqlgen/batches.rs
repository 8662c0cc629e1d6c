//! Batched late firings (SPEC §3, `late_firing`). A late row of such a pipeline changes no row
//! another writer may change: its statement upserts the window's **pending** row of its own
//! backend and arrival watermark (`_et_pending`, the backend's slot; `_et_arrival`, the
//! watermark the row was classified against; `_et_since`, when the row was first written), as
//! an open window's writers upsert their slot rows. No late version is written then. The window's
//! next version is written by the advance or `tick()` that finds its first pending row at least
//! `late_firing` old ([`PipelineDef::late_batch_statement`]): the pending rows are taken out of
//! the state, added to the window's row of late rows, which counts one more version, and that
//! version is written to history, as a late statement's would be. The advance holds the state's
//! `EXCLUSIVE` lock, so every transaction that wrote a pending row before it has ended, and the
//! version holds every late row committed before it.

use super::*;

impl PipelineDef {
    /// The upsert of a statement's late partials, `rows` (as for [`Self::state_append`]), into
    /// the pending rows of this backend's slot and the arrival watermark `watermark`; the first
    /// write of a pending row records when (`clock_timestamp()`, which is after the commit of any
    /// batch the statement's transaction could not see). Returns the upserted rows' `ctid`s.
    pub(super) fn pending_append(&self, rows: &str, watermark: &str) -> String {
        let own = [
            ("_et_pending", format!("{INTERNAL_SCHEMA}.backend_slot()")),
            ("_et_arrival", watermark.to_string()),
            ("_et_since", "pg_catalog.clock_timestamp()".to_string()),
        ];
        // `_et_since` is not part of the row's identity: the first write's stays.
        format!(
            "{}\nRETURNING s.ctid",
            self.backend_row_upsert(rows, &own, 2)
        )
    }

    /// Writes the next version of every fired window whose batch is due: its first pending row
    /// was written at or before `$2 - late_firing` (`$2`: the processing time of the advance), or
    /// the watermark in force `$1` reaches the window's deadline, so that no accepted row is
    /// purged before its version. Each such window's pending rows leave the state and are added
    /// to its row of late rows and written as one late version under `$1`
    /// ([`Self::late_version_insert`]); their arrival watermarks and row counts go to the table
    /// `arrivals`, which the lateness account reads. Returns the number of versions written.
    pub fn late_batch_statement(&self) -> Option<String> {
        if self.batches_sessions() {
            return self.session_batch_statement();
        }
        let interval = self.late_firing.filter(|_| self.batches_late())?;
        let k = prefix(&self.key_names(None));
        let ks = prefix(&self.key_names(Some("s")));
        let n = format!("{INTERNAL_PREFIX}n");
        let k_after: String = self
            .key_names(None)
            .iter()
            .map(|c| format!(", {c}"))
            .collect();
        let rows = format!(
            "SELECT {k}window_start, window_end, sum({n})::bigint AS {n}{combined}\n\
             FROM taken GROUP BY {k}window_start, window_end ORDER BY window_start{k_after}",
            combined = self.combined(),
        );
        let up = self.state_upsert(&rows, "s.*");
        let late_versions = self.late_version_insert("up u", "true", "$1::timestamptz");
        Some(format!(
            "WITH /* pg_eventtime late batch */ pend AS MATERIALIZED (\n\
               SELECT s.ctid AS _et_tid, {ks}s.window_start, s.window_end, s._et_arrival, {state_s},\n\
                      min(s._et_since) OVER (PARTITION BY {ks}s.window_start, s.window_end) AS _et_first\n\
               FROM {state} s WHERE s._et_pending IS NOT NULL\n\
             ),\n\
             taken AS MATERIALIZED (\n\
               SELECT * FROM pend WHERE _et_first <= $2::timestamptz - {interval} OR window_end <= $1::timestamptz - {late}\n\
             ),\n\
             gone AS (\n\
               DELETE FROM {state} s WHERE s.ctid = ANY (ARRAY(SELECT _et_tid FROM taken))\n\
             ),\n\
             up AS (\n{up}\n),\n\
             late_versions AS (\n{late_versions}\nRETURNING 1\n),\n\
             arrived AS (\n\
               INSERT INTO {arrivals} ({k}window_start, window_end, watermark, {n})\n\
               SELECT {k}window_start, window_end, _et_arrival, sum({n})::bigint FROM taken GROUP BY {k}window_start, window_end, _et_arrival\n\
             )\n\
             SELECT count(*) FROM late_versions",
            state = self.table("state"),
            state_s = self.state_cols_of("s"),
            interval = duration_literal(interval),
            late = self.late(),
            arrivals = self.table("arrivals"),
        ))
    }

    /// Whether a batch is due at processing time `$1`, read without a lock (what `tick()` asks
    /// before it takes one): a pending row written at or before `$1 - late_firing`.
    pub fn late_batch_due_statement(&self) -> Option<String> {
        let interval = self
            .late_firing
            .filter(|_| self.batches_late() || self.batches_sessions())?;
        let pending = if self.batches_sessions() {
            ""
        } else {
            "s._et_pending IS NOT NULL AND "
        };
        Some(format!(
            "SELECT EXISTS (SELECT FROM {state} s WHERE {pending}s._et_since <= $1::timestamptz - {interval})",
            state = self.table("state"),
            interval = duration_literal(interval),
        ))
    }

    /// [`Self::late_batch_statement`] of a session pipeline. A session's state row holds its
    /// whole state, late rows included (`core::sqlgen::sessions`); one whose late rows wait is
    /// marked by `_et_since`, when the first of them was written. Each session due (as for the
    /// other kinds: `_et_since` at or before `$2 - late_firing`, or its deadline reached by `$1`)
    /// moves to its next version, written to history as kind `late` under `$1`, and is no longer
    /// marked.
    fn session_batch_statement(&self) -> Option<String> {
        let interval = self.late_firing?;
        let ku = prefix(&self.key_names(Some("u")));
        let k = prefix(&self.key_names(None));
        Some(format!(
            "WITH /* pg_eventtime late batch */ up AS (\n\
               UPDATE {state} s SET version = s.version + 1, _et_since = NULL\n\
               WHERE s._et_since IS NOT NULL AND (s._et_since <= $2::timestamptz - {interval} OR s.window_end <= $1::timestamptz - {late})\n\
               RETURNING s.*\n\
             ),\n\
             versions AS (\n\
               INSERT INTO {history} ({k}window_start, window_end, version, kind, merged_into, {aliases}watermark, {state_cols})\n\
               SELECT {ku}u.window_start, u.window_end, u.version, 'late', NULL::tstzrange, {finals}$1::timestamptz, {state_u} FROM up u\n\
               RETURNING 1\n\
             )\n\
             SELECT count(*) FROM versions",
            state = self.table("state"),
            history = self.table("history"),
            interval = duration_literal(interval),
            late = self.late(),
            aliases = prefix(&self.alias_cols()),
            state_cols = self.state_cols().join(", "),
            finals = prefix(&self.finals("u")),
            state_u = self.state_cols_of("u"),
        ))
    }
}
