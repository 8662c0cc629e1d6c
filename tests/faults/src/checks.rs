//! The invariants of SPEC §5 over committed data, for the pipeline `faults` on `events`.
//!
//! `consistency` runs mid-stream (in one REPEATABLE READ snapshot, beside running ingest and
//! advances) and right after each crash recovery; `final_checks` runs once everything is done and
//! the watermark is at `infinity`. Both return the violations they found, as readable text.
//!
//! The pipeline's windows are tumbling (`Windows::TUMBLING`) or hopping (SPEC §7): each source row
//! is expanded into one (row, window) pair per window containing its event time (`Windows`), and
//! every rule below holds per pair, with "event" meaning (event, window) and "deadline" that
//! window's. With tumbling windows a row has one pair, its window.
//!
//! Expected values come from committed data alone. Each ingest transaction records in `batches`
//! the watermark in force when it committed (`wm`); its statement held its locks until then, so no
//! advance committed in between, and that is the watermark its rows had to be classified
//! against. A redelivery is an exact copy of its event, and the watermark only moves forward, so
//! an event's first committed delivery has the smallest `wm` of its deliveries (`first_wm`):
//!
//! - the event is in version 1 of its window (main firing) iff `first_wm < window_end`;
//! - it is in the latest version iff `first_wm < deadline` (accepted: open or late);
//! - it is in refused rows iff `first_wm >= deadline` (then once, with that watermark); a later
//!   delivery at or after the deadline of an event its window accepted is a duplicate (SPEC §3),
//!   never a refused row.

use postgres::{Client, GenericClient, IsolationLevel};

use crate::db::{render, text_rows};
use crate::windows::Windows;
use crate::workload::{AdvancerOut, PIPELINE};

fn pipeline_id<C: GenericClient>(c: &mut C) -> Result<i32, postgres::Error> {
    Ok(c.query_one(
        "SELECT id FROM _eventtime.pipeline WHERE name = $1",
        &[&PIPELINE],
    )?
    .get(0))
}

/// `d`: one row per (delivery, window) pair with the watermark of its statement; `ev`: one row
/// per (event, window) pair with `first_wm`, `last_wm` and number of deliveries; `acc`: the
/// accepted pairs; `opn`: the pairs counted in the main firing.
fn events_cte(w: &Windows) -> String {
    format!(
        "
    d AS (SELECT e.event_id, e.store, e.region, e.amount, e.ts, w.ws,
                 coalesce(b.wm, '-infinity') AS wm
          FROM events e JOIN batches b ON b.batch_id = e.batch_id
          CROSS JOIN LATERAL ({starts}) w),
    ev AS (SELECT event_id, store, region, amount, ts, ws, ws + {size} AS we,
                  ws + {to_deadline} AS deadline, min(wm) AS first_wm, max(wm) AS last_wm, count(*) AS deliveries
           FROM d GROUP BY 1, 2, 3, 4, 5, 6),
    acc AS (SELECT * FROM ev WHERE first_wm < deadline),
    opn AS (SELECT * FROM ev WHERE first_wm < we)",
        starts = w.starts_sql("e.ts"),
        size = w.size_sql(),
        to_deadline = w.to_deadline_sql()
    )
}

fn report<C: GenericClient>(
    c: &mut C,
    out: &mut Vec<String>,
    what: &str,
    sql: &str,
) -> Result<(), postgres::Error> {
    let rows = text_rows(c, sql)?;
    if !rows.is_empty() {
        let mut s = format!("{what} ({} shown):", rows.len());
        for r in rows.iter().take(10) {
            s += &format!("\n    {}", render(r));
        }
        out.push(s);
    }
    Ok(())
}

