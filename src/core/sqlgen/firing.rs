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
    /// windows this advance fires, so the state needs no mark. Returns the number of windows fired.
    pub fn fire_statement(&self) -> String {
        let k = prefix(&self.key_names(None));
        let kf = prefix(&self.key_names(Some("f")));
        format!(
            "WITH fired AS (\n\
               INSERT INTO {history} ({k}window_start, window_end, version, kind, {aliases}watermark, {accs})\n\
               SELECT {kf}f.window_start, f.window_end, 1, 'main', {finals}$1, {accs_f} FROM {state} f\n\
               WHERE f.window_end <= $1 AND ($2::timestamptz IS NULL OR f.window_end > $2)\n\
               RETURNING 1\n\
             )\n\
             SELECT count(*) FROM fired",
            state = self.table("state"),
            history = self.table("history"),
            aliases = prefix(&self.alias_cols()),
            finals = prefix(&self.finals("f")),
            accs = self.state_cols().join(", "),
            accs_f = self.state_cols().iter().map(|c| format!("f.{c}")).collect::<Vec<_>>().join(", "),
        )
    }
}
