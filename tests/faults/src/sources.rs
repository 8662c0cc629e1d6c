//! Per-source watermarks (`advance_watermark(pipeline, watermark, source)`, `mark_idle`,
//! `idle_timeout`) and `watermark_lag` under concurrency, for the `sources` tests: the pipeline
//! `faults` on `events` of `workload`, a log of every change to its sources, a model that replays
//! the log, source threads, and a monitor thread.
//!
//! The log. Every transaction that can move a source or the pipeline watermark writes one row to
//! `wm_log` in that same transaction, after the change: the `advance_watermark` and `mark_idle`
//! calls of the source threads (`logged_op`) and, in a pipeline with a `watermark_lag`, every
//! ingest transaction (the `INSERT INTO batches` of `workload`, turned into a log row by an
//! `INSTEAD OF` trigger on the view `batches`). Each of these transactions holds `EXCLUSIVE` on
//! the pipeline's state table from its call or ingest statement to its commit (`advance_watermark`
//! and `mark_idle` take it first thing; the trigger of a lag pipeline takes it before its ingest
//! statement reads the watermark), and draws `seq` from a sequence while it holds it: `seq`
//! orders the log as the lock ordered the transactions. Hence:
//!
//! - the watermark a lag ingest statement classified its rows against is the `wm_after` of the
//!   log row just before its own. The view `batches` gives it as `wm`, the meaning `checks`
//!   gives that column (in a pipeline without lag, `batches` is the table of `workload`, whose
//!   `wm` is the watermark at commit, the same value there), so every check of `checks` applies
//!   unchanged;
//! - replaying the log through a model of the extension's source clock (a source registers with
//!   its first advance and only moves forward; an advance clears its idle mark; it is idle when
//!   marked or when it last moved longer than `idle_timeout` before the transaction's `now()`;
//!   the pipeline watermark is the minimum over the active sources and never goes back; an
//!   ingest statement of a lag pipeline advances the source `watermark_lag` to its greatest event
//!   time minus the lag) must give every row's `wm_after` and the value the call returned, and
//!   at the end the rows of `_eventtime.source` and of the view `eventtime.sources`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use postgres::{Client, GenericClient, IsolationLevel};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cluster::{Cluster, SUPERUSER};
use crate::db::{classify, describe, Failure};
use crate::workload::{
    connect, guarded, micros_sql, snapshot_sealed, ts_text, AdvancerOut, Shared, EVENTS_TABLE,
    INFINITY, MINUTE, OWNER, PIPELINE, PIPELINE_ARGS,
};

/// The source ingest statements of a lag pipeline advance.
pub const LAG_SOURCE: &str = "watermark_lag";

/// The log and its sequence (see the module comment).
pub const LOG_SETUP: &str = "
CREATE SEQUENCE wm_order;
CREATE TABLE wm_log (
    seq      bigint PRIMARY KEY,
    op       text NOT NULL CHECK (op IN ('batch', 'advance', 'mark_idle')),
    batch_id bigint UNIQUE,
    source   text,
    arg      timestamptz,
    -- The watermark advance_watermark or mark_idle returned.
    reported timestamptz,
    -- The pipeline watermark at the end of the transaction.
    wm_after timestamptz,
    -- now(): the processing time the extension judged idle timeouts at.
    at       timestamptz NOT NULL
);
";

/// `faults` on `events` as in `workload::setup`, with a watermark lag of 1 hour and an idle
/// timeout of 2 seconds; `batches` is a view over the log.
pub fn lag_setup() -> String {
    format!(
        "
{EVENTS_TABLE}
{LOG_SETUP}
-- The ingest threads insert (batch id, pipeline watermark at commit); with a lag that is the
-- watermark after the statement's own advance, so the log keeps it as wm_after, and the view
-- gives the watermark the statement's rows were classified against: the one before it.
CREATE VIEW batches AS
SELECT batch_id, wm FROM (SELECT op, batch_id, lag(wm_after) OVER (ORDER BY seq) AS wm FROM wm_log) l
WHERE op = 'batch';
CREATE FUNCTION log_batch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO wm_log (seq, op, batch_id, wm_after, at) VALUES (nextval('wm_order'), 'batch', NEW.batch_id, NEW.wm, now());
    RETURN NEW;
END $$;
CREATE TRIGGER log_batch INSTEAD OF INSERT ON batches FOR EACH ROW EXECUTE FUNCTION log_batch();
SELECT eventtime.create_pipeline(
{PIPELINE_ARGS},
    watermark_lag    => interval '1 hour',
    idle_timeout     => interval '2 seconds'
);
"
    )
}