/// Checks that hold at any moment: on sealed rows, refused rows and the window state.
fn snapshot_checks<C: GenericClient>(
    tx: &mut C,
    v: &mut Vec<String>,
    id: i32,
    w: &Windows,
) -> Result<(), postgres::Error> {
    let cte = events_cte(w);
    let (size, lateness) = (w.size_sql(), w.lateness_sql());
    let state = format!("_eventtime.p{id}_state");
    let wm = format!("(SELECT watermark FROM _eventtime.pipeline WHERE id = {id})");
    report(
        tx,
        v,
        "history rows written under a watermark beyond the one in force",
        &format!(
            "SELECT store, region, window_start::text, version::text, watermark::text, {wm}::text FROM faults_history
             WHERE {wm} IS NULL OR watermark > {wm} LIMIT 10"
        ),
    )?;
    report(
        tx,
        v,
        "state rows whose deadline the watermark in force has reached (not purged)",
        &format!("SELECT store, region, window_start::text, window_end::text FROM {state} WHERE window_end + {lateness} <= {wm} LIMIT 10"),
    )?;
    report(
        tx,
        v,
        "windows with accepted committed rows, ended at or before the watermark in force, without a version 1",
        &format!(
            "WITH {cte}
             SELECT DISTINCT store, region, ws::text FROM acc
             WHERE we <= {wm}
               AND NOT EXISTS (SELECT 1 FROM faults_history h
                               WHERE h.store = acc.store AND h.region = acc.region AND h.window_start = acc.ws AND h.version = 1)
             LIMIT 10"
        ),
    )?;
    report(
        tx,
        v,
        "window state row count differs from the accepted committed rows of the window (store, region, window, expected, state)",
        &format!(
            "WITH {cte},
             live AS (SELECT store, region, ws, count(*) AS n FROM acc
                      WHERE {wm} IS NULL OR deadline > {wm} GROUP BY 1, 2, 3),
             st AS (SELECT store, region, window_start AS ws, sum(_et_n)::bigint AS n FROM {state} GROUP BY 1, 2, 3)
             SELECT coalesce(l.store, s.store), coalesce(l.region, s.region), coalesce(l.ws, s.ws)::text, l.n::text, s.n::text
             FROM live l FULL JOIN st s ON s.store = l.store AND s.region = l.region AND s.ws = l.ws
             WHERE l.n IS DISTINCT FROM s.n LIMIT 10"
        ),
    )?;
    // Window state against the published versions: a window whose end the watermark has passed
    // has fired, and its latest version holds its whole state; an open window has no version.
    report(
        tx,
        v,
        "window state and history disagree (store, region, window, window end, state n, latest version, latest n): \
         a window ended at or before the watermark in force without a firing of its whole state (half-applied advance?), \
         or an open window with a version",
        &format!(
            "SELECT s.store, s.region, s.window_start::text, s.window_end::text, s._et_n::text, h.version::text, h.n::text
             FROM (SELECT store, region, window_start, window_end, sum(_et_n)::bigint AS _et_n FROM {state} GROUP BY 1, 2, 3, 4) s
             LEFT JOIN faults_latest h ON h.store = s.store AND h.region = s.region AND h.window_start = s.window_start
             WHERE (s.window_end <= coalesce({wm}, '-infinity') AND (h.version IS NULL OR h.n IS DISTINCT FROM s._et_n))
                OR (s.window_end > coalesce({wm}, '-infinity') AND h.version IS NOT NULL)
             LIMIT 10"
        ),
    )?;
    // The critical property: version 1 of a window holds exactly the rows committed before the
    // advance that passed its end.
    report(
        tx,
        v,
        "version 1 (main firing) differs from the aggregates of the rows committed under a watermark before the window end \
         (store | region | window | kind | expected n | got n | expected total | got total | expected lo | got lo | expected hi | got hi)",
        &format!(
            "WITH {cte},
             e AS (SELECT store, region, ws, count(*)::text AS n, sum(amount)::text AS total, min(amount)::text AS lo,
                          max(amount)::text AS hi FROM opn GROUP BY 1, 2, 3),
             g AS (SELECT store, region, window_start AS ws, kind, n::text, total::text, lo::text, hi::text FROM faults_sealed)
             SELECT store, region, ws::text, g.kind, e.n, g.n, e.total, g.total, e.lo, g.lo, e.hi, g.hi
             FROM e FULL JOIN g USING (store, region, ws)
             WHERE (g.kind IS DISTINCT FROM 'late' OR e.n IS NOT NULL)
               AND (e.ws IS NULL OR e.ws + {size} <= {wm})
               AND (g.kind IS DISTINCT FROM 'main' OR (e.n, e.total, e.lo, e.hi) IS DISTINCT FROM (g.n, g.total, g.lo, g.hi))
             ORDER BY 1, 2, 3 LIMIT 10"
        ),
    )?;
    report(
        tx,
        v,
        "refused rows not refused by the watermark in force when their statement committed, or malformed \
         (store | region | event | event time | window | deadline | refusing watermark | watermark of its statement)",
        &format!(
            "SELECT r.store, r.region, r.event_id::text, r.event_time::text, r.window_start::text, r.deadline::text, r.watermark::text, b.wm::text
             FROM faults_refused r
             LEFT JOIN events e ON e.delivery_id = (r.\"row\"->>'delivery_id')::bigint
             LEFT JOIN batches b ON b.batch_id = e.batch_id
             WHERE e.delivery_id IS NULL OR e.event_id <> r.event_id OR e.store <> r.store OR e.region <> r.region OR e.ts <> r.event_time
                OR {not_its_window}
                OR r.window_end <> r.window_start + {size}
                OR r.deadline <> r.window_end + {lateness}
                OR b.wm IS DISTINCT FROM r.watermark
                OR r.watermark < r.deadline
             LIMIT 10",
            not_its_window = w.not_a_window_of_sql("r.window_start", "r.event_time")
        ),
    )?;
    report(
        tx,
        v,
        "events whose every delivery came at or after the deadline, not refused exactly once (store, region, window, event, refused rows)",
        &format!(
            "WITH {cte}
             SELECT ev.store, ev.region, ev.ws::text, ev.event_id::text, count(r.event_id)::text FROM ev
             LEFT JOIN faults_refused r ON r.event_id = ev.event_id AND r.store = ev.store AND r.region = ev.region AND r.window_start = ev.ws
             WHERE ev.first_wm >= ev.deadline GROUP BY 1, 2, 3, 4 HAVING count(r.event_id) <> 1 LIMIT 10"
        ),
    )?;
    report(
        tx,
        v,
        "events refused although no delivery came at or after the deadline (store, region, window, event, last watermark)",
        &format!(
            "WITH {cte}
             SELECT ev.store, ev.region, ev.ws::text, ev.event_id::text, ev.last_wm::text FROM ev
             WHERE ev.last_wm < ev.deadline
               AND EXISTS (SELECT 1 FROM faults_refused r
                           WHERE r.event_id = ev.event_id AND r.store = ev.store AND r.region = ev.region AND r.window_start = ev.ws)
             LIMIT 10"
        ),
    )?;
    report(
        tx,
        v,
        "an event refused more than once in one window",
        "SELECT store, region, window_start::text, event_id::text, count(*)::text FROM faults_refused
         GROUP BY 1, 2, 3, 4 HAVING count(*) > 1 LIMIT 10",
    )?;
    Ok(())
}

/// No advance is half-applied, and the window state, sealed rows and refused rows match the
/// committed source rows, in one snapshot. `w`: the pipeline's windows.
pub fn consistency(c: &mut Client, w: &Windows) -> Result<Vec<String>, postgres::Error> {
    let mut tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    let id = pipeline_id(&mut tx)?;
    let mut v = Vec::new();
    snapshot_checks(&mut tx, &mut v, id, w)?;
    tx.commit()?;
    Ok(v)
}

/// What the client side knows at the end.
pub struct Expected<'a> {
    /// Rows of every statement the clients know committed (exactly once).
    pub rows: i64,
    pub batches: i64,
    /// The (row, window) pairs of those rows, by `Windows::count_of`.
    pub pairs: i64,
    pub advancer: &'a AdvancerOut,
    /// The pipeline's windows.
    pub windows: Windows,
}

