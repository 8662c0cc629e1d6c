//! Tenancy: several tenants share one database and their pipelines run side by side under a
//! steady load while one tenant's client misbehaves, a stranger floods the lock table and an
//! owner role is removed. Every role has LOGIN and nothing else and is on its own connection:
//!
//! - `tn_owner_a` owns `ta` and `pa` (key `dev`, `event_id`, 1 minute windows, 2 minutes lateness,
//!   `clock_lag => 0`, so that `eventtime.tick()` looks at it); it advances `pa`;
//! - `tn_owner_b` owns `tb` and `pb` (1 second windows, `clock_lag => 0`: `tick()` moves it) and
//!   `tbs` and the session pipeline `ps` (key `usr`, `session_gap` 5 minutes), which it advances;
//! - `tn_owner_c` owns `tc` and `pc` (1 minute windows), which it advances until it is removed
//!   (`REASSIGN OWNED BY tn_owner_c TO tn_heir; DROP OWNED BY ...; DROP ROLE ...` while writers
//!   insert into `tc`); `tn_heir` advances `pc` after that, and drops it at the end;
//! - `tn_ingest` has INSERT on the four tables (and USAGE on the schema): 9 connections of it
//!   insert single rows and statements of 2 to 5 rows (INSERT, or `eventtime.ingest`), each
//!   statement its own transaction, on time, late, too late, redelivered and duplicated;
//! - `tn_stranger` has nothing.
//!
//! The faults, during the load: (1) `tn_ingest` begins a transaction, inserts one row into `ta`
//! and sits idle in it for a few seconds: the other writers of `ta` go on (no statement over 2 s);
//! `tick()` (statement_timeout 5 s) returns within 500 ms with `pa` skipped as `busy` and `pb`
//! moving and firing; `eventtime.pipelines.idle_writers` names the idle session for `pa`; an
//! `advance_watermark('pa', ...)` of `tn_owner_a` returns only after the idle writer commits, and
//! the writers of `ta` go on while it waits. (2) `tn_stranger` takes `pg_advisory_lock(id, b)` for
//! every id 1..20 and bucket 0..1023 and holds them: the writers of the session pipeline go on.
//! (3) the removal of `tn_owner_c` while `tc` is written: writers may fail only around it (they
//! retry; only what committed counts), then `pc` belongs to `tn_heir`, who advances it, and
//! `eventtime.pipelines` works for the superuser and for `tn_heir`.
//!
//! (4) an overflow attempt: 4 connections of `tn_ingest` at once send `po` (`sum(numeric)`, owned
//! by `tn_owner_b`, fired by `tick()`) rows whose sum overflows `numeric` when the firing adds them
//! up: each such statement fails with 22003 naming `po` and applies nothing, the rows below the
//! bound are taken, `tick()` never skips `po`, and its owner's advance to `infinity` publishes
//! exactly the rows taken.
//!
//! At the end every pipeline goes to `infinity` (advanced by its owner) and, as the superuser,
//! every committed row is accounted for exactly once per pipeline: the source holds exactly the
//! rows the clients committed; per key and window (per key for the sessions), the latest version
//! is `count`/`sum` over the first copies of the ids not refused, refused rows are the rows of
//! their own key and window, once each; latest `n` + refused + duplicates = source rows, and the
//! duplicates are the redelivered copies. The stranger can advance, mark idle, drop and read the
//! views of none of the pipelines (42501).
//!
//! Also `concurrent_create_and_drop_fail_cleanly`: a create_pipeline racing another of the same
//! name, and an ingest racing the drop of its pipeline, fail with their own SQLSTATE and leave
//! nothing half-made.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use postgres::{Client, SimpleQueryMessage};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use pg_eventtime_faults::cluster::Cluster;
use pg_eventtime_faults::db::{
    backend_pid, describe, exec, one_i64, render, text_rows, wait_for_lock, Failure,
};
use pg_eventtime_faults::roles::{
    assert_logged_in_as, create_login_role, expect_denied, pipeline_ownership, table_owner,
    visible_pipelines,
};
use pg_eventtime_faults::rows::{ingest_json, insert_sql, SendError, TableSpec, Values};
use pg_eventtime_faults::workload::{join, ts_text};
use pg_eventtime_faults::{env_num, seed};

const DB: &str = "tenancy";
const OWNER_A: &str = "tn_owner_a";
const OWNER_B: &str = "tn_owner_b";
const OWNER_C: &str = "tn_owner_c";
const HEIR: &str = "tn_heir";
const INGEST: &str = "tn_ingest";
const STRANGER: &str = "tn_stranger";

/// No ingest statement, and no periodic advance, may take longer than this.
const LATENCY_BOUND: Duration = Duration::from_secs(2);
/// `tick()` while a writer of `pa` is idle in its transaction.
const IDLE_TICK_BOUND: Duration = Duration::from_millis(500);
/// Any `tick()` of the run.
const TICK_BOUND: Duration = Duration::from_secs(1);
/// The longest time between two ticks that moved `pb`.
const PB_GAP_BOUND: Duration = Duration::from_secs(4);
/// How long the idle writer sits in its transaction.
const IDLE_FOR: Duration = Duration::from_millis(4_500);
/// When, after the idle writer's insert, `tn_owner_a` sends its advance.
const ADVANCE_AFTER: Duration = Duration::from_millis(800);
/// The stranger's advisory locks: ids 1..=20, buckets 0..1024.
const LOCK_IDS: i64 = 20;
const LOCK_BUCKETS: i64 = 1024;

const SETUP_A: &str = "
CREATE TABLE ta (id bigint NOT NULL, dev text NOT NULL, v integer NOT NULL, ts timestamptz NOT NULL);
SELECT eventtime.create_pipeline(
    name => 'pa', source => 'ta', event_time => 'ts', key => ARRAY['dev'], event_id => 'id',
    window_size => interval '1 minute', allowed_lateness => interval '2 minutes', clock_lag => interval '0',
    aggregates => 'count(*) AS n, sum(v) AS total');
GRANT INSERT ON ta TO tn_ingest;
";

const SETUP_B: &str = "
CREATE TABLE tb (id bigint NOT NULL, dev text NOT NULL, v integer NOT NULL, ts timestamptz NOT NULL);
SELECT eventtime.create_pipeline(
    name => 'pb', source => 'tb', event_time => 'ts', key => ARRAY['dev'], event_id => 'id',
    window_size => interval '1 second', allowed_lateness => interval '30 seconds', clock_lag => interval '0',
    aggregates => 'count(*) AS n, sum(v) AS total');
CREATE TABLE tbs (id bigint NOT NULL, usr text NOT NULL, v integer NOT NULL, ts timestamptz NOT NULL);
SELECT eventtime.create_pipeline(
    name => 'ps', source => 'tbs', event_time => 'ts', key => ARRAY['usr'], event_id => 'id',
    session_gap => interval '5 minutes', allowed_lateness => interval '2 minutes',
    aggregates => 'count(*) AS n, sum(v) AS total');
CREATE TABLE tbo (k text NOT NULL, amount numeric NOT NULL, ts timestamptz NOT NULL);
SELECT eventtime.create_pipeline(
    name => 'po', source => 'tbo', event_time => 'ts', key => ARRAY['k'],
    window_size => interval '1 minute', allowed_lateness => interval '1 minute', clock_lag => interval '0',
    aggregates => 'count(*) AS n, sum(amount) AS total');
GRANT INSERT ON tb, tbs, tbo TO tn_ingest;
";

const SETUP_C: &str = "
CREATE TABLE tc (id bigint NOT NULL, shop text NOT NULL, v integer NOT NULL, ts timestamptz NOT NULL);
SELECT eventtime.create_pipeline(
    name => 'pc', source => 'tc', event_time => 'ts', key => ARRAY['shop'], event_id => 'id',
    window_size => interval '1 minute', allowed_lateness => interval '1 minute',
    aggregates => 'count(*) AS n, sum(v) AS total');
GRANT INSERT ON tc TO tn_ingest;
";

/// One tenant's table and pipeline, and how its writers pick event times (milliseconds before
/// the writer's clock).
struct Tenant {
    table: &'static str,
    pipeline: &'static str,
    key: &'static str,
    key_prefix: &'static str,
    keys: usize,
    /// Tumbling windows of this many seconds; `None`: sessions.
    window_secs: Option<i64>,
    /// On time: up to this long ago.
    fresh_ms: i64,
    /// (share, from, to): late rows, mostly within the lateness.
    late: (f64, i64, i64),
    /// (share, from, to): rows past their deadline.
    too_late: (f64, i64, i64),
    /// Its writers record and retry any error (the role removal happens on this tenant).
    tolerant: bool,
}

const A: usize = 0;
const B: usize = 1;
const S: usize = 2;
const C: usize = 3;