/// A change the source threads make, each in its own logged transaction.
#[derive(Debug, Clone)]
pub enum Op {
    Advance { source: String, to: i64 },
    MarkIdle { source: String },
}

impl Op {
    fn name(&self) -> &'static str {
        match self {
            Op::Advance { .. } => "advance",
            Op::MarkIdle { .. } => "mark_idle",
        }
    }
    fn source(&self) -> &str {
        match self {
            Op::Advance { source, .. } | Op::MarkIdle { source } => source,
        }
    }
}

/// Runs `op` and logs it in the same transaction. Returns the pipeline watermark the call
/// returned (microseconds, `INFINITY` for infinity; None when there is none).
pub fn logged_op(c: &mut Client, op: &Op) -> Result<Option<i64>, postgres::Error> {
    let mut tx = c.transaction()?;
    let r = match op {
        Op::Advance { source, to } => tx.query_one(
            "SELECT watermark::text FROM eventtime.advance_watermark($1, $2::text::timestamptz, $3)",
            &[&PIPELINE, &ts_text(*to), source],
        )?,
        Op::MarkIdle { source } => tx.query_one(
            "SELECT watermark::text FROM eventtime.mark_idle($1, $2)",
            &[&PIPELINE, source],
        )?,
    };
    let reported: Option<String> = r.get(0);
    let arg = match op {
        Op::Advance { to, .. } => Some(ts_text(*to)),
        Op::MarkIdle { .. } => None,
    };
    let r = tx.query_one(
        &format!(
            "INSERT INTO wm_log (seq, op, source, arg, reported, wm_after, at)
             SELECT nextval('wm_order'), $1, $2, $3::text::timestamptz, $4::text::timestamptz, p.watermark, now()
             FROM _eventtime.pipeline p WHERE p.name = $5
             RETURNING {}",
            micros_sql("reported")
        ),
        &[&op.name(), &op.source(), &arg, &reported, &PIPELINE],
    )?;
    let reported: Option<i64> = r.get(0);
    tx.commit()?;
    Ok(reported)
}

/// Advances every registered source of the pipeline (as `eventtime.sources` shows them to the
/// role of `c`, its owner) to `infinity`, logged.
pub fn advance_every_source_to_infinity(c: &mut Client) -> Result<Vec<String>, postgres::Error> {
    let names: Vec<String> = c
        .query(
            "SELECT source FROM eventtime.sources WHERE pipeline = $1 ORDER BY source",
            &[&PIPELINE],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for n in &names {
        logged_op(
            c,
            &Op::Advance {
                source: n.clone(),
                to: INFINITY,
            },
        )?;
    }
    Ok(names)
}

// ---------------------------------------------------------------------------------------------
// The model.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceState {
    pub watermark: i64,
    pub advanced_at: i64,
    pub marked_idle: bool,
}

/// The extension's source clock, as documented (SPEC, README, `eventtime.sources`).
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub sources: BTreeMap<String, SourceState>,
    pub watermark: Option<i64>,
    pub idle_timeout: Option<i64>,
}

