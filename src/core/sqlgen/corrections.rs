//! What SPEC §8 runs beyond the horizon: the restatement that folds refused rows into a new
//! version, the lateness account read from history and refused rows, and the feed of committed
//! versions. None of it is on the ingest path.
//!
//! The lateness of a row that arrived after its window closed is `watermark − window_end`, the
//! watermark being the one its statement ran under. Every late version is written by one
//! statement under one watermark, and keeps the window's row count, so the late rows of a version
//! are its count less the previous version's, all with the lateness of that version: history
//! holds the account exactly, with nothing stored per row. Refused rows carry their own watermark.

use super::*;

impl PipelineDef {
    /// The key columns of the row aliased `a` as one `jsonb` object (`{}` without keys).
    fn key_json(&self, a: &str) -> String {
        let items: Vec<String> = self
            .keys
            .iter()
            .map(|k| format!("{}, {a}.{}", quote_literal(&k.name), quote_ident(&k.name)))
            .collect();
        format!("pg_catalog.jsonb_build_object({})", items.join(", "))
    }

    /// The source row of a refused row aliased `r`, typed again from its `jsonb`, as `x`.
    fn typed_row(&self, r: &str) -> String {
        let doc = if self.refused_doc_once {
            format!(
                "coalesce({r}.\"row\", (SELECT d.\"row\" FROM {} d WHERE d.{INTERNAL_PREFIX}id = {r}.{INTERNAL_PREFIX}doc_of))",
                self.table("refused")
            )
        } else {
            format!("{r}.\"row\"")
        };
        format!(
            "CROSS JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::{}, {doc}) x",
            self.source
        )
    }

    /// The restatement of SPEC §8, for the windows starting in `[$1, $2)` (only at `$1` when `$2`
    /// is NULL) whose key matches `key_filter` (conditions on the refused rows aliased `r`): for
    /// each such window with refused rows not folded yet, one version of kind `restatement`, the
    /// latest version's accumulators plus those rows, under watermark `$3`, and the rows recorded
    /// as folded by it. Returns per version written: key (`jsonb`), window start and end, version,
    /// rows folded. The caller serializes restatements of the pipeline (it locks `folds`).
    pub fn restate_statement(&self, key_filter: &str) -> String {
        let k = prefix(&self.key_names(None));
        let kr = prefix(&self.key_names(Some("r")));
        let kb = prefix(&self.key_names(Some("b")));
        let km = prefix(&self.key_names(Some("m")));
        let args: String = self
            .arg_items("x")
            .iter()
            .map(|v| format!(", {v}"))
            .collect();
        let partials = self.partials("");
        let mut merged = Vec::new();
        let mut j = 0;
        for (i, a) in self.aggs.iter().enumerate() {
            let n = a.partials(i, "").len();
            let new: Vec<String> = (j..j + n).map(|p| format!("b._et_p{p}")).collect();
            let cols = a.acc_columns(i);
            for (expr, (col, _)) in a.merge_values(i, "l", &new).into_iter().zip(cols) {
                merged.push(format!(", {expr} AS {col}"));
            }
            j += n;
        }
        let n = format!("{INTERNAL_PREFIX}n");
        format!(
            "WITH /* pg_eventtime restate */ todo AS MATERIALIZED (\n\
               SELECT r.{INTERNAL_PREFIX}id AS refused_id, {kr}r.window_start, r.window_end{args}\n\
               FROM {refused} r{typed}\n\
               WHERE r.window_start >= $1 AND CASE WHEN $2::timestamptz IS NULL THEN r.window_start = $1 ELSE r.window_start < $2 END{key_filter}\n\
                 AND NOT EXISTS (SELECT FROM {folds} f WHERE f.refused_id = r.{INTERNAL_PREFIX}id)\n\
             ),\n\
             batch AS MATERIALIZED (\n\
               SELECT {k}window_start, window_end, count(*) AS {n}{partials}\n\
               FROM todo GROUP BY {k}window_start, window_end\n\
             ),\n\
             merged AS MATERIALIZED (\n\
               SELECT {kb}b.window_start, b.window_end, coalesce(l.version, 0) + 1 AS version, b.{n} AS folded,\n\
                      coalesce(l.{n}, 0) + b.{n} AS {n}{merged}\n\
               FROM batch b LEFT JOIN LATERAL (\n\
                 SELECT h.* FROM {history} h WHERE h.window_start = b.window_start{end_hb}{same_hb}\n\
                 ORDER BY h.version DESC LIMIT 1\n\
               ) l ON true\n\
             ),\n\
             written AS (\n\
               INSERT INTO {history} ({k}window_start, window_end, version, kind, {aliases}watermark, {state_cols})\n\
               SELECT {km}m.window_start, m.window_end, m.version, 'restatement', {finals}$3, {state_cols_m} FROM merged m\n\
             ),\n\
             folded AS (\n\
               INSERT INTO {folds} (refused_id, version)\n\
               SELECT t.refused_id, m.version FROM todo t JOIN merged m ON m.window_start = t.window_start{end_tm}{same_tm}\n\
             )\n\
             SELECT {key}, m.window_start, m.window_end, m.version, m.folded FROM merged m ORDER BY m.window_start{k_after}",
            refused = self.table("refused"),
            folds = self.table("folds"),
            history = self.table("history"),
            typed = if args.is_empty() {
                String::new()
            } else {
                format!(" {}{}", self.typed_row("r"), self.expression_row("x"))
            },
            partials = partials
                .iter()
                .enumerate()
                .map(|(i, p)| format!(", {p} AS _et_p{i}"))
                .collect::<String>(),
            merged = merged.concat(),
            same_hb = self.same_key("h", "b"),
            end_hb = self.same_end("h", "b"),
            end_tm = self.same_end("t", "m"),
            same_tm = self.same_key("t", "m"),
            aliases = prefix(&self.alias_cols()),
            finals = prefix(&self.finals("m")),
            state_cols = self.state_cols().join(", "),
            state_cols_m = self.state_cols_of("m"),
            key = self.key_json("m"),
            k_after = self
                .key_names(Some("m"))
                .iter()
                .map(|c| format!(", {c}"))
                .collect::<String>(),
        )
    }