const TENANTS: [Tenant; 4] = [
    Tenant {
        table: "ta",
        pipeline: "pa",
        key: "dev",
        key_prefix: "dev",
        keys: 6,
        window_secs: Some(60),
        fresh_ms: 500,
        late: (0.12, 60_000, 150_000),
        too_late: (0.05, 300_000, 600_000),
        tolerant: false,
    },
    Tenant {
        table: "tb",
        pipeline: "pb",
        key: "dev",
        key_prefix: "dev",
        keys: 4,
        window_secs: Some(1),
        fresh_ms: 300,
        late: (0.12, 2_000, 40_000),
        too_late: (0.05, 120_000, 300_000),
        tolerant: false,
    },
    Tenant {
        table: "tbs",
        pipeline: "ps",
        key: "usr",
        key_prefix: "u",
        keys: 20,
        window_secs: None,
        fresh_ms: 1_000,
        late: (0.08, 360_000, 540_000),
        too_late: (0.04, 1_200_000, 1_800_000),
        tolerant: false,
    },
    Tenant {
        table: "tc",
        pipeline: "pc",
        key: "shop",
        key_prefix: "shop",
        keys: 4,
        window_secs: Some(60),
        fresh_ms: 500,
        late: (0.12, 60_000, 120_000),
        too_late: (0.05, 300_000, 600_000),
        tolerant: true,
    },
];

/// The tenant of each writer connection.
const WRITERS: [usize; 9] = [A, A, A, B, B, S, S, C, C];

impl Tenant {
    fn spec(&self) -> TableSpec {
        TableSpec {
            sql_name: format!("public.{}", self.table),
            columns: ["id", self.key, "v", "ts"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            pipeline: self.pipeline.into(),
        }
    }
}

/// The wall clock in microseconds, rounded to the millisecond (the server runs on this machine).
fn now_us() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    (d.as_millis() as i64) * 1_000
}

/// What every thread of the run shares.
struct Run<'a> {
    cluster: &'a Cluster,
    seed: u64,
    /// Every thread stops.
    stop: AtomicBool,
    /// The advancer of `pc` as `tn_owner_c` stops (before the role's removal).
    pc_stop: AtomicBool,
    next_id: AtomicI64,
    /// Held by the periodic advancer of `pa` for each advance, and by the coordinator through
    /// the idle writer's transaction (the only advance of `pa` then is the one under test).
    pa_gate: Mutex<()>,
    /// Held by the ticker for each tick, and by the coordinator through the idle period (it
    /// ticks itself then).
    tick_gate: Mutex<()>,
    pause_ms: u64,
}