impl Model {
    pub fn idle_reason(&self, s: &SourceState, now: i64) -> Option<&'static str> {
        if s.marked_idle {
            return Some("marked");
        }
        match self.idle_timeout {
            Some(t) if (now as i128 - s.advanced_at as i128) > t as i128 => Some("timeout"),
            _ => None,
        }
    }

    pub fn min_active(&self, now: i64) -> Option<i64> {
        self.sources
            .values()
            .filter(|s| self.idle_reason(s, now).is_none())
            .map(|s| s.watermark)
            .min()
    }

    fn recompute(&mut self, now: i64) {
        self.watermark = match (self.watermark, self.min_active(now)) {
            (Some(c), Some(m)) => Some(c.max(m)),
            (c, m) => c.or(m),
        };
    }

    pub fn advance(&mut self, source: &str, to: i64, now: i64) {
        let ahead = self.sources.get(source).is_none_or(|s| to > s.watermark);
        if ahead {
            self.sources.insert(
                source.to_string(),
                SourceState {
                    watermark: to,
                    advanced_at: now,
                    marked_idle: false,
                },
            );
        }
        self.recompute(now);
    }

    /// False for an unknown source (the call fails, nothing changes).
    pub fn mark_idle(&mut self, source: &str, now: i64) -> bool {
        match self.sources.get_mut(source) {
            Some(s) => {
                s.marked_idle = true;
                self.recompute(now);
                true
            }
            None => false,
        }
    }
}

fn opt_ts(v: Option<i64>) -> String {
    v.map(ts_text).unwrap_or_else(|| "NULL".into())
}

fn interval_micros(expr: &str) -> String {
    format!("(extract(epoch FROM {expr}) * 1000000)::bigint")
}

/// What a replay found: the violations, the model at the end, and the log's length.
pub struct Replay {
    pub violations: Vec<String>,
    pub model: Model,
    pub entries: usize,
    /// The pipeline watermark before the last logged change.
    pub before_last: Option<i64>,
}

