//! What an advance of the watermark runs: the main firing of the windows it passes, and the purge
//! of those whose deadline it reaches.

use super::*;

impl PipelineDef {
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
    /// windows this advance fires, so the state needs no mark. Their rows (one per ingest
    /// statement, all of version 0, since only fired windows have a versioned row) are combined
    /// into one; a window still within its grace keeps that row, version 1, for its late
    /// statements. Returns the number of windows fired, and of those whose state it dropped
    /// because the new watermark is also at or past their deadline (purged with the others).
    pub fn fire_statement(&self) -> String {
        let k = prefix(&self.key_names(None));
        let kf = prefix(&self.key_names(Some("f")));
        let combined: String = self
            .aggs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.combine(i).into_iter().zip(a.acc_columns(i)))
            .map(|(e, (c, _))| format!(", {e} AS {c}"))
            .collect();
        let accs = self.state_cols().join(", ");
        let accs_f = self
            .state_cols()
            .iter()
            .map(|c| format!("f.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "WITH due AS MATERIALIZED (\n\
               DELETE FROM {state} s WHERE s.window_end <= $1 AND ($2::timestamptz IS NULL OR s.window_end > $2)\n\
               RETURNING s.*\n\
             ),\n\
             f AS MATERIALIZED (\n\
               SELECT {k}window_start, window_end, sum({n})::bigint AS {n}{combined}\n\
               FROM due GROUP BY {k}window_start, window_end\n\
             ),\n\
             kept AS (\n\
               INSERT INTO {state} ({k}window_start, window_end, version, {accs})\n\
               SELECT {kf}f.window_start, f.window_end, 1, {accs_f} FROM f WHERE f.window_end > $1 - {late}\n\
             ),\n\
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