impl Run<'_> {
    fn login(&self, role: &str) -> Client {
        let mut c = self.cluster.connect_as(DB, role);
        assert_logged_in_as(&mut c, role);
        c
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// A gate, also after a thread that held it panicked.
fn hold(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets the stop flag when dropped, so that a panic of the coordinator ends every thread of the
/// scope (which joins them before it unwinds).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// One committed ingest statement.
struct Stmt {
    start: Instant,
    dur: Duration,
}

impl Stmt {
    fn end(&self) -> Instant {
        self.start + self.dur
    }
}

#[derive(Default)]
struct WriterOut {
    tenant: usize,
    /// Every row of every statement that committed (redeliveries and in-statement duplicates
    /// included), as sent.
    committed: Vec<Values>,
    stmts: Vec<Stmt>,
    by_ingest: u64,
    retries: u64,
    /// Errors recorded and retried (only for a tolerant tenant): when the statement was sent,
    /// and the error.
    errors: Vec<(Instant, String)>,
}

/// The rows of one statement: 1 (half the time) to 5 rows, new (on time, late or too late) or
/// redeliveries of rows this writer committed before (3%), and now and then a row twice.
fn gen_rows(rng: &mut ChaCha8Rng, t: &Tenant, pool: &[Values], next_id: &AtomicI64) -> Vec<Values> {
    let n = if rng.random_bool(0.5) {
        1
    } else {
        rng.random_range(2..=5)
    };
    let mut rows = Vec::with_capacity(n + 1);
    for _ in 0..n {
        if !pool.is_empty() && rng.random_bool(0.03) {
            rows.push(pool.choose(rng).unwrap().clone());
            continue;
        }
        let u: f64 = rng.random();
        let ago_ms = if u < t.too_late.0 {
            rng.random_range(t.too_late.1..t.too_late.2)
        } else if u < t.too_late.0 + t.late.0 {
            rng.random_range(t.late.1..t.late.2)
        } else {
            rng.random_range(0..t.fresh_ms)
        };
        rows.push(vec![
            Some(next_id.fetch_add(1, Ordering::SeqCst).to_string()),
            Some(format!("{}{}", t.key_prefix, rng.random_range(0..t.keys))),
            Some(rng.random_range(1..1000).to_string()),
            Some(ts_text(now_us() - ago_ms * 1_000)),
        ]);
    }
    if rng.random_bool(0.02) {
        let r = rows.last().unwrap().clone();
        rows.push(r);
    }
    rows
}

/// One statement in a transaction of its own (autocommit: the session is never idle inside a
/// transaction), by a multi-row INSERT or `eventtime.ingest`.
fn send_auto(
    c: &mut Client,
    t: &TableSpec,
    ingest: bool,
    rows: &[Values],
) -> Result<(), SendError> {
    if !ingest {
        c.batch_execute(&insert_sql(t, rows))?;
        return Ok(());
    }
    let r = c.query_one(
        "SELECT accepted, late, refused, duplicates FROM eventtime.ingest($1, $2::text::jsonb)",
        &[&t.pipeline, &ingest_json(t, rows)],
    )?;
    let n: [i64; 4] = [r.get(0), r.get(1), r.get(2), r.get(3)];
    if n.iter().sum::<i64>() != rows.len() as i64 || n.iter().any(|&x| x < 0) {
        return Err(SendError::Contract(format!(
            "eventtime.ingest({}) of {} rows returned {n:?} (accepted, late, refused, duplicates)",
            t.pipeline,
            rows.len()
        )));
    }
    Ok(())
}

fn writer(run: &Run<'_>, tenant: usize, i: usize) -> Result<WriterOut, String> {
    let t = &TENANTS[tenant];
    let spec = t.spec();
    let mut rng =
        ChaCha8Rng::seed_from_u64(run.seed ^ 0x7E4A_0000 ^ ((tenant as u64) << 8) ^ i as u64);
    let mut c = run.login(INGEST);
    exec(&mut c, "SET statement_timeout = '20s'");
    let mut out = WriterOut {
        tenant,
        ..Default::default()
    };
    while !run.stopped() {
        let rows = gen_rows(&mut rng, t, &out.committed, &run.next_id);
        let ingest = rng.random_bool(0.2);
        let how = if ingest { "eventtime.ingest" } else { "INSERT" };
        let mut attempts = 0;
        loop {
            attempts += 1;
            let start = Instant::now();
            let e = match send_auto(&mut c, &spec, ingest, &rows) {
                Ok(()) => {
                    out.stmts.push(Stmt {
                        start,
                        dur: start.elapsed(),
                    });
                    break;
                }
                Err(e) => e,
            };
            match (e.failure(), &e) {
                (_, SendError::Contract(m)) => {
                    return Err(format!("writer {i} of {}: {m}", t.table))
                }
                (Failure::Retry(_), _) => out.retries += 1,
                (Failure::Fatal(m), _) if t.tolerant => out.errors.push((start, m)),
                (f, _) => {
                    return Err(format!(
                        "writer {i} of {}: {how} of {} rows: {f:?}",
                        t.table,
                        rows.len()
                    ))
                }
            }
            if attempts >= 200 {
                return Err(format!(
                    "writer {i} of {}: {how} of {} rows failed {attempts} times; last: {:?}",
                    t.table,
                    rows.len(),
                    e.failure()
                ));
            }
            thread::sleep(Duration::from_millis(10));
        }
        out.committed.extend(rows);
        out.by_ingest += u64::from(ingest);
        thread::sleep(Duration::from_millis(rng.random_range(0..=run.pause_ms)));
    }
    Ok(out)
}

#[derive(Debug, Clone)]
struct TickRow {
    pipeline: String,
    fired: i64,
    watermark: Option<String>,
    skipped: Option<String>,
}

struct TickRec {
    at: Instant,
    dur: Duration,
    rows: Vec<TickRow>,
}

impl TickRec {
    fn row(&self, p: &str) -> Option<&TickRow> {
        self.rows.iter().find(|r| r.pipeline == p)
    }

    /// The pipeline's row says its watermark moved.
    fn moved(&self, p: &str) -> bool {
        self.row(p)
            .is_some_and(|r| r.skipped.is_none() && r.watermark.is_some())
    }

    fn busy(&self, p: &str) -> bool {
        self.row(p)
            .is_some_and(|r| r.skipped.as_deref().is_some_and(|s| s.starts_with("busy")))
    }

    fn render(&self) -> String {
        self.rows
            .iter()
            .map(|r| {
                format!(
                    "{} fired {} wm {} skipped {}",
                    r.pipeline,
                    r.fired,
                    r.watermark.as_deref().unwrap_or("∅"),
                    r.skipped.as_deref().unwrap_or("∅")
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn tick(c: &mut Client) -> Result<TickRec, postgres::Error> {
    let at = Instant::now();
    let rows = c.query(
        "SELECT pipeline, windows_fired, watermark::text, skipped FROM eventtime.tick()",
        &[],
    )?;
    let dur = at.elapsed();
    Ok(TickRec {
        at,
        dur,
        rows: rows
            .iter()
            .map(|r| TickRow {
                pipeline: r.get(0),
                fired: r.get(1),
                watermark: r.get(2),
                skipped: r.get(3),
            })
            .collect(),
    })
}

/// A superuser connection whose ticks are bounded by a statement timeout of 5 s.
fn tick_connection(cluster: &Cluster) -> Client {
    let mut c = cluster.connect(DB);
    exec(&mut c, "SET statement_timeout = '5s'");
    c
}

/// `tick()` as the superuser every 200 to 400 ms (paused while the coordinator holds the gate).
fn ticker(run: &Run<'_>) -> Result<Vec<TickRec>, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(run.seed ^ 0x7E4A_71C4);
    let mut c = tick_connection(run.cluster);
    let mut out = Vec::new();
    while !run.stopped() {
        thread::sleep(Duration::from_millis(rng.random_range(200..400)));
        let _g = hold(&run.tick_gate);
        if run.stopped() {
            break;
        }
        out.push(tick(&mut c).map_err(|e| format!("tick(): {}", describe(&e)))?);
    }
    Ok(out)
}

#[derive(Default, Debug)]
struct AdvOut {
    advances: u64,
    fired: i64,
    max: Duration,
}

/// One advance of `pipeline` to `to`: (windows fired, windows purged, watermark).
fn advance(
    c: &mut Client,
    pipeline: &str,
    to: &str,
) -> Result<(i64, i64, Option<String>), postgres::Error> {
    let r = c.query_one(
        "SELECT windows_fired, windows_purged, watermark::text FROM eventtime.advance_watermark($1, $2::text::timestamptz)",
        &[&pipeline, &to],
    )?;
    Ok((r.get(0), r.get(1), r.get(2)))
}

/// As `role`, advances `pipeline` every 200 to 500 ms to `behind_ms` before the clock, until the
/// run (or `also_stop`) stops; each advance under `gate` when given.
fn advancer(
    run: &Run<'_>,
    role: &str,
    pipeline: &str,
    behind_ms: i64,
    also_stop: Option<&AtomicBool>,
    gate: Option<&Mutex<()>>,
) -> Result<AdvOut, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(
        run.seed ^ 0x7E4A_AD00 ^ pipeline.len() as u64 ^ role.len() as u64,
    );
    let mut c = run.login(role);
    exec(&mut c, "SET statement_timeout = '20s'");
    let stop = || run.stopped() || also_stop.is_some_and(|s| s.load(Ordering::SeqCst));
    let mut out = AdvOut::default();
    while !stop() {
        thread::sleep(Duration::from_millis(rng.random_range(200..500)));
        let _g = gate.map(hold);
        if stop() {
            break;
        }
        let to = ts_text(now_us() - behind_ms * 1_000);
        let t = Instant::now();
        loop {
            match advance(&mut c, pipeline, &to) {
                Ok((fired, _, _)) => {
                    out.fired += fired;
                    break;
                }
                Err(e) => match pg_eventtime_faults::db::classify(&e) {
                    Failure::Retry(_) => {}
                    f => return Err(format!("{role}: advance of {pipeline} to {to}: {f:?}")),
                },
            }
        }
        out.max = out.max.max(t.elapsed());
        out.advances += 1;
    }
    Ok(out)
}

/// Statements of `tenant` that ended in `[from, to]`, and the longest latency of those that
/// overlap it.
fn during(outs: &[WriterOut], tenant: usize, from: Instant, to: Instant) -> (usize, Duration) {
    let mut n = 0;
    let mut max = Duration::ZERO;
    for o in outs.iter().filter(|o| o.tenant == tenant) {
        for s in &o.stmts {
            if s.end() >= from && s.end() <= to {
                n += 1;
            }
            if s.start < to && s.end() > from {
                max = max.max(s.dur);
            }
        }
    }
    (n, max)
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// What the coordinator saw of the idle writer.
struct IdleSeen {
    /// The insert of the idle writer returned / its COMMIT was sent / returned.
    begun: Instant,
    commit_sent: Instant,
    /// The advance of `tn_owner_a` was sent / returned.
    adv_sent: Instant,
    adv_done: Instant,
    adv_result: Result<(i64, i64, Option<String>), String>,
    adv_finished_before_commit: bool,
    adv_activity: Option<String>,
    ticks: Vec<TickRec>,
    idle_writers: Option<Vec<String>>,
    pb_idle_writers: Option<Vec<String>>,
    idle_pid: i32,
    idle_row: Values,
}

/// Fault 1: `tn_ingest` idle in a transaction that inserted into `ta`.
fn idle_writer_fault<'scope>(
    s: &'scope thread::Scope<'scope, '_>,
    run: &Run<'_>,
    su: &mut Client,
    v: &mut Vec<String>,
) -> IdleSeen {
    let _adv_gate = hold(&run.pa_gate);
    let _tick_gate = hold(&run.tick_gate);
    let mut su_tick = tick_connection(run.cluster);
    let mut owner_a = run.login(OWNER_A);
    let adv_pid = backend_pid(&mut owner_a);
    let mut idle = run.login(INGEST);
    let idle_pid = backend_pid(&mut idle);
    let spec = TENANTS[A].spec();
    let idle_row: Values = vec![
        Some(run.next_id.fetch_add(1, Ordering::SeqCst).to_string()),
        Some("idle".into()),
        Some("7".into()),
        Some(ts_text(now_us())),
    ];
    exec(
        &mut idle,
        &format!(
            "BEGIN; {}",
            insert_sql(&spec, std::slice::from_ref(&idle_row))
        ),
    );
    let begun = Instant::now();
    let adv = s.spawn(move || {
        thread::sleep((begun + ADVANCE_AFTER).saturating_duration_since(Instant::now()));
        let to = ts_text(now_us() - 1_000_000);
        let sent = Instant::now();
        let r = advance(&mut owner_a, "pa", &to).map_err(|e| describe(&e));
        (sent, Instant::now(), r)
    });

    // (c) eventtime.pipelines names the idle writer for pa (and none for pb).
    thread::sleep(Duration::from_millis(300));
    let writers = |su: &mut Client, p: &str| -> Option<Vec<String>> {
        su.query_one(
            "SELECT idle_writers FROM eventtime.pipelines WHERE name = $1",
            &[&p],
        )
        .unwrap_or_else(|e| panic!("idle_writers of {p}: {}", describe(&e)))
        .get(0)
    };
    let idle_writers = writers(su, "pa");
    let pb_idle_writers = writers(su, "pb");

    // (b) tick() every 350 ms, (d) the advance waits.
    let mut ticks = Vec::new();
    let mut adv_activity = None;
    while begun.elapsed() + Duration::from_millis(400) < IDLE_FOR {
        match tick(&mut su_tick) {
            Ok(t) => ticks.push(t),
            Err(e) => v.push(format!(
                "tick() while a writer of pa is idle: {}",
                describe(&e)
            )),
        }
        if adv_activity.is_none() && begun.elapsed() > ADVANCE_AFTER + Duration::from_millis(500) {
            let r = su
                .query_one(
                    "SELECT state, wait_event_type, wait_event, left(query, 60) FROM pg_stat_activity WHERE pid = $1",
                    &[&adv_pid],
                )
                .unwrap_or_else(|e| panic!("pg_stat_activity: {}", describe(&e)));
            let f = |i: usize| r.get::<_, Option<String>>(i).unwrap_or_else(|| "∅".into());
            adv_activity = Some(format!("{} / {} {} / {}", f(0), f(1), f(2), f(3)));
        }
        thread::sleep(Duration::from_millis(350));
    }
    thread::sleep((begun + IDLE_FOR).saturating_duration_since(Instant::now()));
    let adv_finished_before_commit = adv.is_finished();
    let commit_sent = Instant::now();
    exec(&mut idle, "COMMIT");
    let (adv_sent, adv_done, adv_result) = adv.join().expect("the advance thread");
    IdleSeen {
        begun,
        commit_sent,
        adv_sent,
        adv_done,
        adv_result,
        adv_finished_before_commit,
        adv_activity,
        ticks,
        idle_writers,
        pb_idle_writers,
        idle_pid,
        idle_row,
    }
}

/// Checks what the coordinator saw of the idle writer, with the writers' statements.
fn check_idle(seen: &IdleSeen, outs: &[WriterOut], v: &mut Vec<String>) {
    let pid = format!("pid {} ", seen.idle_pid);
    match &seen.idle_writers {
        Some(w) if w.len() == 1 && w[0].contains(&pid) && w[0].contains(INGEST) && w[0].contains("idle in transaction") => {
            eprintln!("  idle_writers of pa: {w:?}")
        }
        w => v.push(format!(
            "eventtime.pipelines.idle_writers of pa while {INGEST} (pid {}) is idle in its transaction: {w:?}; expected one entry naming it",
            seen.idle_pid
        )),
    }
    if let Some(w) = &seen.pb_idle_writers {
        if w.iter().any(|x| x.contains(&pid)) {
            v.push(format!(
                "idle_writers of pb names the idle writer of pa: {w:?}"
            ));
        }
    }
    // tick(): prompt, pa busy, pb moving.
    let (mut pb_moved, mut pb_fired) = (0, 0);
    for t in &seen.ticks {
        if t.dur > IDLE_TICK_BOUND {
            v.push(format!(
                "tick() took {} while a writer of pa was idle: {}",
                secs(t.dur),
                t.render()
            ));
        }
        if !t.busy("pa") {
            v.push(format!(
                "tick() while a writer of pa was idle did not skip pa as busy: {}",
                t.render()
            ));
        }
        match t.row("pb") {
            Some(r) if t.moved("pb") => {
                pb_moved += 1;
                pb_fired += r.fired;
            }
            Some(r) if r.skipped.as_deref().is_some_and(|s| s.starts_with("busy")) => {}
            r => v.push(format!("tick(): pb neither moved nor busy: {r:?}")),
        }
    }
    eprintln!(
        "  {} ticks while idle: max {}, pa busy in each, pb moved in {pb_moved} and fired {pb_fired} windows; last: {}",
        seen.ticks.len(),
        secs(seen.ticks.iter().map(|t| t.dur).max().unwrap_or_default()),
        seen.ticks.last().map(|t| t.render()).unwrap_or_default()
    );
    if seen.ticks.len() < 5 || pb_moved == 0 || pb_fired == 0 {
        v.push(format!(
            "while a writer of pa was idle, {} ticks moved pb {pb_moved} times and fired {pb_fired} windows of it",
            seen.ticks.len()
        ));
    }
    // The advance waited for the commit, and only for it.
    let waited = seen.adv_done.saturating_duration_since(seen.adv_sent);
    eprintln!(
        "  advance of pa by {OWNER_A}: sent {} after the idle insert, returned {} after it was sent ({} after the COMMIT was sent): {:?}; while waiting: {}",
        secs(seen.adv_sent - seen.begun),
        secs(waited),
        secs(seen.adv_done.saturating_duration_since(seen.commit_sent)),
        seen.adv_result,
        seen.adv_activity.as_deref().unwrap_or("∅")
    );
    if let Err(e) = &seen.adv_result {
        v.push(format!(
            "the advance of pa during the idle period failed: {e}"
        ));
    }
    if seen.adv_finished_before_commit
        || seen.adv_done < seen.commit_sent
        || seen.adv_sent >= seen.commit_sent
    {
        v.push(format!(
            "the advance of pa did not wait for the idle writer: sent {} and returned {} after the idle insert, whose COMMIT was sent after {}",
            secs(seen.adv_sent - seen.begun),
            secs(seen.adv_done.saturating_duration_since(seen.begun)),
            secs(seen.commit_sent - seen.begun)
        ));
    }
    if seen.adv_done.saturating_duration_since(seen.commit_sent) > LATENCY_BOUND {
        v.push(format!(
            "the advance of pa returned {} after the idle writer's COMMIT was sent",
            secs(seen.adv_done - seen.commit_sent)
        ));
    }
    if !seen
        .adv_activity
        .as_deref()
        .is_some_and(|a| a.starts_with("active"))
    {
        v.push(format!(
            "the advance of pa, while it waited, was not active in pg_stat_activity: {:?}",
            seen.adv_activity
        ));
    }
    // The other writers of ta went on, through the idle period and through the advance's wait.
    for (what, from, to) in [
        ("the idle period", seen.begun, seen.commit_sent),
        ("the advance's wait", seen.adv_sent, seen.commit_sent),
    ] {
        let (n, max) = during(outs, A, from, to);
        eprintln!(
            "  writers of ta during {what} ({}): {n} statements committed, longest {}",
            secs(to - from),
            secs(max)
        );
        if n < 10 || max > LATENCY_BOUND {
            v.push(format!(
                "writers of ta during {what} ({}): {n} statements committed, the longest took {}",
                secs(to - from),
                secs(max)
            ));
        }
    }
}

/// Fault 2: the stranger takes the advisory locks `(id, bucket)` for every small id and every
/// bucket and holds them for a while. Returns the interval it held them.
/// `('9' || repeat('0', digits - 1))::numeric`: a value of `digits` digits.
fn nines(digits: usize) -> String {
    format!("('9' || repeat('0', {}))::numeric", digits - 1)
}

/// Fault 4: from 4 connections of `tn_ingest` at once, into one window of `po`, each sends the
/// value of 131072 digits that two of would overflow `numeric` (refused alone: beyond the bound
/// of one backend's part of a window's sum), then one of 131060 digits (taken), the same again
/// (refused: this backend's part would be beyond the bound) and 1 (taken). Before the bound, the
/// first rows were all taken and every firing of `po` failed from then on.
fn overflow_fault<'scope>(
    s: &'scope thread::Scope<'scope, '_>,
    run: &'scope Run<'_>,
    v: &mut Vec<String>,
) {
    const CONNECTIONS: usize = 4;
    let at = "date_trunc('minute', now()) + interval '2 minutes'";
    let stmts = [
        (nines(131_072), false),
        (nines(131_060), true),
        (nines(131_060), false),
        ("1".to_string(), true),
    ];
    let handles: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let stmts = stmts.clone();
            s.spawn(move || {
                let mut c = run.login(INGEST);
                let mut out = Vec::new();
                for (value, taken) in &stmts {
                    let sql = format!("INSERT INTO tbo VALUES ('k', {value}, {at})");
                    out.push((*taken, c.batch_execute(&sql)));
                }
                Ok::<_, String>(out)
            })
        })
        .collect();
    let mut errors = Vec::new();
    for (i, h) in handles.into_iter().enumerate() {
        let Some(results) = join(h, &format!("overflow writer {i}"), &mut errors) else {
            continue;
        };
        for (j, (taken, r)) in results.into_iter().enumerate() {
            match (taken, r) {
                (true, Ok(())) => {}
                (false, Err(e))
                    if e.as_db_error().is_some_and(|d| {
                        d.code().code() == "22003" && d.message().contains("pipeline \"po\"")
                    }) => {}
                (true, Err(e)) => v.push(format!(
                    "overflow writer {i}, statement {j}: should be taken, failed: {}",
                    describe(&e)
                )),
                (false, Err(e)) => v.push(format!(
                    "overflow writer {i}, statement {j}: failed, but not with 22003 naming po: {}",
                    describe(&e)
                )),
                (false, Ok(())) => v.push(format!(
                    "overflow writer {i}, statement {j}: a sum beyond the bound was taken"
                )),
            }
        }
    }
    v.extend(errors);
    let mut b = run.login(OWNER_B);
    let to_infinity = advance(&mut b, "po", "infinity")
        .and_then(|_| b.batch_execute("SELECT * FROM eventtime.mark_idle('po', 'clock')"));
    if let Err(e) = to_infinity {
        v.push(format!(
            "po's advance to infinity after the overflow attempt: {}",
            describe(&e)
        ));
        return;
    }
    let published = b
        .query_one(
            &format!(
                "SELECT count(*), sum(n)::bigint, coalesce(sum(total) = {CONNECTIONS} * {} + {CONNECTIONS}, false) FROM po_latest",
                nines(131_060)
            ),
            &[],
        )
        .map(|r| {
            (
                r.get::<_, i64>(0),
                r.get::<_, Option<i64>>(1),
                r.get::<_, bool>(2),
            )
        });
    eprintln!(
        "  po after the overflow attempt: (windows, rows, total as expected) = {published:?}"
    );
    match published {
        Ok((_, Some(n), true)) if n == 2 * CONNECTIONS as i64 => {}
        other => v.push(format!(
            "po published {other:?}, not the {} rows taken and their sum",
            2 * CONNECTIONS
        )),
    }
}

fn advisory_fault(run: &Run<'_>, su: &mut Client, v: &mut Vec<String>) -> (Instant, Instant) {
    let mut stranger = run.login(STRANGER);
    let pid = backend_pid(&mut stranger);
    let t = Instant::now();
    exec(
        &mut stranger,
        &format!(
            "DO $$ BEGIN FOR i IN 1..{LOCK_IDS} LOOP FOR b IN 0..{} LOOP PERFORM pg_advisory_lock(i, b); END LOOP; END LOOP; END $$",
            LOCK_BUCKETS - 1
        ),
    );
    let took = t.elapsed();
    let held = one_i64(
        su,
        &format!(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = {pid}"
        ),
    );
    eprintln!("  {STRANGER} took {held} advisory locks in {}", secs(took));
    if held != LOCK_IDS * LOCK_BUCKETS {
        v.push(format!(
            "{STRANGER} holds {held} advisory locks, expected {}",
            LOCK_IDS * LOCK_BUCKETS
        ));
    }
    let from = Instant::now();
    thread::sleep(Duration::from_millis(2_500));
    let to = Instant::now();
    exec(&mut stranger, "SELECT pg_advisory_unlock_all()");
    (from, to)
}

/// Fault 3: `tn_owner_c` is removed while its table is written. Returns when it started and
/// ended.
fn removal_fault(su: &mut Client) -> (Instant, Instant) {
    let from = Instant::now();
    for sql in [
        format!("REASSIGN OWNED BY {OWNER_C} TO {HEIR}"),
        format!("DROP OWNED BY {OWNER_C}"),
        format!("DROP ROLE {OWNER_C}"),
    ] {
        let t = Instant::now();
        exec(su, &sql);
        eprintln!("  {sql}: {}", secs(t.elapsed()));
    }
    (from, Instant::now())
}

/// After `pc`'s owner was removed: it belongs to the heir, who sees it (and only it).
fn check_heir(run: &Run<'_>, su: &mut Client, v: &mut Vec<String>) {
    let owners = text_rows(
        su,
        "SELECT name, owner::text FROM eventtime.pipelines ORDER BY name",
    )
    .unwrap_or_else(|e| panic!("eventtime.pipelines as the superuser: {}", describe(&e)));
    let want: Vec<Vec<Option<String>>> = [
        ("pa", OWNER_A),
        ("pb", OWNER_B),
        ("pc", HEIR),
        ("po", OWNER_B),
        ("ps", OWNER_B),
    ]
    .iter()
    .map(|(p, o)| vec![Some(p.to_string()), Some(o.to_string())])
    .collect();
    if owners != want {
        v.push(format!(
            "eventtime.pipelines (name, owner) as the superuser after the removal of {OWNER_C}: {:?}",
            owners.iter().map(|r| render(r)).collect::<Vec<_>>()
        ));
    }
    if one_i64(
        su,
        &format!("SELECT count(*) FROM pg_roles WHERE rolname = '{OWNER_C}'"),
    ) != 0
    {
        v.push(format!("{OWNER_C} still exists"));
    }
    if table_owner(su, "tc") != HEIR {
        v.push(format!(
            "tc belongs to {}, not {HEIR}",
            table_owner(su, "tc")
        ));
    }
    let mut heir = run.login(HEIR);
    let seen = visible_pipelines(&mut heir);
    let owner: Option<String> = heir
        .query_opt(
            "SELECT owner::text FROM eventtime.pipelines WHERE name = 'pc'",
            &[],
        )
        .unwrap_or_else(|e| panic!("eventtime.pipelines as {HEIR}: {}", describe(&e)))
        .map(|r| r.get(0));
    if seen != ["pc"] || owner.as_deref() != Some(HEIR) {
        v.push(format!(
            "eventtime.pipelines as {HEIR}: {seen:?}, owner of pc {owner:?}"
        ));
    }
    let (o, seen) = pipeline_ownership(
        su,
        &[
            ("pa", OWNER_A),
            ("pb", OWNER_B),
            ("ps", OWNER_B),
            ("po", OWNER_B),
            ("pc", HEIR),
        ],
    );
    v.extend(
        o.into_iter()
            .map(|x| format!("ownership after the removal: {x}")),
    );
    eprintln!("  after the removal: {}", seen.join(", "));
}

/// As the superuser, after `infinity`: every committed row of the tenant's table accounted for
/// once by its pipeline.
fn account(su: &mut Client, t: &Tenant, committed: &[Values], v: &mut Vec<String>) {
    let (tab, p, k) = (t.table, t.pipeline, t.key);
    let mut report = |what: &str, sql: &str, args: &[&(dyn postgres::types::ToSql + Sync)]| {
        let rows = su
            .query(sql, args)
            .unwrap_or_else(|e| panic!("{p}: {what}: {}\n{sql}", describe(&e)));
        if !rows.is_empty() {
            let mut s = format!("{p}: {what} ({} shown):", rows.len());
            for r in rows.iter().take(10) {
                let cols: Vec<Option<String>> = (0..r.len()).map(|i| r.get(i)).collect();
                s += &format!("\n    {}", render(&cols));
            }
            v.push(s);
        }
    };
    // The source holds exactly the committed rows (by id, with multiplicity).
    let ids: Vec<i64> = committed
        .iter()
        .map(|r| r[0].as_deref().unwrap().parse().unwrap())
        .collect();
    report(
        "source rows against the rows the clients committed (id, committed, in the table)",
        &format!(
            "WITH c AS (SELECT id, count(*) AS n FROM unnest($1::bigint[]) AS id GROUP BY id),
                  s AS (SELECT id, count(*) AS n FROM {tab} GROUP BY id)
             SELECT id::text, c.n::text, s.n::text FROM c FULL JOIN s USING (id)
             WHERE c.n IS DISTINCT FROM s.n ORDER BY id LIMIT 10"
        ),
        &[&ids],
    );
    // One row per id: the first copy (every copy is exact); the accepted ids are those not
    // refused.
    let ids_cte = match t.window_secs {
        Some(w) => format!(
            "ids AS (SELECT DISTINCT ON (id) id, {k} AS k, v, ts,
                            to_timestamp(floor(extract(epoch FROM ts) / {w}) * {w}) AS ws FROM {tab} ORDER BY id)"
        ),
        None => format!("ids AS (SELECT DISTINCT ON (id) id, {k} AS k, v, ts, ts AS ws FROM {tab} ORDER BY id)"),
    };
    let acc = format!(
        "{ids_cte},
         ref AS (SELECT event_id AS id FROM {p}_refused),
         acc AS (SELECT * FROM ids WHERE id NOT IN (SELECT id FROM ref))"
    );
    match t.window_secs {
        Some(_) => report(
            "latest version per key and window against the accepted rows (key, window, expected n, n, expected total, total)",
            &format!(
                "WITH {acc},
                 e AS (SELECT k, ws, count(*) AS n, sum(v)::bigint AS total FROM acc GROUP BY 1, 2),
                 g AS (SELECT {k} AS k, window_start AS ws, n, total::bigint AS total FROM {p}_latest)
                 SELECT coalesce(e.k, g.k), coalesce(e.ws, g.ws)::text, e.n::text, g.n::text, e.total::text, g.total::text
                 FROM e FULL JOIN g ON g.k = e.k AND g.ws = e.ws
                 WHERE (e.n, e.total) IS DISTINCT FROM (g.n, g.total) ORDER BY 1, 2 LIMIT 10"
            ),
            &[],
        ),
        None => report(
            "latest sessions per key against the accepted rows (key, expected n, n, expected total, total)",
            &format!(
                "WITH {acc},
                 e AS (SELECT k, count(*) AS n, sum(v)::bigint AS total FROM acc GROUP BY 1),
                 g AS (SELECT {k} AS k, sum(n)::bigint AS n, sum(total)::bigint AS total FROM {p}_latest GROUP BY 1)
                 SELECT coalesce(e.k, g.k), e.n::text, g.n::text, e.total::text, g.total::text
                 FROM e FULL JOIN g ON g.k = e.k
                 WHERE (e.n, e.total) IS DISTINCT FROM (g.n, g.total) ORDER BY 1 LIMIT 10"
            ),
            &[],
        ),
    }
    report(
        "refused rows that are not a committed row of their own key and window, or refused twice (id, key, window, source key, source window, times)",
        &format!(
            "WITH {ids_cte},
             times AS (SELECT event_id, count(*) AS n FROM {p}_refused GROUP BY 1)
             SELECT r.event_id::text, r.{k}, r.window_start::text, i.k, i.ws::text, t.n::text
             FROM {p}_refused r JOIN times t USING (event_id) LEFT JOIN ids i ON i.id = r.event_id
             WHERE i.id IS NULL OR i.k IS DISTINCT FROM r.{k} OR i.ws IS DISTINCT FROM r.window_start OR t.n > 1
             ORDER BY r.event_id LIMIT 10"
        ),
        &[],
    );
    let r = su
        .query_one(
            &format!(
                "SELECT (SELECT count(*) FROM {tab}), (SELECT count(DISTINCT id) FROM {tab}),
                        (SELECT coalesce(sum(n), 0)::bigint FROM {p}_latest), (SELECT count(*) FROM {p}_refused),
                        p.duplicates, p.refused, p.state_rows, p.open_windows, p.watermark::text
                 FROM eventtime.pipelines p WHERE p.name = $1"
            ),
            &[&p],
        )
        .unwrap_or_else(|e| panic!("{p}: accounting: {}", describe(&e)));
    let (src, distinct, latest, refused, dups, p_refused, state, open): (
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
    ) = (
        r.get(0),
        r.get(1),
        r.get(2),
        r.get(3),
        r.get(4),
        r.get(5),
        r.get(6),
        r.get(7),
    );
    let wm: Option<String> = r.get(8);
    eprintln!(
        "  {p}: {} committed rows, source {src} rows ({distinct} ids) = {latest} in latest versions + {refused} refused + {dups} duplicates",
        committed.len()
    );
    if src != committed.len() as i64 {
        v.push(format!(
            "{p}: the source has {src} rows; the clients committed {}",
            committed.len()
        ));
    }
    if latest + refused + dups != src {
        v.push(format!(
            "{p}: accounting: latest n {latest} + refused {refused} + duplicates {dups} = {}, but the source has {src} rows",
            latest + refused + dups
        ));
    }
    if dups != src - distinct {
        v.push(format!(
            "{p}: {dups} duplicates, but {} of the {src} source rows are copies of an earlier id",
            src - distinct
        ));
    }
    if p_refused != refused || state != 0 || open != 0 || wm.as_deref() != Some("infinity") {
        v.push(format!(
            "{p} after infinity: refused {p_refused} (view: {refused}), state_rows {state}, open_windows {open}, watermark {wm:?}"
        ));
    }
    if refused == 0 || dups == 0 || latest == 0 {
        v.push(format!("{p}: the run made {latest} accepted, {refused} refused and {dups} duplicate rows; it must make all three"));
    }
}

/// The end of the input of `p`, by its owner `role`: its sources to `infinity` (`clock`: the
/// source `default` to `infinity`, then the clock idle).
fn finish(c: &mut Client, role: &str, p: &str, clock: bool) {
    let (fired, _, wm) = advance(c, p, "infinity")
        .unwrap_or_else(|e| panic!("{role}: advance of {p} to infinity: {}", describe(&e)));
    let wm = if clock {
        let r = c
            .query_one(
                "SELECT windows_fired, watermark::text FROM eventtime.mark_idle($1, 'clock')",
                &[&p],
            )
            .unwrap_or_else(|e| panic!("{role}: mark_idle({p}, clock): {}", describe(&e)));
        eprintln!(
            "  {role}: {p} to infinity fired {fired}, then its clock idle fired {}",
            r.get::<_, i64>(0)
        );
        r.get(1)
    } else {
        eprintln!("  {role}: {p} to infinity fired {fired}");
        wm
    };
    assert_eq!(
        wm.as_deref(),
        Some("infinity"),
        "watermark of {p} after its end"
    );
}

/// The stranger may do nothing to any pipeline.
fn check_stranger(run: &Run<'_>) {
    let mut c = run.login(STRANGER);
    for t in &TENANTS {
        let p = t.pipeline;
        for sql in [
            format!("SELECT * FROM eventtime.advance_watermark('{p}', now())"),
            format!("SELECT * FROM eventtime.mark_idle('{p}', 'default')"),
            format!("SELECT eventtime.drop_pipeline('{p}')"),
            format!("SELECT * FROM {p}_history"),
            format!("SELECT * FROM {p}_latest"),
            format!("SELECT * FROM {p}_sealed"),
            format!("SELECT * FROM {p}_refused"),
        ] {
            expect_denied(&mut c, STRANGER, &sql);
        }
    }
    assert!(
        visible_pipelines(&mut c).is_empty(),
        "{STRANGER} sees pipelines in eventtime.pipelines"
    );
    let mut ingest = run.login(INGEST);
    expect_denied(
        &mut ingest,
        INGEST,
        "SELECT * FROM eventtime.advance_watermark('pa', now())",
    );
}

fn setup(cluster: &Cluster) {
    let mut su = cluster.connect("postgres");
    for r in [OWNER_A, OWNER_B, OWNER_C, HEIR, INGEST, STRANGER] {
        create_login_role(&mut su, r);
    }
    exec(&mut su, &format!("CREATE DATABASE {DB}"));
    let mut su = cluster.connect(DB);
    exec(
        &mut su,
        &format!(
            "CREATE EXTENSION pg_eventtime;
             GRANT CREATE ON SCHEMA public TO {OWNER_A}, {OWNER_B}, {OWNER_C};
             GRANT USAGE ON SCHEMA public TO {INGEST}"
        ),
    );
    for (role, sql, sees) in [
        (OWNER_A, SETUP_A, vec!["pa"]),
        (OWNER_B, SETUP_B, vec!["pb", "po", "ps"]),
        (OWNER_C, SETUP_C, vec!["pc"]),
    ] {
        let mut c = cluster.connect_as(DB, role);
        assert_logged_in_as(&mut c, role);
        exec(&mut c, sql);
        assert_eq!(
            visible_pipelines(&mut c),
            sees,
            "eventtime.pipelines as {role}"
        );
    }
    let (v, seen) = pipeline_ownership(
        &mut su,
        &[
            ("pa", OWNER_A),
            ("pb", OWNER_B),
            ("ps", OWNER_B),
            ("po", OWNER_B),
            ("pc", OWNER_C),
        ],
    );
    assert!(
        v.is_empty(),
        "ownership of the pipelines' objects:\n{}",
        v.join("\n")
    );
    eprintln!("  {}", seen.join(", "));
    let ids = text_rows(
        &mut su,
        "SELECT name, id::text FROM _eventtime.pipeline ORDER BY id",
    )
    .unwrap();
    for r in &ids {
        let id: i64 = r[1].as_deref().unwrap().parse().unwrap();
        assert!(
            (1..=LOCK_IDS).contains(&id),
            "pipeline {:?} has id {id}, outside the ids the stranger locks",
            r[0]
        );
    }
    for role in [INGEST, STRANGER] {
        let mut c = cluster.connect_as(DB, role);
        assert!(
            visible_pipelines(&mut c).is_empty(),
            "{role} sees pipelines"
        );
    }
}

#[test]
fn tenants_keep_firing_through_an_idle_writer_a_lock_flood_and_an_owner_removal() {
    let seed = seed("tenancy");
    let started = Instant::now();
    // A stranger's 20,480 session advisory locks fit in the shared lock table.
    let cluster = Cluster::start("tenancy", &["max_locks_per_transaction = 512"]);
    setup(&cluster);
    let run = Run {
        cluster: &cluster,
        seed,
        stop: AtomicBool::new(false),
        pc_stop: AtomicBool::new(false),
        next_id: AtomicI64::new(1),
        pa_gate: Mutex::new(()),
        tick_gate: Mutex::new(()),
        pause_ms: env_num("FAULTS_TENANCY_PAUSE_MS", 60),
    };
    let mut su = cluster.connect(DB);
    let mut v: Vec<String> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    let wm_of = |su: &mut Client, p: &str| -> Option<String> {
        su.query_one(
            "SELECT watermark::text FROM eventtime.pipelines WHERE name = $1",
            &[&p],
        )
        .unwrap_or_else(|e| panic!("watermark of {p}: {}", describe(&e)))
        .get(0)
    };
    let pb_wm = |su: &mut Client| wm_of(su, "pb");
    let pc_wm = |su: &mut Client| wm_of(su, "pc");

    let (outs, ticks, idle, locks, removal, advs) = thread::scope(|s| {
        let run = &run;
        let _stop = StopOnDrop(&run.stop);
        let writers: Vec<_> = WRITERS
            .iter()
            .enumerate()
            .map(|(i, &t)| s.spawn(move || writer(run, t, i)))
            .collect();
        let ticker_h = s.spawn(move || ticker(run));
        let pa_h = s.spawn(move || advancer(run, OWNER_A, "pa", 2_000, None, Some(&run.pa_gate)));
        let ps_h = s.spawn(move || advancer(run, OWNER_B, "ps", 30_000, None, None));
        let pc_h = s.spawn(move || advancer(run, OWNER_C, "pc", 2_000, Some(&run.pc_stop), None));

        thread::sleep(Duration::from_millis(1_500));
        eprintln!("  fault 1: {INGEST} idle in a transaction that wrote to ta");
        let pb_before = pb_wm(&mut su);
        let idle = idle_writer_fault(s, run, &mut su, &mut v);
        let pb_after = pb_wm(&mut su);
        eprintln!("  pb watermark: {pb_before:?} before the idle period, {pb_after:?} after");
        if pb_after.is_none() || pb_after <= pb_before {
            v.push(format!(
                "pb's watermark did not move during the idle period: {pb_before:?} -> {pb_after:?}"
            ));
        }

        thread::sleep(Duration::from_millis(700));
        eprintln!("  fault 2: {STRANGER} takes the advisory locks of every small id and bucket");
        let locks = advisory_fault(run, &mut su, &mut v);

        thread::sleep(Duration::from_millis(500));
        eprintln!("  fault 3: removal of {OWNER_C}");
        run.pc_stop.store(true, Ordering::SeqCst);
        let pc_c = join(pc_h, "advancer of pc as tn_owner_c", &mut errors);
        let removal = removal_fault(&mut su);
        let pc_before = pc_wm(&mut su);
        let heir_h = s.spawn(move || advancer(run, HEIR, "pc", 2_000, None, None));
        check_heir(run, &mut su, &mut v);
        thread::sleep(Duration::from_millis(2_500));

        eprintln!("  fault 4: {INGEST} sends po sums that overflow when added up");
        overflow_fault(s, run, &mut v);

        run.stop.store(true, Ordering::SeqCst);
        let pc_after = pc_wm(&mut su);
        eprintln!("  pc watermark: {pc_before:?} at the removal, {pc_after:?} after the advances of {HEIR}");
        if pc_after.is_none() || pc_after <= pc_before {
            v.push(format!(
                "{HEIR}'s advances did not move pc: {pc_before:?} -> {pc_after:?}"
            ));
        }
        let mut outs = Vec::new();
        for (i, h) in writers.into_iter().enumerate() {
            if let Some(o) = join(
                h,
                &format!("writer {i} ({})", TENANTS[WRITERS[i]].table),
                &mut errors,
            ) {
                outs.push(o);
            }
        }
        let ticks = join(ticker_h, "ticker", &mut errors).unwrap_or_default();
        let mut advs = BTreeMap::new();
        for (name, h) in [
            ("pa by tn_owner_a", pa_h),
            ("ps by tn_owner_b", ps_h),
            ("pc by tn_heir", heir_h),
        ] {
            if let Some(o) = join(h, &format!("advancer of {name}"), &mut errors) {
                advs.insert(name, o);
            }
        }
        if let Some(o) = pc_c {
            advs.insert("pc by tn_owner_c", o);
        }
        (outs, ticks, idle, locks, removal, advs)
    });
    assert!(
        errors.is_empty(),
        "threads of the run (seed {seed}) failed:\n{}",
        errors.join("\n")
    );

    // The load.
    let mut committed: Vec<Vec<Values>> = vec![Vec::new(); TENANTS.len()];
    for o in &outs {
        committed[o.tenant].extend(o.committed.iter().cloned());
    }
    committed[A].push(idle.idle_row.clone());
    for (ti, t) in TENANTS.iter().enumerate() {
        let os: Vec<&WriterOut> = outs.iter().filter(|o| o.tenant == ti).collect();
        let stmts: usize = os.iter().map(|o| o.stmts.len()).sum();
        let by_ingest: u64 = os.iter().map(|o| o.by_ingest).sum();
        let retries: u64 = os.iter().map(|o| o.retries).sum();
        let errs: usize = os.iter().map(|o| o.errors.len()).sum();
        let max = os
            .iter()
            .flat_map(|o| o.stmts.iter().map(|s| s.dur))
            .max()
            .unwrap_or_default();
        eprintln!(
            "  {}: {} writers, {stmts} statements ({by_ingest} by eventtime.ingest), {} rows committed, {retries} retries, {errs} errors retried, longest statement {}",
            t.table,
            os.len(),
            committed[ti].len(),
            secs(max)
        );
        if max > LATENCY_BOUND {
            v.push(format!(
                "an ingest statement into {} took {}",
                t.table,
                secs(max)
            ));
        }
        if stmts < 50 {
            v.push(format!(
                "only {stmts} statements into {} committed",
                t.table
            ));
        }
    }
    for (name, o) in &advs {
        eprintln!(
            "  advances of {name}: {} ({} windows fired), longest {}",
            o.advances,
            o.fired,
            secs(o.max)
        );
        if o.max > LATENCY_BOUND || o.advances == 0 {
            v.push(format!(
                "advances of {name}: {}, the longest took {}",
                o.advances,
                secs(o.max)
            ));
        }
    }

    // Fault 4: no tick failed on po (busy, while its writers are in a statement, is fine: the
    // next tick fires it; a failure would be the poison pill).
    for t in &ticks {
        if let Some(r) = t
            .row("po")
            .filter(|r| r.skipped.as_deref().is_some_and(|s| !s.starts_with("busy")))
        {
            v.push(format!("tick() skipped po: {:?}", r.skipped));
        }
    }
    // Fault 1.
    check_idle(&idle, &outs, &mut v);
    // Fault 2: the session pipeline's writers (and every other) went on.
    for ti in [S, A, B, C] {
        let (n, max) = during(&outs, ti, locks.0, locks.1);
        eprintln!(
            "  writers of {} while {STRANGER} held the locks ({}): {n} statements, longest {}",
            TENANTS[ti].table,
            secs(locks.1 - locks.0),
            secs(max)
        );
        if n < 10 || max > LATENCY_BOUND {
            v.push(format!(
                "writers of {} while {STRANGER} held its advisory locks: {n} statements committed, the longest took {}",
                TENANTS[ti].table,
                secs(max)
            ));
        }
    }
    // Fault 3: errors only around the removal, and the writers of tc went on after it.
    let tc_errors: Vec<&(Instant, String)> = outs
        .iter()
        .filter(|o| o.tenant == C)
        .flat_map(|o| o.errors.iter())
        .collect();
    for (at, e) in &tc_errors {
        let near = *at + Duration::from_millis(100) >= removal.0
            && *at <= removal.1 + Duration::from_secs(1);
        eprintln!(
            "  tc writer error {} the removal: {e}",
            if near { "around" } else { "FAR FROM" }
        );
        if !near {
            v.push(format!(
                "a writer of tc failed away from the role removal: {e}"
            ));
        }
    }
    let after = removal.1 + Duration::from_secs(2);
    let (n, max) = during(&outs, C, removal.0, after);
    eprintln!(
        "  writers of tc from the removal ({} long) to 2 s after: {n} statements, longest {}, {} errors retried",
        secs(removal.1 - removal.0),
        secs(max),
        tc_errors.len()
    );
    if n < 10 {
        v.push(format!(
            "writers of tc: {n} statements committed in the 2 s after the role removal"
        ));
    }
    // tick(): prompt, never failing, pb moving all along.
    let mut all: Vec<&TickRec> = ticks.iter().chain(idle.ticks.iter()).collect();
    all.sort_by_key(|t| t.at);
    let slowest = all.iter().map(|t| t.dur).max().unwrap_or_default();
    let mut last_pb = all.first().map(|t| t.at);
    let mut pb_gap = Duration::ZERO;
    let (mut pb_moved, mut pa_moved, mut pa_busy) = (0, 0, 0);
    for t in &all {
        if t.dur > TICK_BOUND {
            v.push(format!("tick() took {}: {}", secs(t.dur), t.render()));
        }
        for r in &t.rows {
            if r.skipped.as_deref().is_some_and(|s| !s.starts_with("busy")) {
                v.push(format!("tick() skipped {}: {:?}", r.pipeline, r.skipped));
            }
        }
        pa_moved += usize::from(t.moved("pa"));
        pa_busy += usize::from(t.busy("pa"));
        if t.moved("pb") {
            pb_moved += 1;
            if let Some(l) = last_pb {
                pb_gap = pb_gap.max(t.at - l);
            }
            last_pb = Some(t.at);
        }
    }
    if let (Some(l), Some(t)) = (last_pb, all.last()) {
        pb_gap = pb_gap.max(t.at - l);
    }
    eprintln!(
        "  {} ticks, slowest {}: pb moved in {pb_moved} (longest gap {}), pa moved in {pa_moved} and was busy in {pa_busy}",
        all.len(),
        secs(slowest),
        secs(pb_gap)
    );
    // pa is not asserted to move by tick(): its watermark is held by its owner's source, 2 s
    // behind the clock, and its three writers hold its state much of the time (tick() skips it
    // then); its owner's advances move it.
    if pb_gap > PB_GAP_BOUND {
        v.push(format!(
            "tick() moved pb with gaps up to {} between two moves",
            secs(pb_gap)
        ));
    }
    assert!(v.is_empty(), "tenancy run (seed {seed}):\n{}", v.join("\n"));

    // The end of the input: every pipeline to infinity, by its owner.
    let mut a = run.login(OWNER_A);
    let mut b = run.login(OWNER_B);
    let mut heir = run.login(HEIR);
    finish(&mut a, OWNER_A, "pa", true);
    finish(&mut b, OWNER_B, "pb", true);
    finish(&mut b, OWNER_B, "ps", false);
    finish(&mut heir, HEIR, "pc", false);
    for (ti, t) in TENANTS.iter().enumerate() {
        account(&mut su, t, &committed[ti], &mut v);
    }
    let idle_id: i64 = idle.idle_row[0].as_deref().unwrap().parse().unwrap();
    let idle_n = one_i64(
        &mut su,
        "SELECT coalesce(sum(n), 0)::bigint FROM pa_latest WHERE dev = 'idle'",
    );
    if idle_n != 1
        || one_i64(
            &mut su,
            &format!("SELECT count(*) FROM ta WHERE id = {idle_id}"),
        ) != 1
    {
        v.push(format!(
            "the idle writer's row (id {idle_id}) is counted {idle_n} times in pa_latest"
        ));
    }
    assert!(
        v.is_empty(),
        "tenancy accounting (seed {seed}):\n{}",
        v.join("\n")
    );

    check_stranger(&run);
    // The heir drops the pipeline it inherited; the superuser still reads the others.
    exec(&mut heir, "SELECT eventtime.drop_pipeline('pc')");
    assert!(
        visible_pipelines(&mut heir).is_empty(),
        "{HEIR} still sees pc"
    );
    assert_eq!(
        visible_pipelines(&mut su),
        ["pa", "pb", "po", "ps"],
        "eventtime.pipelines as the superuser"
    );
    assert_eq!(
        one_i64(&mut su, "SELECT count(*) FROM pg_class WHERE relname LIKE 'pc\\_%' AND relnamespace = 'public'::regnamespace"),
        0,
        "the views of pc are gone"
    );
    let log = cluster.log_text();
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("eventtime.tick(): pipeline") || l.contains("PANIC") || l.contains("TRAP")
        })
        .take(5)
        .collect();
    assert!(bad.is_empty(), "server log:\n{}", bad.join("\n"));
    eprintln!(
        "[tenancy] passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// A statement run on its own connection in a thread: its rows as text, or the error's SQLSTATE
/// and description; the connection comes back when the thread is joined.
type Outcome = Result<Vec<Vec<Option<String>>>, (String, String)>;

fn spawn_sql(mut c: Client, sql: String) -> (mpsc::Receiver<Outcome>, thread::JoinHandle<Client>) {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        let r = c
            .simple_query(&sql)
            .map(|ms| {
                ms.iter()
                    .filter_map(|m| match m {
                        SimpleQueryMessage::Row(r) => {
                            Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
                        }
                        _ => None,
                    })
                    .collect()
            })
            .map_err(|e| {
                let code = e.code().map(|c| c.code().to_string()).unwrap_or_default();
                (code, describe(&e))
            });
        let _ = tx.send(r);
        c
    });
    (rx, h)
}