/// Replays `wm_log` through the model in the caller's snapshot and compares every logged
/// watermark, the rows of `_eventtime.source`, the pipeline watermark and `eventtime.sources`
/// with it. Run it in one REPEATABLE READ transaction.
pub fn replay<C: GenericClient>(c: &mut C) -> Result<Replay, postgres::Error> {
    let mut v = Vec::new();
    let r = c.query_one(
        &format!(
            "SELECT {}, {}, {}, {} FROM eventtime.pipelines WHERE name = $1",
            micros_sql("watermark"),
            interval_micros("watermark_lag"),
            interval_micros("idle_timeout"),
            micros_sql("now()")
        ),
        &[&PIPELINE],
    )?;
    let pipeline_wm: Option<i64> = r.get(0);
    let lag: Option<i64> = r.get(1);
    let idle_timeout: Option<i64> = r.get(2);
    let now: i64 = r.get::<_, Option<i64>>(3).expect("now()");
    let mut model = Model {
        idle_timeout,
        ..Default::default()
    };

    let mut batch_max: HashMap<i64, i64> = HashMap::new();
    if lag.is_some() {
        for r in c.query(
            &format!(
                "SELECT batch_id, {} FROM events GROUP BY batch_id",
                micros_sql("max(ts)")
            ),
            &[],
        )? {
            batch_max.insert(r.get(0), r.get::<_, Option<i64>>(1).expect("max(ts)"));
        }
    }
    let rows = c.query(
        &format!(
            "SELECT seq, op, batch_id, source, {}, {}, {}, {} FROM wm_log ORDER BY seq",
            micros_sql("arg"),
            micros_sql("reported"),
            micros_sql("wm_after"),
            micros_sql("at")
        ),
        &[],
    )?;
    let mut before_last = None;
    let mut mismatches = 0;
    for r in &rows {
        let seq: i64 = r.get(0);
        let op: String = r.get(1);
        let batch_id: Option<i64> = r.get(2);
        let source: Option<String> = r.get(3);
        let arg: Option<i64> = r.get(4);
        let reported: Option<i64> = r.get(5);
        let wm_after: Option<i64> = r.get(6);
        let at: i64 = r.get::<_, Option<i64>>(7).expect("at");
        before_last = model.watermark;
        let what = match op.as_str() {
            "batch" => {
                let b = batch_id.expect("batch id");
                let Some(lag) = lag else {
                    v.push(format!(
                        "log row {seq}: a batch in a pipeline without watermark_lag"
                    ));
                    continue;
                };
                match batch_max.get(&b) {
                    Some(&max) => {
                        model.advance(LAG_SOURCE, max.saturating_sub(lag), at);
                        format!(
                            "ingest of batch {b} (greatest event time {}, so {LAG_SOURCE} to {})",
                            ts_text(max),
                            ts_text(max.saturating_sub(lag))
                        )
                    }
                    None => {
                        v.push(format!("log row {seq}: batch {b} has no rows in events"));
                        continue;
                    }
                }
            }
            "advance" => {
                let (s, to) = (source.clone().expect("source"), arg.expect("arg"));
                model.advance(&s, to, at);
                format!("advance_watermark of source {s:?} to {}", ts_text(to))
            }
            "mark_idle" => {
                let s = source.clone().expect("source");
                if !model.mark_idle(&s, at) {
                    v.push(format!("log row {seq}: mark_idle of source {s:?} committed, but the model has no such source"));
                }
                format!("mark_idle of source {s:?}")
            }
            other => panic!("unknown op {other}"),
        };
        let mut bad = Vec::new();
        if wm_after != model.watermark {
            bad.push(format!(
                "pipeline watermark after it {} (model: {})",
                opt_ts(wm_after),
                opt_ts(model.watermark)
            ));
        }
        if op != "batch" && reported != model.watermark {
            bad.push(format!(
                "the call returned watermark {} (model: {})",
                opt_ts(reported),
                opt_ts(model.watermark)
            ));
        }
        if before_last.is_some_and(|b| wm_after.is_none_or(|w| w < b)) {
            bad.push(format!(
                "THE PIPELINE WATERMARK WENT BACK from {} to {}",
                opt_ts(before_last),
                opt_ts(wm_after)
            ));
        }
        if !bad.is_empty() {
            mismatches += 1;
            if mismatches <= 8 {
                v.push(format!(
                    "log row {seq} ({what}, at {}): {}; sources before: {}",
                    ts_text(at),
                    bad.join("; "),
                    describe_sources(&model, at)
                ));
            }
            // Continue from what the database says, so that one difference is reported once.
            model.watermark = wm_after;
        }
    }
    if mismatches > 8 {
        v.push(format!(
            "... {mismatches} log rows differ from the model in all"
        ));
    }

    // The sources as stored.
    let stored: BTreeMap<String, SourceState> = c
        .query(
            &format!(
                "SELECT s.name, {}, {}, s.marked_idle FROM _eventtime.source s JOIN _eventtime.pipeline p ON p.id = s.pipeline_id
                 WHERE p.name = $1",
                micros_sql("s.watermark"),
                micros_sql("s.advanced_at")
            ),
            &[&PIPELINE],
        )?
        .iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                SourceState {
                    watermark: r.get::<_, Option<i64>>(1).expect("watermark"),
                    advanced_at: r.get::<_, Option<i64>>(2).expect("advanced_at"),
                    marked_idle: r.get(3),
                },
            )
        })
        .collect();
    if stored != model.sources {
        v.push(format!(
            "_eventtime.source differs from the replay of the log:\n    stored: {stored:?}\n    model:  {:?}",
            model.sources
        ));
    }
    if pipeline_wm != model.watermark {
        v.push(format!(
            "pipeline watermark {} but the committed log implies {}",
            opt_ts(pipeline_wm),
            opt_ts(model.watermark)
        ));
    }

    // The view, judged at this transaction's now().
    let view = c.query(
        &format!(
            "SELECT source, {}, {}, idle, idle_reason, holding_back FROM eventtime.sources WHERE pipeline = $1 ORDER BY source",
            micros_sql("watermark"),
            micros_sql("advanced_at")
        ),
        &[&PIPELINE],
    )?;
    let min = model.min_active(now);
    let mut seen = 0;
    for r in &view {
        let name: String = r.get(0);
        let got = (
            r.get::<_, Option<i64>>(1),
            r.get::<_, Option<i64>>(2),
            r.get::<_, bool>(3),
            r.get::<_, Option<String>>(4),
            r.get::<_, bool>(5),
        );
        let Some(s) = model.sources.get(&name) else {
            v.push(format!(
                "eventtime.sources lists {name:?}, which the log never registered"
            ));
            continue;
        };
        seen += 1;
        let reason = model.idle_reason(s, now);
        let want = (
            Some(s.watermark),
            Some(s.advanced_at),
            reason.is_some(),
            reason.map(String::from),
            reason.is_none() && Some(s.watermark) == min,
        );
        if got != want {
            v.push(format!(
                "eventtime.sources row of {name:?} at now() = {}: (watermark, advanced_at, idle, idle_reason, holding_back) = {got:?}, model {want:?}",
                ts_text(now)
            ));
        }
    }
    if seen != model.sources.len() {
        v.push(format!(
            "eventtime.sources lists {seen} of the {} sources of the log",
            model.sources.len()
        ));
    }
    Ok(Replay {
        violations: v,
        model,
        entries: rows.len(),
        before_last,
    })
}

