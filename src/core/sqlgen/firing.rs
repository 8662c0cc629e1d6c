//! What an advance of the watermark runs: the main firing of the windows it passes, and the purge
//! of those whose deadline it reaches.

use super::*;

impl PipelineDef {
    /// Purges the state of every window whose deadline is at or before `$1`. Runs after
    /// [`Self::fire_statement`], so every purged window has fired. Returns the number of windows
    /// purged that fired before this advance (each has one row, `version` 1 or more; the
    /// windows this advance fires and purges at once, whose rows are still one per ingest
    /// statement, are counted by [`Self::fire_statement`]).
    ///
    /// With [`PipelineDef::late_deltas`], a window that fired keeps its rows (one per ingest
    /// statement) until its deadline, plus one for its late rows: the windows counted are those
    /// that ended at or before the previous watermark `$2`.
    pub fn purge_statement(&self) -> String {
        if !self.uses_late_deltas() {
            return format!(
                "WITH gone AS (DELETE FROM {state} s WHERE s.window_end <= $1 - {late} RETURNING s.version)\n\
                 SELECT count(*) FILTER (WHERE version > 0) FROM gone",
                state = self.table("state"),
                late = self.late(),
            );
        }
        let k = prefix(&self.key_names(None));
        let ks = prefix(&self.key_names(Some("s")));
        format!(
            "WITH gone AS (DELETE FROM {state} s WHERE s.window_end <= $1 - {late} RETURNING {ks}s.window_start, s.window_end)\n\
             SELECT count(*) FROM (SELECT DISTINCT {k}{step_end}window_start FROM gone WHERE window_end <= $2::timestamptz) g",
            state = self.table("state"),
            late = self.late(),
            step_end = self.step_end(),
        )
    }

    /// Writes the main firing (version 1) of every window with state that ends after the previous
    /// watermark `$2` (NULL before the first advance) and at or before the new one `$1`: exactly the
    /// windows this advance fires, so the state needs no mark. Their rows (one per ingest
    /// statement, all of version 0, since only fired windows have a versioned row) are combined
    /// per window; a window still within its grace has its rows replaced by the combined one,
    /// version 1, for its late statements. The rows of a window whose deadline the new watermark
    /// also reaches are left to [`Self::purge_statement`]. Returns the number of windows fired,
    /// and of those the new watermark also purges.
    ///
    /// With [`PipelineDef::late_deltas`], the state is only read: a window's rows stay as they
    /// are until its deadline, and its late statements add to the main firing in history.
    pub fn fire_statement(&self) -> String {
        let k = prefix(&self.key_names(None));
        let kf = prefix(&self.key_names(Some("f")));
        let combined = self.combined();
        let accs = self.state_cols().join(", ");
        let accs_f = self.state_cols_of("f");
        let compaction = if self.uses_late_deltas() {
            String::new()
        } else {
            format!(
                "compacted AS (\n\
                   DELETE FROM {state} s WHERE s.window_end <= $1 AND ($2::timestamptz IS NULL OR s.window_end > $2) AND s.window_end > $1 - {late}\n\
                 ),\n\
                 kept AS (\n\
                   INSERT INTO {state} ({k}window_start, window_end, version, {accs})\n\
                   SELECT {kf}f.window_start, f.window_end, 1, {accs_f} FROM f WHERE f.window_end > $1 - {late}\n\
                 ),\n",
                state = self.table("state"),
                late = self.late(),
            )
        };
        format!(
            "WITH f AS MATERIALIZED (\n\
               SELECT {k}window_start, window_end, sum({n})::bigint AS {n}{combined}\n\
               FROM {state} s WHERE s.window_end <= $1 AND ($2::timestamptz IS NULL OR s.window_end > $2)\n\
               GROUP BY {k}window_start, window_end\n\
             ),\n\
             {compaction}\
             fired AS (\n\
               INSERT INTO {history} ({k}window_start, window_end, version, kind, {aliases}watermark, {accs})\n\
               SELECT {kf}f.window_start, f.window_end, 1, 'main', {finals}$1, {accs_f} FROM f\n\
               RETURNING 1\n\
             )\n\
             SELECT (SELECT count(*) FROM fired), (SELECT count(*) FROM f WHERE f.window_end <= $1 - {late})",
            n = format_args!("{INTERNAL_PREFIX}n"),
            state = self.table("state"),
            history = self.table("history"),
            aliases = prefix(&self.alias_cols()),
            finals = prefix(&self.finals("f")),
            late = self.late(),
        )
    }
}