    /// Each version that is not a restatement, with the rows it added (`added`: its count less
    /// the previous version's) and whether it is the window's latest such version, from
    /// `conditions` on the history rows aliased `h`.
    fn versions_added(&self, conditions: &str) -> String {
        let kh = prefix(&self.key_names(Some("h")));
        let kh = if self.step_end().is_empty() {
            kh
        } else {
            format!("{kh}h.window_end, ")
        };
        let n = format!("{INTERNAL_PREFIX}n");
        format!(
            "SELECT h.*, h.{n} - coalesce(pg_catalog.lag(h.{n}) OVER w, 0) AS added,\n\
                    h.version = pg_catalog.max(h.version) OVER (PARTITION BY {kh}h.window_start) AS newest\n\
             FROM {history} h WHERE h.kind <> 'restatement'{conditions}\n\
             WINDOW w AS (PARTITION BY {kh}h.window_start ORDER BY h.version)",
            history = self.table("history"),
        )
    }

    /// The lateness account of SPEC §8 for the windows starting in `[$1, $2)`, under the pipeline
    /// watermark `$3`: per key and window, rows on time, late and refused, the refused share, and
    /// the arrival lateness of late and refused rows as p50, p90, p99 and max. With `value` (a
    /// source column, and the accumulator of a `sum` or `avg` of it, if the pipeline has one),
    /// the refused value and its share of the window's value.
    ///
    /// On time are the rows of a window's main firing, or of its state while it has not fired;
    /// late are the rows its late versions added.
    pub fn lateness_statement(&self, value: Option<(&str, Option<usize>)>) -> String {
        let k = prefix(&self.key_names(None));
        let ks = prefix(&self.key_names(Some("s")));
        let kr = prefix(&self.key_names(Some("r")));
        let n = format!("{INTERNAL_PREFIX}n");
        let acc = |a: &str| match value {
            Some((_, Some(i))) => format!("{a}.{}::numeric", ResolvedAgg::acc_column(i)),
            _ => "NULL::numeric".to_string(),
        };
        let (typed, refused_value) = match value {
            Some((col, _)) => (
                self.typed_row("r"),
                format!("x.{}::numeric", quote_ident(col)),
            ),
            None => (String::new(), "NULL::numeric".to_string()),
        };
        let range = |a: &str| format!(" AND {a}.window_start >= $1 AND {a}.window_start < $2");
        format!(
            "WITH /* pg_eventtime lateness */ v AS MATERIALIZED (\n{versions}\n),\n\
             facts AS (\n\
               SELECT {k}window_start, window_end,\n\
                      CASE WHEN kind = 'main' THEN added ELSE 0 END AS on_time, CASE WHEN kind = 'late' THEN added ELSE 0 END AS late,\n\
                      0 AS refused, CASE WHEN newest THEN {acc_v} END AS accepted_value, NULL::numeric AS refused_value, NULL::interval AS x\n\
               FROM v\n\
               UNION ALL\n\
               {late_samples}\n\
               UNION ALL\n\
               SELECT {ks}s.window_start, s.window_end, s.{n}, 0, 0, {acc_s}, NULL, NULL\n\
               FROM {state} s WHERE s.window_end > coalesce($3, '-infinity'){range_s}\n\
               UNION ALL\n\
               SELECT {kr}r.window_start, r.window_end, 0, 0, 1, NULL, {refused_value}, r.watermark - r.window_end\n\
               FROM {refused} r {typed} WHERE true{range_r}\n\
             ),\n\
             w AS (\n\
               SELECT {k}window_start, window_end, sum(on_time)::bigint AS on_time, sum(late)::bigint AS late, sum(refused)::bigint AS refused,\n\
                      sum(accepted_value) AS accepted_value, sum(refused_value) AS refused_value,\n\
                      percentile_disc(0.5) WITHIN GROUP (ORDER BY x) AS p50, percentile_disc(0.9) WITHIN GROUP (ORDER BY x) AS p90,\n\
                      percentile_disc(0.99) WITHIN GROUP (ORDER BY x) AS p99, max(x) AS worst\n\
               FROM facts GROUP BY {k}window_start, window_end\n\
             )\n\
             SELECT {key}, w.window_start, w.window_end, w.on_time, w.late, w.refused,\n\
                    w.refused::double precision / NULLIF(w.on_time + w.late + w.refused, 0),\n\
                    {refused_value_out}, {share},\n\
                    w.p50, w.p90, w.p99, w.worst\n\
             FROM w ORDER BY w.window_start{k_after}",
            versions = self.versions_added(&range("h")),
            late_samples = self.late_samples(
                &format!("{k}window_start, window_end, 0, 0, 0, NULL, NULL, "),
                &range("a"),
                "kind = 'late'",
            ),
            state = self.table("state"),
            refused = self.table("refused"),
            acc_v = acc("v"),
            acc_s = acc("s"),
            range_s = range("s"),
            range_r = range("r"),
            key = self.key_json("w"),
            refused_value_out = if value.is_some() {
                "coalesce(w.refused_value, 0)"
            } else {
                "NULL::numeric"
            },
            share = if matches!(value, Some((_, Some(_)))) {
                "(coalesce(w.refused_value, 0) / NULLIF(coalesce(w.accepted_value, 0) + coalesce(w.refused_value, 0), 0))::double precision"
            } else {
                "NULL::double precision"
            },
            k_after = self
                .key_names(Some("w"))
                .iter()
                .map(|c| format!(", {c}"))
                .collect::<String>(),
        )
    }