/// Waits up to 10 s until backend `pid` sleeps in `pg_sleep`.
fn wait_for_sleep(obs: &mut Client, pid: i32) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        let r = obs
            .query_one(
                "SELECT wait_event IS NOT DISTINCT FROM 'PgSleep' FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .unwrap();
        if r.get::<_, bool>(0) {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    false
}

fn create_same(table: &str) -> String {
    format!(
        "BEGIN; SELECT eventtime.create_pipeline(name => 'same', source => '{table}', event_time => 'at',
             key => ARRAY['k'], window_size => interval '1 hour', allowed_lateness => interval '1 hour',
             aggregates => 'count(*) AS n')"
    )
}

/// Two races on pipeline names, each between two connections of one owner: (1) two
/// `create_pipeline(name => 'same', ...)` on two tables, the first holding its transaction open
/// for 1 s: the second waits, then fails with 42710 (not 23505), and one working pipeline is
/// left; (2) `eventtime.ingest('gone', ...)` sent while a transaction that dropped `gone` sleeps:
/// it waits, then fails with 42704, and its row is not in the source.
#[test]
fn concurrent_create_and_drop_fail_cleanly() {
    let _ = seed("tenancy_races");
    let started = Instant::now();
    let cluster = Cluster::start("tenancy_races", &[]);
    let mut su = cluster.connect("postgres");
    create_login_role(&mut su, OWNER_A);
    exec(&mut su, &format!("CREATE DATABASE {DB}"));
    let mut obs = cluster.connect(DB);
    exec(
        &mut obs,
        &format!("CREATE EXTENSION pg_eventtime; GRANT CREATE ON SCHEMA public TO {OWNER_A}"),
    );
    let login = || {
        let mut c = cluster.connect_as(DB, OWNER_A);
        assert_logged_in_as(&mut c, OWNER_A);
        c
    };
    let mut owner = login();
    exec(
        &mut owner,
        "CREATE TABLE r1 (k text NOT NULL, at timestamptz NOT NULL);
         CREATE TABLE r2 (k text NOT NULL, at timestamptz NOT NULL);
         CREATE TABLE tg (k text NOT NULL, at timestamptz NOT NULL);
         SELECT eventtime.create_pipeline(name => 'gone', source => 'tg', event_time => 'at',
             key => ARRAY['k'], window_size => interval '1 hour', allowed_lateness => interval '1 hour',
             aggregates => 'count(*) AS n');",
    );

    let mut v: Vec<String> = Vec::new();

    // 1. Two creates of 'same'.
    let mut first = login();
    exec(&mut first, &create_same("r1"));
    let opened = Instant::now();
    let mut second = login();
    let second_pid = backend_pid(&mut second);
    let (rx, h) = spawn_sql(second, create_same("r2"));
    let waits = wait_for_lock(&mut obs, second_pid, Duration::from_secs(10));
    assert!(
        rx.try_recv().is_err(),
        "the second create_pipeline('same') returned while the first was uncommitted"
    );
    let waits = waits.expect("the second create_pipeline('same') did not wait for the first");
    eprintln!("  1: the second create_pipeline waits on {waits}");
    thread::sleep(Duration::from_secs(1).saturating_sub(opened.elapsed()));
    assert!(
        rx.try_recv().is_err(),
        "the second create_pipeline('same') returned while the first was uncommitted"
    );
    exec(&mut first, "COMMIT");
    let r = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the second create_pipeline('same') did not return after the first committed");
    let mut second = h.join().unwrap();
    exec(&mut second, "ROLLBACK");
    match r {
        Err((code, _)) if code == "42710" => {}
        Err((_, e)) => v.push(format!(
            "the second create_pipeline('same'): {e}; expected 42710"
        )),
        Ok(rows) => v.push(format!(
            "the second create_pipeline('same') succeeded: {rows:?}"
        )),
    }
    let sources = text_rows(
        &mut obs,
        "SELECT source::text FROM eventtime.pipelines WHERE name = 'same'",
    )
    .unwrap();
    assert_eq!(
        sources,
        [[Some("r1".to_string())]],
        "pipelines named 'same'"
    );
    assert_eq!(
        one_i64(
            &mut obs,
            "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'r2'::regclass"
        ),
        0,
        "triggers on r2"
    );
    exec(
        &mut owner,
        "INSERT INTO r1 VALUES ('a', '2026-10-29 10:10+00');
         SELECT eventtime.advance_watermark('same', '2026-10-29 12:00+00');",
    );
    assert_eq!(
        one_i64(
            &mut owner,
            "SELECT coalesce(sum(n), 0)::bigint FROM same_latest"
        ),
        1,
        "the row of r1 in same_latest"
    );

    // 2. An ingest into 'gone' while its drop is uncommitted.
    let mut dropper = login();
    let drop_pid = backend_pid(&mut dropper);
    let (drop_rx, drop_h) = spawn_sql(
        dropper,
        "BEGIN; SELECT eventtime.drop_pipeline('gone'); SELECT pg_sleep(1.5); COMMIT".into(),
    );
    assert!(
        wait_for_sleep(&mut obs, drop_pid),
        "the dropping session did not reach pg_sleep"
    );
    let mut ingester = login();
    let ingest_pid = backend_pid(&mut ingester);
    let (rx, h) = spawn_sql(
        ingester,
        r#"SELECT * FROM eventtime.ingest('gone', '{"k":"z","at":"2026-10-29 10:00+00"}')"#.into(),
    );
    let waits = wait_for_lock(&mut obs, ingest_pid, Duration::from_secs(10));
    let r = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("eventtime.ingest('gone') did not return after the drop committed");
    drop_h.join().unwrap();
    match drop_rx.recv().unwrap() {
        Ok(_) => {}
        Err((_, e)) => panic!("drop_pipeline('gone'): {e}"),
    }
    h.join().unwrap();
    let waits = waits.expect("eventtime.ingest('gone') did not wait for the drop");
    eprintln!("  2: the ingest waits on {waits}");
    match r {
        Err((code, _)) if code == "42704" => {}
        Err((_, e)) => v.push(format!(
            "eventtime.ingest('gone') after its drop: {e}; expected 42704"
        )),
        Ok(rows) => v.push(format!(
            "eventtime.ingest('gone') after its drop returned {rows:?}; expected 42704"
        )),
    }
    let left = one_i64(&mut obs, "SELECT count(*) FROM tg");
    if left != 0 {
        v.push(format!(
            "{left} rows in tg after the ingest into the dropped pipeline"
        ));
    }
    assert_eq!(
        one_i64(
            &mut obs,
            "SELECT count(*) FROM eventtime.pipelines WHERE name = 'gone'"
        ),
        0,
        "pipelines named 'gone'"
    );
    assert!(v.is_empty(), "races:\n{}", v.join("\n"));
    eprintln!(
        "[tenancy_races] passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