/// The checks after `advance_watermark(..., 'infinity')`.
pub fn final_checks(c: &mut Client, exp: &Expected<'_>) -> Result<Vec<String>, postgres::Error> {
    let mut tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    let mut v = Vec::new();
    let id = pipeline_id(&mut tx)?;
    let w = &exp.windows;
    let cte = events_cte(w);

    // Every statement the clients committed is there once.
    let r = tx.query_one(
        "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM batches)",
        &[],
    )?;
    let (src, batches): (i64, i64) = (r.get(0), r.get(1));
    if src != exp.rows || batches != exp.batches {
        v.push(format!(
            "committed statements: source has {src} rows and {batches} batches; the clients committed {} rows in {} batches",
            exp.rows, exp.batches
        ));
    }
    report(
        &mut tx,
        &mut v,
        "workload sanity: an event id with differing copies",
        "SELECT event_id::text FROM events GROUP BY event_id HAVING count(DISTINCT (store, region, amount, ts)) > 1 LIMIT 10",
    )?;

    // Accounting: each row once, per window.
    let r = tx.query_one(
        "SELECT (SELECT coalesce(sum(n), 0)::bigint FROM faults_latest),
                (SELECT count(*) FROM faults_refused),
                p.duplicates, p.refused, p.firings, p.state_rows, p.open_windows, p.watermark::text,
                (SELECT count(*) FROM faults_history)
         FROM eventtime.pipelines p WHERE p.name = $1",
        &[&PIPELINE],
    )?;
    let latest_n: i64 = r.get(0);
    let refused: i64 = r.get(1);
    let dups: i64 = r.get(2);
    let (p_refused, p_firings, state_rows, open_windows): (i64, i64, i64, i64) =
        (r.get(3), r.get(4), r.get(5), r.get(6));
    let wm: Option<String> = r.get(7);
    let history: i64 = r.get(8);
    // The (row, window) pairs, and how the watermarks of their statements say they land.
    let r = tx.query_one(
        &format!(
            "WITH {cte}
             SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM ev), (SELECT count(*) FROM acc)"
        ),
        &[],
    )?;
    let (pairs, distinct_pairs, accepted): (i64, i64, i64) = (r.get(0), r.get(1), r.get(2));
    if pairs != exp.pairs || (w.is_tumbling() && pairs != src) {
        v.push(format!(
            "workload sanity: the source rows make {pairs} (row, window) pairs of {} windows; the clients sent {} pairs in {} rows",
            w.describe(),
            exp.pairs,
            exp.rows
        ));
    }
    eprintln!(
        "  accounting: {src} source rows in {pairs} (row, window) pairs of {} windows = {latest_n} in latest versions + {refused} refused + {dups} duplicates ({}); \
         expected by the watermarks of their statements: {accepted} + {} + {}",
        w.describe(),
        latest_n + refused + dups,
        distinct_pairs - accepted,
        pairs - distinct_pairs
    );
    if latest_n + refused + dups != pairs {
        v.push(format!(
            "accounting: latest n {latest_n} + refused {refused} + duplicates {dups} = {} but the source has {src} rows in {pairs} (row, window) pairs",
            latest_n + refused + dups
        ));
    }
    if state_rows != 0 || open_windows != 0 {
        v.push(format!("after 'infinity': state_rows = {state_rows}, open_windows = {open_windows} (expected 0)"));
    }
    if wm.as_deref() != Some("infinity") {
        v.push(format!("watermark is {wm:?}, expected infinity"));
    }
    if p_refused != refused || p_firings != history {
        v.push(format!(
            "eventtime.pipelines says refused = {p_refused}, firings = {p_firings}; the views have {refused} refused rows and {history} history rows"
        ));
    }
    let n_state: i64 = tx
        .query_one(&format!("SELECT count(*) FROM _eventtime.p{id}_state"), &[])?
        .get(0);
    if n_state != 0 {
        v.push(format!(
            "{n_state} rows remain in _eventtime.p{id}_state after 'infinity'"
        ));
    }

    // The latest version of each window is the aggregate of its accepted rows.
    report(
        &mut tx,
        &mut v,
        "latest version differs from the aggregates of the accepted rows \
         (store | region | window | expected n | got n | expected total | got total | expected lo | got lo | expected hi | got hi)",
        &format!(
            "WITH {cte},
             e AS (SELECT store, region, ws, count(*)::text AS n, sum(amount)::text AS total, min(amount)::text AS lo,
                          max(amount)::text AS hi FROM acc GROUP BY 1, 2, 3),
             g AS (SELECT store, region, window_start AS ws, n::text, total::text, lo::text, hi::text FROM faults_latest)
             SELECT store, region, ws::text, e.n, g.n, e.total, g.total, e.lo, g.lo, e.hi, g.hi
             FROM e FULL JOIN g USING (store, region, ws)
             WHERE (e.n, e.total, e.lo, e.hi) IS DISTINCT FROM (g.n, g.total, g.lo, g.hi)
             ORDER BY 1, 2, 3 LIMIT 20"
        ),
    )?;
    snapshot_checks(&mut tx, &mut v, id, w)?;

    // SPEC §3: a redelivery of an accepted row after the deadline is a duplicate, not refused.
    let r = tx.query_one(
        &format!(
            "WITH {cte}
             SELECT count(*), count(*) FILTER (WHERE EXISTS (
                        SELECT 1 FROM faults_refused r
                        WHERE r.event_id = ev.event_id AND r.store = ev.store AND r.region = ev.region AND r.window_start = ev.ws))
             FROM ev WHERE first_wm < deadline AND last_wm >= deadline"
        ),
        &[],
    )?;
    let (mixed, mixed_refused): (i64, i64) = (r.get(0), r.get(1));
    eprintln!("  {mixed} accepted events were redelivered after their window's deadline; {mixed_refused} of them are in refused rows");
    if mixed_refused > 0 {
        v.push(format!(
            "{mixed_refused} of {mixed} accepted events redelivered after their deadline are in refused rows; SPEC §3 makes them duplicates"
        ));
    }

    // Versions: gapless, unique, growing, with the right kinds and watermarks.
    report(
        &mut tx,
        &mut v,
        "versions not gapless and unique per window (store, region, window, count, distinct, min, max)",
        "SELECT store, region, window_start::text, count(*)::text, count(DISTINCT version)::text, min(version)::text, max(version)::text
         FROM faults_history GROUP BY 1, 2, 3
         HAVING min(version) <> 1 OR max(version) <> count(*) OR count(DISTINCT version) <> count(*) LIMIT 10",
    )?;
    report(
        &mut tx,
        &mut v,
        "a version whose n does not exceed the previous version's",
        "SELECT store, region, window_start::text, version::text, n::text, prev::text FROM (
           SELECT *, lag(n) OVER (PARTITION BY store, region, window_start ORDER BY version) AS prev FROM faults_history) h
         WHERE prev IS NOT NULL AND n <= prev LIMIT 10",
    )?;
    report(
        &mut tx,
        &mut v,
        "history rows with a wrong kind, sealed flag or watermark for their landing",
        &format!(
            "SELECT store, region, window_start::text, version::text, kind, sealed::text, watermark::text FROM faults_history
             WHERE window_end <> window_start + {size}
                OR sealed <> (version = 1)
                OR (version > 1 AND kind <> 'late')
                OR kind NOT IN ('main', 'late')
                OR watermark < window_end
                OR (kind = 'late' AND watermark >= window_end + {lateness})
             LIMIT 10",
            size = w.size_sql(),
            lateness = w.lateness_sql()
        ),
    )?;

    // Sealed: one per window, each equal to what was read right after the advance that wrote it.
    let r = tx.query_one(
        "SELECT (SELECT count(*) FROM faults_sealed),
                (SELECT count(*) FROM (SELECT DISTINCT store, region, window_start FROM faults_history) w),
                (SELECT count(*) FROM faults_history WHERE kind = 'main')",
        &[],
    )?;
    let (sealed, windows, mains): (i64, i64, i64) = (r.get(0), r.get(1), r.get(2));
    if sealed != windows {
        v.push(format!(
            "{sealed} sealed rows for {windows} windows in history"
        ));
    }
    if exp.advancer.fired_complete && exp.advancer.fired_known != mains {
        v.push(format!(
            "advance_watermark reported {} windows fired in all; history has {mains} main firings",
            exp.advancer.fired_known
        ));
    }
    let rows = tx.query(
        "SELECT store, region, window_start::text, t::text FROM faults_sealed t",
        &[],
    )?;
    let mut unseen = Vec::new();
    let mut changed = Vec::new();
    for r in &rows {
        let key = (
            r.get::<_, String>(0),
            r.get::<_, String>(1),
            r.get::<_, String>(2),
        );
        let text: String = r.get(3);
        match exp.advancer.sealed.get(&key) {
            None => unseen.push(text),
            Some(s) if s.text != text => {
                changed.push(format!("first seen {} / now {text}", s.text))
            }
            Some(_) => {}
        }
    }
    if rows.len() != exp.advancer.sealed.len() {
        v.push(format!(
            "{} sealed rows now; the advancing thread saw {} over the run",
            rows.len(),
            exp.advancer.sealed.len()
        ));
    }
    if !unseen.is_empty() {
        v.push(format!(
            "sealed rows never seen right after an advance: {:?}",
            &unseen[..unseen.len().min(5)]
        ));
    }
    if !changed.is_empty() {
        v.push(format!(
            "sealed rows changed: {:?}",
            &changed[..changed.len().min(5)]
        ));
    }
    tx.commit()?;
    Ok(v)
}

/// How the rows of a run with several windows per row landed: the events with pairs that were
/// accepted and pairs that were refused, and the events with pairs counted in a main firing and
/// pairs that made a late version (after `final_checks`, for showing the run was not vacuous).
pub fn mixed_landings(c: &mut Client, w: &Windows) -> Result<(i64, i64), postgres::Error> {
    let r = c.query_one(
        &format!(
            "WITH {cte},
             per_event AS (SELECT event_id,
                                  bool_or(first_wm < deadline) AS accepted, bool_or(first_wm >= deadline) AS refused,
                                  bool_or(first_wm < we) AS main, bool_or(first_wm >= we AND first_wm < deadline) AS late
                           FROM ev GROUP BY event_id)
             SELECT count(*) FILTER (WHERE accepted AND refused), count(*) FILTER (WHERE main AND late) FROM per_event",
            cte = events_cte(w)
        ),
        &[],
    )?;
    Ok((r.get(0), r.get(1)))
}