    /// The smallest allowed lateness that would have accepted the share `$1` of the rows that
    /// arrived after their window closed (late and refused rows, since `$2` when it is not
    /// NULL): a row whose arrival lateness is `x` is accepted by a lateness greater than `x`
    /// (a watermark equal to the deadline refuses), so one microsecond more than the `$1`
    /// quantile of `x`. NULL when no row arrived late.
    pub fn suggest_lateness_statement(&self) -> String {
        format!(
            "WITH /* pg_eventtime suggest_lateness */ v AS MATERIALIZED (\n{versions}\n),\n\
             x AS (\n\
               {late_samples}\n\
               UNION ALL\n\
               SELECT r.watermark - r.window_end FROM {refused} r WHERE $2::timestamptz IS NULL OR r.refused_at >= $2\n\
             )\n\
             SELECT percentile_disc($1) WITHIN GROUP (ORDER BY x.x) + interval '0.000001' FROM x",
            versions = self.versions_added(""),
            late_samples = self.late_samples(
                "",
                " AND ($2::timestamptz IS NULL OR a.fired_at >= $2)",
                "v.kind = 'late' AND ($2::timestamptz IS NULL OR v.fired_at >= $2)",
            ),
            refused = self.table("refused"),
        )
    }

    /// One row per late row of the versions `v`, its columns `cols` (which name no alias)
    /// followed by its arrival lateness, `watermark - window_end`, with `cond` on the versions.
    /// With batched late firings, a version's watermark is its batch's: the rows come from the
    /// table `arrivals` instead, each with the watermark it arrived under, with `cond_a` on it.
    fn late_samples(&self, cols: &str, cond_a: &str, cond: &str) -> String {
        if self.batches_late() {
            format!(
                "SELECT {cols}a.watermark - a.window_end AS x FROM {arrivals} a CROSS JOIN LATERAL pg_catalog.generate_series(1, a.{INTERNAL_PREFIX}n) WHERE true{cond_a}",
                arrivals = self.table("arrivals"),
            )
        } else {
            format!(
                "SELECT {cols}v.watermark - v.window_end AS x FROM v CROSS JOIN LATERAL pg_catalog.generate_series(1, v.added) WHERE {cond}"
            )
        }
    }

