//! (i) reads (SPEC §6, *reading is cheap at any age*).
//!
//! A keyed daily pipeline gets a long history quickly: one `INSERT ... SELECT` of one row per key
//! and day, an advance of the watermark to the end of the middle day, late rows for that day for
//! every tenth key (so that its windows of those keys have versions 1 and 2, and `_latest` has a
//! version to choose), an advance to the end of the last day, and one row per key on the day
//! after it, whose windows stay open. Then, for `_latest`, `_sealed`, `_history` and `_current`,
//! two reads: one window of one key (a key with a late version) and one day (the middle day);
//! and "today so far" (the open day) from `_current` and `_provisional` (SPEC §3 provisional
//! reads), which read the state of the open windows beside the history. Each is run once under `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`, whose plan must
//! read the history through an index: every scan of the history table an index scan with an index
//! condition (a `Seq Scan`, or an index scan with no condition, reads the whole history), and no
//! `Sort` above such a scan. The run fails otherwise, and when a read returns other rows than the
//! history holds. Then the median of several executions: the server's `Execution Time` (under
//! `EXPLAIN (ANALYZE, TIMING OFF)`) and the client's round trip of the query itself (parse, plan,
//! execute, rows sent back).

use crate::{advance, exec, reset, scalar, settle, text, Res, Sizes};
use postgres::{Client, SimpleQueryMessage};
use serde_json::Value;
use std::time::{Duration, Instant};

/// (i)'s first day: the history spans `i_days` days from here, all of them in the past, so that
/// no watermark is refused as too far ahead.
const FIRST_DAY: &str = "2022-01-01 00:00+00";

/// The key read by the point reads: it has a late version on the middle day.
const KEY: i32 = 7;

/// One read of (i): its plan and times.
pub(crate) struct Read {
    pub(crate) view: &'static str,
    pub(crate) what: &'static str,
    /// The plan's nodes, outermost first, each with its relation, index and rows.
    pub(crate) plan: String,
    /// Buffers the execution touched (shared hit + read), from the checked run.
    pub(crate) buffers: i64,
    pub(crate) rows: i64,
    /// Median of the server's `Execution Time`.
    pub(crate) execution: Duration,
    /// Median of the client's round trip of the query.
    pub(crate) round_trip: Duration,
    /// Why the plan is not an index read of the history, if it is not.
    pub(crate) fault: Option<String>,
}

pub(crate) struct Reads {
    pub(crate) history_rows: i64,
    pub(crate) late_versions: i64,
    pub(crate) day: String,
    pub(crate) key: i32,
    pub(crate) load: Duration,
    pub(crate) reads: Vec<Read>,
}

/// Runs `sql` with the simple protocol (EXPLAIN's JSON comes back as text) and returns the first
/// column of its one row.
fn one_text(c: &mut Client, sql: &str) -> Res<String> {
    let msgs = c
        .simple_query(sql)
        .map_err(|e| format!("{}\nin: {sql}", crate::describe(&e)))?;
    msgs.iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .ok_or_else(|| format!("no row from: {sql}"))
}

fn explain(c: &mut Client, options: &str, sql: &str) -> Res<Value> {
    let out = one_text(c, &format!("EXPLAIN ({options}, FORMAT JSON) {sql}"))?;
    let v: Value = serde_json::from_str(&out).map_err(|e| format!("EXPLAIN's JSON: {e}"))?;
    v.get(0)
        .cloned()
        .ok_or_else(|| "EXPLAIN returned no plan".into())
}

fn field<'a>(node: &'a Value, name: &str) -> Option<&'a str> {
    node.get(name).and_then(Value::as_str)
}

fn number(node: &Value, name: &str) -> f64 {
    node.get(name).and_then(Value::as_f64).unwrap_or(0.0)
}