fn describe_sources(m: &Model, now: i64) -> String {
    m.sources
        .iter()
        .map(|(n, s)| {
            format!(
                "{n}={}{}",
                ts_text(s.watermark),
                m.idle_reason(s, now)
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `replay` in a REPEATABLE READ snapshot of its own.
pub fn replay_check(c: &mut Client) -> Result<Replay, postgres::Error> {
    let mut tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    let r = replay(&mut tx)?;
    tx.commit()?;
    Ok(r)
}

// ---------------------------------------------------------------------------------------------
// Source threads.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// Sources this thread advances (the first call of each is an advance, which registers it).
    pub own: Vec<String>,
    /// Sources it may also mark idle; one not registered yet makes the call fail with 42704,
    /// which is expected and counted.
    pub others: Vec<String>,
    pub pause_ms: (u64, u64),
    /// Now and then a pause longer than the idle timeout.
    pub long_pause: f64,
    pub long_pause_ms: u64,
    /// An advance goes to the pipeline watermark last seen, or to the watermark of
    /// `anchor_source` when it has one, plus this many minutes.
    pub offset_minutes: (i64, i64),
    pub anchor_source: Option<String>,
    pub p_mark_own: f64,
    pub p_mark_other: f64,
    pub crash_mode: bool,
}

#[derive(Debug, Default)]
pub struct DriverOut {
    pub ops: BTreeMap<&'static str, u64>,
    /// mark_idle of a source not registered yet (42704).
    pub unknown_source: u64,
    /// 40P01 / 40001: none is expected.
    pub retries: BTreeMap<String, u64>,
    pub connection_losses: u64,
    /// Time in the calls (mostly waiting for the state table's lock behind ingest transactions).
    pub max_call_ms: u64,
    pub total_call_ms: u64,
}

/// A thread that advances its own sources and marks sources idle, each call logged, until the
/// ingest threads are done.
pub fn run_driver(
    cluster: &Cluster,
    shared: &Shared,
    seed: u64,
    idx: usize,
    cfg: &DriverConfig,
) -> Result<DriverOut, String> {
    guarded(shared, &format!("source thread {idx}"), || {
        driver_loop(cluster, shared, seed, idx, cfg)
    })
}

fn driver_loop(
    cluster: &Cluster,
    shared: &Shared,
    seed: u64,
    idx: usize,
    cfg: &DriverConfig,
) -> Result<DriverOut, String> {
    let mut rng =
        ChaCha8Rng::seed_from_u64(seed ^ 0x5EED_0000 ^ (idx as u64).wrapping_mul(0x1000_0001));
    let mut out = DriverOut::default();
    let mut client = Some(connect(cluster, OWNER, shared, cfg.crash_mode)?);
    let mut registered: Vec<bool> = vec![false; cfg.own.len()];
    while shared.workers_left.load(Ordering::SeqCst) > 0 {
        if shared.aborted() {
            return Err("aborted".into());
        }
        let ms = if rng.random_bool(cfg.long_pause) {
            cfg.long_pause_ms
        } else {
            rng.random_range(cfg.pause_ms.0..=cfg.pause_ms.1)
        };
        thread::sleep(Duration::from_millis(ms));
        if client.is_none() {
            client = Some(connect(cluster, OWNER, shared, cfg.crash_mode)?);
        }
        let mut anchor = shared.watermark.load(Ordering::SeqCst);
        if let Some(a) = &cfg.anchor_source {
            let r = client.as_mut().unwrap().query_opt(
                &format!(
                    "SELECT {} FROM eventtime.sources WHERE pipeline = $1 AND source = $2",
                    micros_sql("watermark")
                ),
                &[&PIPELINE, a],
            );
            match r {
                Ok(Some(r)) => {
                    if let Some(w) = r.get::<_, Option<i64>>(0).filter(|&w| w != INFINITY) {
                        anchor = w;
                    }
                }
                Ok(None) => {}
                Err(e) => match classify(&e) {
                    Failure::ConnectionLost(_) if cfg.crash_mode => {
                        out.connection_losses += 1;
                        client = None;
                        continue;
                    }
                    f => return Err(format!("read of source {a:?}: {f:?}")),
                },
            }
        }
        let to = anchor
            + rng.random_range(cfg.offset_minutes.0..=cfg.offset_minutes.1) * MINUTE
            + rng.random_range(0..60_000_000);
        let u: f64 = rng.random();
        let op = if let Some(i) = registered.iter().position(|r| !r) {
            Op::Advance {
                source: cfg.own[i].clone(),
                to,
            }
        } else if u < cfg.p_mark_own {
            Op::MarkIdle {
                source: cfg.own.choose(&mut rng).unwrap().clone(),
            }
        } else if u < cfg.p_mark_own + cfg.p_mark_other && !cfg.others.is_empty() {
            Op::MarkIdle {
                source: cfg.others.choose(&mut rng).unwrap().clone(),
            }
        } else {
            Op::Advance {
                source: cfg.own.choose(&mut rng).unwrap().clone(),
                to,
            }
        };
        if client.is_none() {
            client = Some(connect(cluster, OWNER, shared, cfg.crash_mode)?);
        }
        shared.in_advance.store(true, Ordering::SeqCst);
        let t = std::time::Instant::now();
        let r = logged_op(client.as_mut().unwrap(), &op);
        let ms = t.elapsed().as_millis() as u64;
        shared.in_advance.store(false, Ordering::SeqCst);
        out.max_call_ms = out.max_call_ms.max(ms);
        out.total_call_ms += ms;
        match r {
            Ok(wm) => {
                *out.ops.entry(op.name()).or_default() += 1;
                if let Op::Advance { source, .. } = &op {
                    if let Some(i) = cfg.own.iter().position(|s| s == source) {
                        registered[i] = true;
                    }
                }
                if let Some(w) = wm.filter(|&w| w != INFINITY) {
                    shared.watermark.fetch_max(w, Ordering::SeqCst);
                }
            }
            Err(e) => match classify(&e) {
                Failure::Fatal(_)
                    if matches!(op, Op::MarkIdle { .. })
                        && e.code().is_some_and(|c| c.code() == "42704")
                        && !cfg.own.iter().any(|s| s == op.source()) =>
                {
                    out.unknown_source += 1;
                }
                Failure::Retry(code) => {
                    eprintln!(
                        "  source thread {idx}: {op:?} failed with {code}: {}",
                        describe(&e)
                    );
                    *out.retries.entry(code).or_default() += 1;
                }
                Failure::ConnectionLost(_) if cfg.crash_mode => {
                    out.connection_losses += 1;
                    client = None;
                    thread::sleep(Duration::from_millis(100));
                }
                f => return Err(format!("{op:?}: {f:?}")),
            },
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The monitor.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct MonitorConfig {
    pub crash_mode: bool,
    /// No idle timeout: in every snapshot the pipeline watermark is at least the minimum over the
    /// sources `eventtime.sources` shows active (with a timeout, the view judges idleness at the
    /// reader's now(), the pipeline at its last change's).
    pub exact_minimum: bool,
    pub pause_ms: (u64, u64),
    /// Every this many samples: read the sealed rows, replay the log, run `checks::consistency`.
    pub sealed_every: u64,
    pub replay_every: u64,
    pub check_every: u64,
}

#[derive(Debug, Default)]
pub struct MonitorOut {
    pub samples: u64,
    /// Samples at which the watermark had moved since the previous one.
    pub moves: u64,
    pub replays: u64,
    pub checks: u64,
    pub checks_after_reconnect: u64,
    pub connection_losses: u64,
    pub last: Option<i64>,
    /// What the sealed reads saw, for `checks::final_checks`.
    pub sealed: AdvancerOut,
    pub last_read_wm: i64,
}

/// Samples `eventtime.pipelines.watermark` (with the log and `eventtime.sources`, in one
/// snapshot) until `stop` is set: it never goes back, equals the last logged `wm_after`, and
/// (`exact_minimum`) is at least the minimum over the active sources. Reads the sealed rows,
/// replays the log and runs the consistency checks now and then, and (crash mode) right after
/// every reconnection.
pub fn run_monitor(
    cluster: &Cluster,
    shared: &Shared,
    seed: u64,
    cfg: &MonitorConfig,
    stop: &AtomicBool,
) -> Result<MonitorOut, String> {
    guarded(shared, "monitor", || {
        monitor_loop(cluster, shared, seed, cfg, stop)
    })
}

const SAMPLE_SQL: &str = "
SELECT pw, lw, n, mn, act FROM (
  SELECT (SELECT watermark FROM eventtime.pipelines WHERE name = 'faults') AS pw,
         (SELECT wm_after FROM wm_log ORDER BY seq DESC LIMIT 1) AS lw,
         (SELECT count(*) FROM wm_log) AS n,
         (SELECT min(watermark) FROM eventtime.sources WHERE pipeline = 'faults' AND NOT idle) AS mn,
         (SELECT count(*) FROM eventtime.sources WHERE pipeline = 'faults' AND NOT idle) AS act) x";

fn sample_sql() -> String {
    SAMPLE_SQL.replacen(
        "SELECT pw, lw, n, mn, act",
        &format!(
            "SELECT {}, {}, n, {}, act",
            micros_sql("pw"),
            micros_sql("lw"),
            micros_sql("mn")
        ),
        1,
    )
}

/// A lost connection (the server was killed).
struct Lost(String);

fn lost_or_err<T>(r: Result<T, postgres::Error>, what: &str) -> Result<Result<T, Lost>, String> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e) => match classify(&e) {
            Failure::ConnectionLost(m) => Ok(Err(Lost(m))),
            f => Err(format!("{what}: {f:?}")),
        },
    }
}

fn monitor_loop(
    cluster: &Cluster,
    shared: &Shared,
    seed: u64,
    cfg: &MonitorConfig,
    stop: &AtomicBool,
) -> Result<MonitorOut, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x3051_7002);
    let mut out = MonitorOut {
        last_read_wm: i64::MIN,
        ..Default::default()
    };
    let sql = sample_sql();
    let mut client: Option<Client> = None;
    let mut fresh_connection = false;
    let mut final_round = false;
    loop {
        if shared.aborted() {
            return Err("aborted".into());
        }
        if client.is_none() {
            client = Some(connect(cluster, SUPERUSER, shared, cfg.crash_mode)?);
            fresh_connection = out.samples > 0;
        }
        let c = client.as_mut().unwrap();
        let lost = |Lost(m): Lost,
                    out: &mut MonitorOut,
                    client: &mut Option<Client>|
         -> Result<(), String> {
            if !cfg.crash_mode {
                return Err(format!("connection lost: {m}"));
            }
            out.connection_losses += 1;
            *client = None;
            thread::sleep(Duration::from_millis(100));
            Ok(())
        };
        // One sample, in one snapshot.
        let r = (|| {
            let mut tx = c
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let r = tx.query_one(sql.as_str(), &[])?;
            tx.commit()?;
            Ok::<_, postgres::Error>((
                r.get::<_, Option<i64>>(0),
                r.get::<_, Option<i64>>(1),
                r.get::<_, i64>(2),
                r.get::<_, Option<i64>>(3),
                r.get::<_, i64>(4),
            ))
        })();
        let (pw, lw, n, mn, act) = match lost_or_err(r, "sample")? {
            Ok(v) => v,
            Err(s) => {
                lost(s, &mut out, &mut client)?;
                continue;
            }
        };
        out.samples += 1;
        if let Some(prev) = out.last {
            if pw.is_none_or(|w| w < prev) {
                shared.violation(format!(
                    "THE PIPELINE WATERMARK WENT BACK: eventtime.pipelines.watermark was {} at the previous sample, {} now",
                    ts_text(prev),
                    opt_ts(pw)
                ));
            }
        }
        if pw != out.last {
            out.moves += 1;
        }
        if n > 0 && pw != lw {
            shared.violation(format!(
                "pipeline watermark {} but the last committed change to it (wm_log) left {}",
                opt_ts(pw),
                opt_ts(lw)
            ));
        }
        if cfg.exact_minimum && act > 0 && pw.is_none_or(|w| mn.is_some_and(|m| w < m)) {
            shared.violation(format!(
                "pipeline watermark {} is behind the minimum {} over the {act} active sources of eventtime.sources",
                opt_ts(pw),
                opt_ts(mn)
            ));
        }
        out.last = pw.or(out.last);
        if let Some(w) = pw.filter(|&w| w != INFINITY) {
            shared.watermark.fetch_max(w, Ordering::SeqCst);
        }
        let every = |k: u64| k > 0 && out.samples.is_multiple_of(k);
        if fresh_connection || final_round || every(cfg.sealed_every) {
            let c = client.as_mut().unwrap();
            match lost_or_err(
                snapshot_sealed(c, &mut out.sealed, &mut out.last_read_wm, shared),
                "sealed read",
            )? {
                Ok(()) => {}
                Err(s) => {
                    lost(s, &mut out, &mut client)?;
                    continue;
                }
            }
        }
        if fresh_connection || final_round || every(cfg.replay_every) {
            let c = client.as_mut().unwrap();
            match lost_or_err(replay_check(c), "replay")? {
                Ok(r) => {
                    out.replays += 1;
                    for x in r.violations {
                        shared.violation(format!(
                            "replay of the log after {} entries: {x}",
                            r.entries
                        ));
                    }
                }
                Err(s) => {
                    lost(s, &mut out, &mut client)?;
                    continue;
                }
            }
        }
        if fresh_connection || final_round || every(cfg.check_every) {
            let c = client.as_mut().unwrap();
            match lost_or_err(
                crate::checks::consistency(c, &shared.windows),
                "consistency check",
            )? {
                Ok(v) => {
                    out.checks += 1;
                    if fresh_connection {
                        out.checks_after_reconnect += 1;
                    }
                    for x in v {
                        shared.violation(format!(
                            "{} check: {x}",
                            if fresh_connection {
                                "after reconnecting"
                            } else {
                                "mid-run"
                            }
                        ));
                    }
                }
                Err(s) => {
                    lost(s, &mut out, &mut client)?;
                    continue;
                }
            }
        }
        fresh_connection = false;
        if final_round {
            return Ok(out);
        }
        if stop.load(Ordering::SeqCst) {
            final_round = true;
            continue;
        }
        thread::sleep(Duration::from_millis(
            rng.random_range(cfg.pause_ms.0..=cfg.pause_ms.1),
        ));
    }
}