    /// The versions committed since a cursor (see `api::corrections`): with `$1` and `$2` the
    /// snapshots of the cursor (NULL: none) and `$3` the last sequence number delivered of the
    /// versions visible in `$2` and not in `$1`, first the rest of those, then the versions
    /// visible in `$4` and not in `$2`, each in the order they were written. `$4` is a snapshot
    /// taken before this statement's, so every version visible in it is visible to the
    /// statement. Each row carries the snapshots and sequence number of its cursor.
    pub fn changes_statement(&self) -> String {
        let seq = format!("{INTERNAL_PREFIX}seq");
        let xid = format!("{INTERNAL_PREFIX}xid");
        let values: Vec<String> = self
            .aggs
            .iter()
            .map(|a| {
                format!(
                    "{}, c.{}",
                    quote_literal(&a.spec.alias),
                    quote_ident(&a.spec.alias)
                )
            })
            .collect();
        // The cursor's columns carry the reserved prefix: `h.*` brings the keys and aggregates,
        // which may be named `a`, `b` or `now`.
        let (a, b, now, in_b) = (
            format!("{INTERNAL_PREFIX}cur_a"),
            format!("{INTERNAL_PREFIX}cur_b"),
            format!("{INTERNAL_PREFIX}cur_now"),
            format!("{INTERNAL_PREFIX}in_b"),
        );
        format!(
            "WITH /* pg_eventtime changes */ s AS MATERIALIZED (\n\
               SELECT $1::pg_snapshot AS {a}, $2::pg_snapshot AS {b}, $4::pg_snapshot AS {now}\n\
             ),\n\
             c AS (\n\
               SELECT h.*, s.{a}, s.{b}, s.{now},\n\
                      coalesce(pg_catalog.pg_visible_in_snapshot(h.{xid}, s.{b}), false) AS {in_b}\n\
               FROM {history} h CROSS JOIN s\n\
               WHERE (s.{a} IS NULL OR h.{xid} >= pg_catalog.pg_snapshot_xmin(s.{a}))\n\
                 AND NOT coalesce(pg_catalog.pg_visible_in_snapshot(h.{xid}, s.{a}), false)\n\
             )\n\
             SELECT {key}, c.window_start, c.window_end, c.version, c.kind, pg_catalog.jsonb_build_object({values}),\n\
                    c.sealed, c.watermark, c.fired_at,\n\
                    CASE WHEN c.{in_b} THEN c.{a} ELSE c.{b} END::text, CASE WHEN c.{in_b} THEN c.{b} ELSE c.{now} END::text, c.{seq}, {merged_into}\n\
             FROM c\n\
             WHERE (c.{in_b} AND c.{seq} > $3) OR (NOT c.{in_b} AND pg_catalog.pg_visible_in_snapshot(c.{xid}, c.{now}))\n\
             ORDER BY c.{in_b} DESC, c.{seq}",
            history = self.table("history"),
            key = self.key_json("c"),
            values = values.join(", "),
            merged_into = if self.window.is_session() {
                "c.merged_into"
            } else {
                "NULL::tstzrange"
            },
        )
    }
}