fn children(node: &Value) -> &[Value] {
    node.get("Plans")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The plan as one line, outermost node first, with each node's actual rows:
/// `Unique (rows=1) > Index Scan on p1_history using ... (rows=2)`.
fn describe_plan(node: &Value, out: &mut Vec<String>) {
    let mut s = field(node, "Node Type").unwrap_or("?").to_string();
    if let Some(r) = field(node, "Relation Name") {
        s += &format!(" on {r}");
    }
    if let Some(i) = field(node, "Index Name") {
        s += &format!(" using {i}");
    }
    s += &format!(" (rows={})", number(node, "Actual Rows") as i64);
    out.push(s);
    for ch in children(node) {
        describe_plan(ch, out);
    }
}

/// Whether the subtree reads the history through an index: `None` if so, else why not.
/// A scan of `history` must be an `Index Scan` or `Index Only Scan` with an `Index Cond`, or a
/// `Bitmap Heap Scan` over `Bitmap Index Scan`s with one. A `Sort` above a scan of the history
/// that is not is reported as a sort of the whole history.
fn fault(node: &Value, history: &str) -> Option<String> {
    let kind = field(node, "Node Type").unwrap_or("?");
    if field(node, "Relation Name") == Some(history) {
        let ok = match kind {
            "Index Scan" | "Index Only Scan" => node.get("Index Cond").is_some(),
            "Bitmap Heap Scan" => {
                let ch = children(node);
                !ch.is_empty() && ch.iter().all(bitmap_has_cond)
            }
            _ => false,
        };
        if !ok {
            return Some(format!(
                "{kind} of {history}{}: reads the whole history",
                if kind.starts_with("Index") {
                    " without an index condition"
                } else {
                    ""
                }
            ));
        }
        return None;
    }
    for ch in children(node) {
        if let Some(f) = fault(ch, history) {
            return Some(if kind == "Sort" {
                format!("Sort over the whole history ({f})")
            } else {
                f
            });
        }
    }
    None
}

/// A bitmap scan's input: `Bitmap Index Scan`s with an index condition, combined by
/// `BitmapAnd`/`BitmapOr`.
fn bitmap_has_cond(node: &Value) -> bool {
    match field(node, "Node Type") {
        Some("Bitmap Index Scan") => node.get("Index Cond").is_some(),
        Some("BitmapAnd") | Some("BitmapOr") => children(node).iter().all(bitmap_has_cond),
        _ => false,
    }
}

fn duration_ms(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) / 1000.0)
}

/// (i): loads the history, then checks and times the reads.
pub(crate) fn workload_i(c: &mut Client, s: &Sizes) -> Res<Reads> {
    let (keys, days) = (s.i_keys, s.i_days);
    let mid = days / 2;
    println!(
        "(i) reads of one window of one key and of one day from _latest, _sealed and _history over {} history rows \
         ({} keys × {} days)",
        crate::num((keys * days) as usize),
        crate::num(keys as usize),
        crate::num(days as usize)
    );
    reset(c, true)?;
    let t = Instant::now();
    exec(
        c,
        &format!(
            "INSERT INTO ev (id, k, amount, at) \
             SELECT d::bigint * {keys} + k, k, ((k * 7 + d) % 100000) / 100.0, \
                    timestamptz '{FIRST_DAY}' + d * interval '1 day' + (k % 86400) * interval '1 second' \
             FROM generate_series(0, {days} - 1) d, generate_series(0, {keys} - 1) k ORDER BY d, k"
        ),
    )?;
    let day = text(
        c,
        &format!("SELECT (timestamptz '{FIRST_DAY}' + {mid} * interval '1 day')::text"),
    )?;
    // Fires every day up to the middle one (and purges all but it: its grace of a day is open).
    let day_end = text(
        c,
        &format!("SELECT (timestamptz '{day}' + interval '1 day')::text"),
    )?;
    advance(c, &day_end)?;
    exec(
        c,
        &format!(
            "INSERT INTO ev (id, k, amount, at) \
             SELECT {keys}::bigint * {days} + k, k, 1.00, timestamptz '{day}' + interval '12 hours' \
             FROM generate_series({KEY}, {keys} - 1, 10) k"
        ),
    )?;
    // Every day fires; the last is still within its grace. Then one row per key on the day after,
    // whose windows are open: what `_provisional` and `_current` show as today so far.
    let last_end = text(
        c,
        &format!("SELECT (timestamptz '{FIRST_DAY}' + {days} * interval '1 day')::text"),
    )?;
    advance(c, &last_end)?;
    exec(
        c,
        &format!(
            "INSERT INTO ev (id, k, amount, at) \
             SELECT {keys}::bigint * {days} + {keys} + k, k, 2.00, timestamptz '{last_end}' + interval '9 hours' \
             FROM generate_series(0, {keys} - 1) k"
        ),
    )?;
    let load = t.elapsed();
    let history = text(
        c,
        "SELECT tablename::text FROM pg_tables \
         WHERE schemaname = '_eventtime' AND tablename ~ '^p[0-9]+_history$'",
    )?;
    let history_rows = scalar(c, &format!("SELECT count(*) FROM _eventtime.{history}"))?;
    let late_versions = scalar(
        c,
        &format!("SELECT count(*) FROM _eventtime.{history} WHERE version = 2"),
    )?;
    let late_keys = (KEY as i64..keys as i64).step_by(10).count() as i64;
    let main = (keys * days) as i64;
    if history_rows != main + late_keys || late_versions != late_keys {
        return Err(format!(
            "(i): the history has {history_rows} rows, {late_versions} of them version 2; expected {} and {late_keys}",
            main + late_keys
        ));
    }
    settle(c)?;
    println!(
        "  (i) history of {} rows ({} late versions) loaded and fired in {}",
        crate::num(history_rows as usize),
        late_versions,
        crate::ms(load)
    );

    let point = format!("window_start = timestamptz '{day}' AND k = {KEY}");
    let range = format!(
        "window_start >= timestamptz '{day}' AND window_start < timestamptz '{day}' + interval '1 day'"
    );
    let today = format!(
        "window_start >= timestamptz '{last_end}' AND window_start < timestamptz '{last_end}' + interval '1 day'"
    );
    let keys = keys as i64;
    let mut reads = Vec::new();
    let mut cases: Vec<(&'static str, &'static str, &String, i64)> = Vec::new();
    for (view, point_rows, day_rows) in [
        ("latest", 1, keys),
        ("sealed", 1, keys),
        ("history", 2, keys + late_keys),
        ("current", 1, keys),
    ] {
        cases.push((view, "one window of one key", &point, point_rows));
        cases.push((view, "one day", &range, day_rows));
    }
    cases.push(("current", "today so far", &today, keys));
    cases.push(("provisional", "today so far", &today, keys));
    {
        for (view, what, cond, expected) in cases {
            let sql = format!("SELECT * FROM bench_{view} WHERE {cond}");
            let checked = explain(c, "ANALYZE, BUFFERS", &sql)?;
            let plan = checked.get("Plan").ok_or("EXPLAIN's JSON has no Plan")?;
            let mut nodes = Vec::new();
            describe_plan(plan, &mut nodes);
            let rows = number(plan, "Actual Rows") as i64;
            if rows != expected {
                return Err(format!(
                    "(i) {what} of bench_{view}: {rows} rows, the history has {expected}\nplan: {}",
                    nodes.join(" > ")
                ));
            }
            let buffers =
                (number(plan, "Shared Hit Blocks") + number(plan, "Shared Read Blocks")) as i64;
            let mut execution = Vec::new();
            let mut round_trip = Vec::new();
            for _ in 0..s.i_reps {
                let v = explain(c, "ANALYZE, TIMING OFF", &sql)?;
                execution.push(duration_ms(number(&v, "Execution Time")));
                let t = Instant::now();
                c.query(sql.as_str(), &[])
                    .map_err(|e| format!("{}\nin: {sql}", crate::describe(&e)))?;
                round_trip.push(t.elapsed());
            }
            let r = Read {
                view,
                what,
                plan: nodes.join(" > "),
                buffers,
                rows,
                execution: crate::median(execution),
                round_trip: crate::median(round_trip),
                fault: fault(plan, &history),
            };
            println!(
                "  (i) {what} of bench_{view}: {} row(s), execution {}, round trip {}, {} buffers; plan: {}{}",
                r.rows,
                crate::ms3(r.execution),
                crate::ms3(r.round_trip),
                r.buffers,
                r.plan,
                r.fault
                    .as_deref()
                    .map(|f| format!(" — NOT AN INDEX READ: {f}"))
                    .unwrap_or_default()
            );
            reads.push(r);
        }
    }
    Ok(Reads {
        history_rows,
        late_versions,
        day,
        key: KEY,
        load,
        reads,
    })
}
