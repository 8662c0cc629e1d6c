//! The concurrent workload of the concurrency and crash tests: one pipeline `faults` on the table
//! `events`, ingest threads, one watermark thread, and (crash test) a killer thread.
//!
//! Every ingest statement runs in a transaction of its own (or, with `two_statements`, of two)
//! followed by its `INSERT INTO batches`, so that
//! after a lost connection the client can tell whether it committed, and so that the checks know
//! the watermark each statement's rows had to be classified against. Rows carry a unique
//! `delivery_id` (primary key: a statement can never be applied twice) beside their `event_id`;
//! a redelivery is an exact copy of an earlier event under a new `delivery_id`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use chrono::DateTime;
use postgres::{Client, IsolationLevel};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cluster::{Cluster, SUPERUSER};
use crate::db::{describe, exec, Failure};
pub use crate::roles::OWNER;
use crate::roles::{assert_logged_in_as, create_login_role, table_owner};
use crate::rows::{send_pairs, Method, TableSpec, Values};
use crate::windows::Windows;

pub const PIPELINE: &str = "faults";
pub const DB: &str = "faults";
pub const MINUTE: i64 = 60_000_000;
pub const HOUR: i64 = 60 * MINUTE;
/// 2026-01-01 00:00:00 UTC in microseconds since the Unix epoch.
pub const T0: i64 = 1_767_225_600_000_000;
pub const LATENESS: i64 = 2 * HOUR;
pub const INFINITY: i64 = i64::MAX;

/// The source table every case of the shared workload uses.
pub const EVENTS_TABLE: &str = "
CREATE TABLE events (
    delivery_id bigint PRIMARY KEY,
    batch_id    bigint NOT NULL,
    event_id    bigint NOT NULL,
    store       text NOT NULL,
    region      text NOT NULL,
    amount      numeric NOT NULL,
    ts          timestamptz NOT NULL
);
";

/// The arguments of the pipeline `faults` on `events`.
pub const PIPELINE_ARGS: &str = "
    name             => 'faults',
    source           => 'events',
    event_time       => 'ts',
    key              => ARRAY['store', 'region'],
    event_id         => 'event_id',
    window_size      => interval '1 hour',
    allowed_lateness => interval '2 hours',
    aggregates       => 'count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi'";

/// The source table, the batch log and the pipeline, created by `OWNER` (see `create_db`).
pub fn setup() -> String {
    setup_for(&Windows::TUMBLING)
}

/// `setup`, with the pipeline's windows `w` (the size and lateness of `PIPELINE_ARGS`, and a
/// `window_slide` if `w` hops).
pub fn setup_for(w: &Windows) -> String {
    assert_eq!(
        (w.size, w.lateness),
        (Windows::TUMBLING.size, Windows::TUMBLING.lateness),
        "PIPELINE_ARGS has the size and lateness of Windows::TUMBLING"
    );
    format!(
        "{EVENTS_TABLE}
-- One row per committed ingest statement, written in its transaction after it: the watermark in
-- force then (NULL before the first advance). The statement holds its locks until commit, so no
-- advance can commit in between: this is the watermark its rows must have been classified against.
CREATE TABLE batches (batch_id bigint PRIMARY KEY, wm timestamptz);
SELECT eventtime.create_pipeline({PIPELINE_ARGS}{}
);
",
        w.extra_pipeline_args()
    )
}

/// As the superuser: the login role `OWNER` (no other attribute), the database `DB` with the
/// extension, and CREATE on its schema `public` for `OWNER`. Then, logged in as `OWNER`,
/// `owner_sql` (`setup()` or the like): the source table, `batches` and the pipeline belong to
/// it, and the workload's clients log in as it.
pub fn create_db(cluster: &Cluster, owner_sql: &str) {
    let mut su = cluster.connect("postgres");
    create_login_role(&mut su, OWNER);
    exec(&mut su, &format!("CREATE DATABASE {DB}"));
    exec(
        &mut cluster.connect(DB),
        &format!("CREATE EXTENSION pg_eventtime; GRANT CREATE ON SCHEMA public TO {OWNER}"),
    );
    let mut owner = cluster.connect_as(DB, OWNER);
    assert_logged_in_as(&mut owner, OWNER);
    exec(&mut owner, owner_sql);
    assert_eq!(
        table_owner(&mut owner, "events"),
        OWNER,
        "the source table belongs to the role that created it"
    );
}

pub fn table() -> TableSpec {
    TableSpec {
        sql_name: "public.events".into(),
        columns: [
            "delivery_id",
            "batch_id",
            "event_id",
            "store",
            "region",
            "amount",
            "ts",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        pipeline: PIPELINE.into(),
    }
}

/// A timestamptz literal in UTC with microseconds; `INFINITY` is `infinity`.
pub fn ts_text(us: i64) -> String {
    if us == INFINITY {
        return "infinity".into();
    }
    if us == i64::MIN {
        return "(none)".into();
    }
    DateTime::from_timestamp_micros(us)
        .expect("timestamp in range")
        .format("%Y-%m-%d %H:%M:%S%.6f+00")
        .to_string()
}

/// SQL that turns a timestamptz expression into microseconds, `infinity` into i64::MAX.
pub fn micros_sql(expr: &str) -> String {
    format!(
        "CASE WHEN {expr} IS NULL THEN NULL WHEN isfinite({expr}) THEN (extract(epoch FROM {expr}) * 1000000)::bigint ELSE 9223372036854775807 END"
    )
}

#[derive(Debug, Clone)]
pub struct Event {
    pub event_id: i64,
    pub store: u8,
    pub region: u8,
    pub cents: i64,
    pub ts: i64,
}

impl Event {
    fn values(&self, delivery_id: i64, batch_id: i64) -> Values {
        vec![
            Some(delivery_id.to_string()),
            Some(batch_id.to_string()),
            Some(self.event_id.to_string()),
            Some(format!("s{}", self.store)),
            Some(format!("r{}", self.region)),
            Some(format!("{}.{:02}", self.cents / 100, self.cents % 100)),
            Some(ts_text(self.ts)),
        ]
    }
}

/// State shared by the threads of one run.
pub struct Shared {
    /// The last watermark the advancing thread knows committed (microseconds), for generating
    /// event times around it.
    pub watermark: AtomicI64,
    pub next_event: AtomicI64,
    pub next_delivery: AtomicI64,
    pub next_batch: AtomicI64,
    /// Events sent so far, by any thread: redeliveries are drawn from here.
    pub pool: Mutex<Vec<Event>>,
    /// Set when any thread fails: the others stop.
    pub abort: AtomicBool,
    pub kills: AtomicUsize,
    pub workers_left: AtomicUsize,
    /// True while the advancing thread waits for `advance_watermark` (the killer aims at it).
    pub in_advance: AtomicBool,
    /// Violations found by any thread.
    pub violations: Mutex<Vec<String>>,
    /// The windows of the pipeline: where boundary rows go, how many (row, window) pairs
    /// `eventtime.ingest` counts, and what the mid-run checks expect.
    pub windows: Windows,
}

impl Shared {
    /// For the tumbling pipeline of `setup()`.
    pub fn new(workers: usize) -> Shared {
        Shared::with_windows(workers, Windows::TUMBLING)
    }

    /// For the pipeline of `setup_for(&windows)`.
    pub fn with_windows(workers: usize, windows: Windows) -> Shared {
        Shared {
            watermark: AtomicI64::new(T0),
            next_event: AtomicI64::new(1),
            next_delivery: AtomicI64::new(1),
            next_batch: AtomicI64::new(1),
            pool: Mutex::new(Vec::new()),
            abort: AtomicBool::new(false),
            kills: AtomicUsize::new(0),
            workers_left: AtomicUsize::new(workers),
            in_advance: AtomicBool::new(false),
            violations: Mutex::new(Vec::new()),
            windows,
        }
    }

    pub fn violation(&self, v: String) {
        eprintln!("VIOLATION: {v}");
        self.violations.lock().unwrap().push(v);
        self.abort.store(true, Ordering::SeqCst);
    }

    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::SeqCst)
    }

    /// Asserts that the run had no violation and no thread error, other than threads that only
    /// stopped because another one failed.
    pub fn assert_clean(&self, what: &str, seed: u64, errors: Vec<String>) {
        let violations = self.violations.lock().unwrap().clone();
        let errors: Vec<String> = errors
            .into_iter()
            .filter(|e| !e.ends_with(": aborted") && !violations.contains(e))
            .collect();
        assert!(
            violations.is_empty() && errors.is_empty(),
            "{what} run failed (seed {seed}):\n{}\n{}",
            violations.join("\n"),
            errors.join("\n")
        );
    }
}

/// Joins one thread of a run: its result, or its error or panic recorded in `errors`.
pub fn join<T>(
    h: thread::ScopedJoinHandle<'_, Result<T, String>>,
    name: &str,
    errors: &mut Vec<String>,
) -> Option<T> {
    match h.join() {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            errors.push(format!("{name}: {e}"));
            None
        }
        Err(_) => {
            errors.push(format!("{name} panicked"));
            None
        }
    }
}

/// Joins the ingest threads of a run and adds up their statistics.
pub fn join_workers(
    workers: Vec<thread::ScopedJoinHandle<'_, Result<Stats, String>>>,
    errors: &mut Vec<String>,
) -> Stats {
    let mut stats = Stats::default();
    for (i, h) in workers.into_iter().enumerate() {
        if let Some(st) = join(h, &format!("ingest thread {i}"), errors) {
            stats.merge(&st);
        }
    }
    stats
}

#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub statements: BTreeMap<&'static str, u64>,
    pub rows: u64,
    /// (row, window) pairs of those rows.
    pub pairs: u64,
    pub batches: u64,
    pub retries: BTreeMap<String, u64>,
    pub connection_losses: u64,
    /// After a lost connection: the statement had committed after all.
    pub resolved_committed: u64,
    /// After a lost connection: it had not, and was sent again.
    pub resent: u64,
    pub redeliveries: u64,
    pub in_statement_duplicates: u64,
    pub two_statement_transactions: u64,
    /// Sums of what `eventtime.ingest` returned.
    pub ingest_counts: [i64; 4],
}

impl Stats {
    pub fn merge(&mut self, o: &Stats) {
        for (k, v) in &o.statements {
            *self.statements.entry(k).or_default() += v;
        }
        for (k, v) in &o.retries {
            *self.retries.entry(k.clone()).or_default() += v;
        }
        self.rows += o.rows;
        self.pairs += o.pairs;
        self.batches += o.batches;
        self.connection_losses += o.connection_losses;
        self.resolved_committed += o.resolved_committed;
        self.resent += o.resent;
        self.redeliveries += o.redeliveries;
        self.in_statement_duplicates += o.in_statement_duplicates;
        self.two_statement_transactions += o.two_statement_transactions;
        for i in 0..4 {
            self.ingest_counts[i] += o.ingest_counts[i];
        }
    }
}

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Rows (deliveries) this thread sends at least.
    pub quota_rows: u64,
    /// Lost connections are expected (crash test): reconnect and resolve.
    pub crash_mode: bool,
    /// Keep sending until at least this many kills happened.
    pub min_kills: usize,
    /// Pause between statements: uniform in 0..pause_ms.
    pub pause_ms: u64,
    /// Share of transactions that carry two ingest statements (each with its `batches` row,
    /// right after it) instead of one. Only for pipelines whose ingest transactions cannot
    /// deadlock with each other (a `watermark_lag` runs them one at a time); 0 elsewhere.
    pub two_statements: f64,
}

pub struct Batch {
    pub id: i64,
    pub method: Method,
    pub rows: Vec<Values>,
    /// (row, window) pairs of the rows: what the counts of `eventtime.ingest` add up to.
    pub pairs: i64,
}

/// Connects as `user` with the settings every client of these tests uses; in crash mode waits
/// for the server to come back. The ingest, advancing and source clients log in as `OWNER`; the
/// killer and the monitor, which read every internal table, as the superuser.
pub fn connect(
    cluster: &Cluster,
    user: &str,
    shared: &Shared,
    crash_mode: bool,
) -> Result<Client, String> {
    let t = Instant::now();
    loop {
        match cluster.try_connect_as(DB, user) {
            Ok(mut c) => {
                // Turns a hang into a failure: no lock wait of this workload is legitimately long.
                match c.batch_execute("SET lock_timeout = '120s'; SET statement_timeout = '300s'") {
                    Ok(()) => return Ok(c),
                    Err(e) if crash_mode => {
                        let _ = e;
                    }
                    Err(e) => return Err(describe(&e)),
                }
            }
            Err(e) => {
                if !crash_mode {
                    return Err(format!("connect: {}", describe(&e)));
                }
                if t.elapsed() > Duration::from_secs(240) {
                    return Err(format!("server not back after 240 s: {}", describe(&e)));
                }
            }
        }
        if shared.aborted() {
            return Err("aborted".into());
        }
        thread::sleep(Duration::from_millis(150));
    }
}

fn gen_event(rng: &mut ChaCha8Rng, shared: &Shared) -> Event {
    let w = shared
        .watermark
        .load(Ordering::SeqCst)
        .min(T0 + 10_000 * HOUR);
    let u: f64 = rng.random();
    let ts = if u < 0.60 {
        w + rng.random_range(0..2 * HOUR)
    } else if u < 0.82 {
        w - rng.random_range(0..150 * MINUTE)
    } else if u < 0.92 {
        w - rng.random_range(3 * HOUR..12 * HOUR)
    } else {
        // On a window boundary, or the last microsecond before one (with hopping windows, on a
        // multiple of the slide: a boundary when the slide divides the size).
        let slide = shared.windows.slide;
        let k = (w + rng.random_range(-3 * HOUR..2 * HOUR)).div_euclid(slide) * slide;
        if rng.random_bool(0.5) {
            k
        } else {
            k - 1
        }
    };
    Event {
        event_id: shared.next_event.fetch_add(1, Ordering::SeqCst),
        store: rng.random_range(0..8),
        region: rng.random_range(0..3),
        cents: rng.random_range(1..=100_000),
        ts,
    }
}

/// Share of rows that are redeliveries (`FAULTS_REDELIVER`, default 0.08; 0 only to narrow down a
/// failure while debugging).
pub fn redelivery_rate() -> f64 {
    static RATE: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *RATE.get_or_init(|| {
        std::env::var("FAULTS_REDELIVER")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.08)
    })
}

pub fn gen_batch(rng: &mut ChaCha8Rng, shared: &Shared, stats: &mut Stats) -> Batch {
    let id = shared.next_batch.fetch_add(1, Ordering::SeqCst);
    let u: f64 = rng.random();
    let size = if u < 0.5 {
        rng.random_range(1..=20)
    } else if u < 0.8 {
        rng.random_range(21..=200)
    } else {
        rng.random_range(201..=1000)
    };
    let u: f64 = rng.random();
    let method = if u < 0.40 {
        Method::Insert
    } else if u < 0.75 {
        Method::Copy
    } else {
        Method::Ingest
    };
    let mut events: Vec<Event> = Vec::with_capacity(size + 8);
    let mut fresh = Vec::new();
    for _ in 0..size {
        let redeliver = rng.random_bool(redelivery_rate());
        let e = if redeliver {
            // Mostly a recent event (its first delivery may still be in flight in another
            // thread), sometimes any earlier one (its window may be purged by now).
            let pool = shared.pool.lock().unwrap();
            if pool.is_empty() {
                None
            } else if rng.random_bool(0.7) {
                let from = pool.len().saturating_sub(2000);
                Some(pool[rng.random_range(from..pool.len())].clone())
            } else {
                pool.choose(rng).cloned()
            }
        } else {
            None
        };
        match e {
            Some(e) => {
                stats.redeliveries += 1;
                events.push(e);
            }
            None => {
                let e = gen_event(rng, shared);
                fresh.push(e.clone());
                events.push(e);
            }
        }
    }
    // Duplicates inside the statement.
    let n = events.len();
    for _ in 0..n {
        if rng.random_bool(0.03) {
            let e = events[rng.random_range(0..n)].clone();
            let at = rng.random_range(0..=events.len());
            events.insert(at, e);
            stats.in_statement_duplicates += 1;
        }
    }
    // Published before sending: another thread may redeliver an event whose first delivery has
    // not committed yet (the ledger then waits for it).
    {
        let mut pool = shared.pool.lock().unwrap();
        pool.extend(fresh);
        if pool.len() > 60_000 {
            pool.drain(0..30_000);
        }
    }
    let rows = events
        .iter()
        .map(|e| e.values(shared.next_delivery.fetch_add(1, Ordering::SeqCst), id))
        .collect();
    let pairs = events.iter().map(|e| shared.windows.count_of(e.ts)).sum();
    Batch {
        id,
        method,
        rows,
        pairs,
    }
}

/// Sends the batches in one transaction, each statement followed by its `batches` row.
fn try_send(
    client: &mut Client,
    t: &TableSpec,
    bs: &[Batch],
) -> Result<Vec<Option<[i64; 4]>>, crate::rows::SendError> {
    let mut tx = client.transaction()?;
    let mut out = Vec::with_capacity(bs.len());
    for b in bs {
        out.push(send_pairs(&mut tx, t, b.method, &b.rows, b.pairs)?);
        tx.execute(
            "INSERT INTO batches (batch_id, wm) SELECT $1, watermark FROM _eventtime.pipeline WHERE name = $2",
            &[&b.id, &PIPELINE],
        )?;
    }
    tx.commit()?;
    Ok(out)
}

/// Runs a thread body so that its failure, error or panic, stops the other threads at once
/// (they would otherwise wait for a server that nobody restarts).
pub(crate) fn guarded<T>(
    shared: &Shared,
    who: &str,
    f: impl FnOnce() -> Result<T, String>,
) -> Result<T, String> {
    let r = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {msg}"))
        }
    };
    if let Err(e) = &r {
        if !shared.aborted() {
            shared.violation(format!("{who}: {e}"));
        }
    }
    r
}

/// One ingest thread.
pub fn run_worker(
    cluster: &Cluster,
    shared: &Shared,
    idx: usize,
    seed: u64,
    cfg: &WorkerConfig,
) -> Result<Stats, String> {
    let r = guarded(shared, &format!("ingest thread {idx}"), || {
        worker_loop(cluster, shared, idx, seed, cfg)
    });
    shared.workers_left.fetch_sub(1, Ordering::SeqCst);
    r
}

fn worker_loop(
    cluster: &Cluster,
    shared: &Shared,
    idx: usize,
    seed: u64,
    cfg: &WorkerConfig,
) -> Result<Stats, String> {
    let mut rng =
        ChaCha8Rng::seed_from_u64(seed ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(idx as u64 + 1)));
    let t = table();
    let mut stats = Stats::default();
    let mut client = Some(connect(cluster, OWNER, shared, cfg.crash_mode)?);
    loop {
        if shared.aborted() {
            return Err("aborted".into());
        }
        if stats.rows >= cfg.quota_rows && shared.kills.load(Ordering::SeqCst) >= cfg.min_kills {
            break;
        }
        let mut bs = vec![gen_batch(&mut rng, shared, &mut stats)];
        if cfg.two_statements > 0.0 && rng.random_bool(cfg.two_statements) {
            bs.push(gen_batch(&mut rng, shared, &mut stats));
            stats.two_statement_transactions += 1;
        }
        let b = &bs[0];
        let mut attempts = 0;
        loop {
            attempts += 1;
            if attempts > 200 {
                return Err(format!("batch {} not applied after 200 attempts", b.id));
            }
            if client.is_none() {
                let mut c = connect(cluster, OWNER, shared, cfg.crash_mode)?;
                // The connection was lost with this statement in flight: did it commit?
                match c.query_one(
                    "SELECT EXISTS (SELECT 1 FROM batches WHERE batch_id = $1)",
                    &[&b.id],
                ) {
                    Ok(r) => {
                        client = Some(c);
                        if r.get::<_, bool>(0) {
                            stats.resolved_committed += 1;
                            break;
                        }
                        stats.resent += 1;
                    }
                    Err(e) => match crate::db::classify(&e) {
                        Failure::ConnectionLost(_) => continue,
                        f => return Err(format!("batch lookup: {f:?}")),
                    },
                }
            }
            match try_send(client.as_mut().unwrap(), &t, &bs) {
                Ok(cs) => {
                    for c in cs.into_iter().flatten() {
                        for (total, n) in stats.ingest_counts.iter_mut().zip(c) {
                            *total += n;
                        }
                    }
                    break;
                }
                Err(e) => match e.failure() {
                    Failure::Retry(code) => {
                        *stats.retries.entry(code).or_default() += 1;
                        // A rollback is sent when the transaction is dropped; with a broken
                        // connection the next statement says so.
                        thread::sleep(Duration::from_millis(rng.random_range(0..20)));
                    }
                    Failure::ConnectionLost(m) if cfg.crash_mode => {
                        let _ = m;
                        stats.connection_losses += 1;
                        client = None;
                        thread::sleep(Duration::from_millis(100));
                    }
                    f => {
                        return Err(format!(
                            "{} failed: {:?}",
                            bs.iter()
                                .map(|b| format!(
                                    "batch {} ({} rows by {})",
                                    b.id,
                                    b.rows.len(),
                                    b.method.name()
                                ))
                                .collect::<Vec<_>>()
                                .join(" then "),
                            f
                        ))
                    }
                },
            }
        }
        for b in &bs {
            *stats.statements.entry(b.method.name()).or_default() += 1;
            stats.rows += b.rows.len() as u64;
            stats.pairs += b.pairs as u64;
            stats.batches += 1;
        }
        if cfg.pause_ms > 0 {
            thread::sleep(Duration::from_millis(rng.random_range(0..cfg.pause_ms)));
        }
    }
    Ok(stats)
}

/// What the advancing thread saw of a version-1 row the first time it read it.
#[derive(Debug, Clone)]
pub struct SealedSeen {
    pub text: String,
    pub kind: String,
    /// The pipeline watermark of the read that first saw it, and of the read before.
    pub read_wm: i64,
    pub prev_read_wm: i64,
}

pub type WindowKey = (String, String, String);

#[derive(Debug, Default)]
pub struct AdvancerOut {
    pub advances: u64,
    /// Sum of `windows_fired` over advances whose result the client received.
    pub fired_known: i64,
    /// Whether every advance's result was received (no lost connection during one).
    pub fired_complete: bool,
    pub sealed: HashMap<WindowKey, SealedSeen>,
    pub retries: BTreeMap<String, u64>,
    pub connection_losses: u64,
    pub checks: u64,
    pub final_watermark: i64,
}

#[derive(Debug, Clone)]
pub struct AdvancerConfig {
    pub crash_mode: bool,
    pub pause_ms: (u64, u64),
    pub step_minutes: (i64, i64),
    /// Run the mid-run consistency check every this many advances.
    pub check_every: u64,
}

/// Reads the pipeline watermark in microseconds (None before the first advance).
pub fn read_watermark(c: &mut Client) -> Result<Option<i64>, postgres::Error> {
    let r = c.query_one(
        &format!(
            "SELECT {} FROM _eventtime.pipeline WHERE name = $1",
            micros_sql("watermark")
        ),
        &[&PIPELINE],
    )?;
    Ok(r.get(0))
}

/// Reads `faults_sealed` (and the watermark, in the same snapshot) and compares it with what was
/// seen before: a sealed row never changes and never goes away.
pub fn snapshot_sealed(
    c: &mut Client,
    out: &mut AdvancerOut,
    last_read_wm: &mut i64,
    shared: &Shared,
) -> Result<(), postgres::Error> {
    let mut tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    let rows = tx.query(
        &format!(
            "SELECT store, region, window_start::text, t::text, kind, {} FROM faults_sealed t",
            micros_sql("t.watermark")
        ),
        &[],
    )?;
    let wm: Option<i64> = tx
        .query_one(
            &format!(
                "SELECT {} FROM _eventtime.pipeline WHERE name = $1",
                micros_sql("watermark")
            ),
            &[&PIPELINE],
        )?
        .get(0);
    tx.commit()?;
    let wm = wm.unwrap_or(i64::MIN);
    let now: std::collections::HashSet<WindowKey> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let missing: Vec<_> = out
        .sealed
        .keys()
        .filter(|k| !now.contains(*k))
        .take(5)
        .cloned()
        .collect();
    if !missing.is_empty() {
        shared.violation(format!(
            "sealed version 1 rows disappeared (a committed firing was lost): {missing:?}"
        ));
    }
    for r in &rows {
        let key: WindowKey = (r.get(0), r.get(1), r.get(2));
        let text: String = r.get(3);
        let kind: String = r.get(4);
        let row_wm: i64 = r.get(5);
        match out.sealed.get(&key) {
            Some(seen) => {
                if seen.text != text {
                    shared.violation(format!(
                        "sealed version 1 of window {key:?} changed:\n  first seen: {}\n  now:        {text}",
                        seen.text
                    ));
                }
            }
            None => {
                if kind == "main" && !(*last_read_wm < row_wm && row_wm <= wm) {
                    shared.violation(format!(
                        "main firing {text} has watermark {} but first appeared between reads at watermarks {} and {}",
                        ts_text(row_wm),
                        ts_text(*last_read_wm),
                        ts_text(wm)
                    ));
                }
                if row_wm > wm {
                    shared.violation(format!(
                        "version 1 {text} has a watermark beyond the pipeline's {}",
                        ts_text(wm)
                    ));
                }
                out.sealed.insert(
                    key,
                    SealedSeen {
                        text,
                        kind,
                        read_wm: wm,
                        prev_read_wm: *last_read_wm,
                    },
                );
            }
        }
    }
    *last_read_wm = wm;
    Ok(())
}

/// The watermark thread: random forward steps, a few per second, until every ingest thread is
/// done; then `infinity`. After each advance it reads the sealed rows (see `snapshot_sealed`).
pub fn run_advancer(
    cluster: &Cluster,
    shared: &Shared,
    seed: u64,
    cfg: &AdvancerConfig,
) -> Result<AdvancerOut, String> {
    guarded(shared, "advancing thread", || {
        advancer_loop(cluster, shared, seed, cfg)
    })
}

fn advancer_loop(
    cluster: &Cluster,
    shared: &Shared,
    seed: u64,
    cfg: &AdvancerConfig,
) -> Result<AdvancerOut, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xA11CE);
    let mut out = AdvancerOut {
        fired_complete: true,
        ..Default::default()
    };
    let mut client = Some(connect(cluster, OWNER, shared, cfg.crash_mode)?);
    let mut w = T0;
    let mut last_read_wm = i64::MIN;
    let mut finishing = false;
    loop {
        if shared.aborted() {
            return Err("aborted".into());
        }
        if !finishing && out.advances > 0 {
            thread::sleep(Duration::from_millis(
                rng.random_range(cfg.pause_ms.0..=cfg.pause_ms.1),
            ));
            if shared.workers_left.load(Ordering::SeqCst) == 0 {
                finishing = true;
                w = INFINITY;
            } else {
                w += rng.random_range(cfg.step_minutes.0..=cfg.step_minutes.1) * MINUTE
                    + rng.random_range(0..60) * 1_000_000;
            }
        }
        // Advance to w, retrying on 40P01/40001, and (crash mode) reconnecting and checking
        // whether a lost advance had committed.
        let mut attempts = 0;
        loop {
            attempts += 1;
            if attempts > 100 {
                return Err(format!(
                    "advance to {} not done after 100 attempts",
                    ts_text(w)
                ));
            }
            if client.is_none() {
                let mut c = connect(cluster, OWNER, shared, cfg.crash_mode)?;
                match read_watermark(&mut c) {
                    Ok(cur) => {
                        client = Some(c);
                        if cur.is_some_and(|cur| cur >= w) {
                            break;
                        }
                    }
                    Err(e) => match crate::db::classify(&e) {
                        Failure::ConnectionLost(_) => continue,
                        f => return Err(format!("watermark read: {f:?}")),
                    },
                }
            }
            shared.in_advance.store(true, Ordering::SeqCst);
            let r = client.as_mut().unwrap().query_one(
                "SELECT windows_fired, windows_purged, watermark::text FROM eventtime.advance_watermark($1, $2::text::timestamptz)",
                &[&PIPELINE, &ts_text(w)],
            );
            shared.in_advance.store(false, Ordering::SeqCst);
            match r {
                Ok(r) => {
                    out.fired_known += r.get::<_, i64>(0);
                    break;
                }
                Err(e) => match crate::db::classify(&e) {
                    Failure::Retry(code) => {
                        *out.retries.entry(code).or_default() += 1;
                    }
                    Failure::ConnectionLost(_) if cfg.crash_mode => {
                        out.connection_losses += 1;
                        out.fired_complete = false;
                        client = None;
                        thread::sleep(Duration::from_millis(100));
                    }
                    f => return Err(format!("advance_watermark to {}: {f:?}", ts_text(w))),
                },
            }
        }
        out.advances += 1;
        if w != INFINITY {
            shared.watermark.store(w, Ordering::SeqCst);
        }
        // Right after the commit: what is sealed now.
        loop {
            if client.is_none() {
                client = Some(connect(cluster, OWNER, shared, cfg.crash_mode)?);
            }
            match snapshot_sealed(
                client.as_mut().unwrap(),
                &mut out,
                &mut last_read_wm,
                shared,
            ) {
                Ok(()) => break,
                Err(e) => match crate::db::classify(&e) {
                    Failure::ConnectionLost(_) if cfg.crash_mode => {
                        out.connection_losses += 1;
                        client = None;
                    }
                    Failure::Retry(_) => {}
                    f => return Err(format!("sealed snapshot: {f:?}")),
                },
            }
        }
        if cfg.check_every > 0 && out.advances.is_multiple_of(cfg.check_every) && !finishing {
            loop {
                if client.is_none() {
                    client = Some(connect(cluster, OWNER, shared, cfg.crash_mode)?);
                }
                match crate::checks::consistency(client.as_mut().unwrap(), &shared.windows) {
                    Ok(v) => {
                        out.checks += 1;
                        for x in v {
                            shared.violation(format!(
                                "mid-run check after advance to {}: {x}",
                                ts_text(w)
                            ));
                        }
                        break;
                    }
                    Err(e) => match crate::db::classify(&e) {
                        Failure::ConnectionLost(_) if cfg.crash_mode => client = None,
                        f => return Err(format!("consistency check: {f:?}")),
                    },
                }
            }
        }
        if finishing {
            out.final_watermark = w;
            return Ok(out);
        }
    }
}

#[derive(Debug, Default)]
pub struct KillerOut {
    pub kills: usize,
    pub postmaster_only: usize,
    pub aimed_at_advance: usize,
    pub checks: u64,
    pub recovery_secs: Vec<f64>,
}

/// Kills the postmaster with SIGKILL at random moments, restarts the server (crash recovery) and
/// checks that no advance is half-applied, until the ingest threads are done and at least
/// `min_kills` kills happened. Half of the kills are aimed at an advance in flight. Half of them
/// kill the postmaster alone (its orphaned backends notice and exit before the restart), the
/// other half the postmaster and then every backend at once.
pub fn run_killer(
    cluster: &Cluster,
    shared: &Shared,
    seed: u64,
    min_kills: usize,
    gap_ms: (u64, u64),
) -> Result<KillerOut, String> {
    run_killer_checked(cluster, shared, seed, min_kills, gap_ms, None)
}

/// A check of committed data that returns its violations as text, like `checks::consistency`.
pub type Check = dyn Fn(&mut Client) -> Result<Vec<String>, postgres::Error> + Sync;

/// `run_killer`, with `extra` run after `checks::consistency` after every recovery.
pub fn run_killer_checked(
    cluster: &Cluster,
    shared: &Shared,
    seed: u64,
    min_kills: usize,
    gap_ms: (u64, u64),
    extra: Option<&Check>,
) -> Result<KillerOut, String> {
    guarded(shared, "killer thread", || {
        killer_loop(cluster, shared, seed, min_kills, gap_ms, extra)
    })
}

fn killer_loop(
    cluster: &Cluster,
    shared: &Shared,
    seed: u64,
    min_kills: usize,
    gap_ms: (u64, u64),
    extra: Option<&Check>,
) -> Result<KillerOut, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xDEAD);
    let mut out = KillerOut::default();
    loop {
        let kills = shared.kills.load(Ordering::SeqCst);
        if shared.aborted() {
            return Err("aborted".into());
        }
        if kills >= min_kills && shared.workers_left.load(Ordering::SeqCst) == 0 {
            return Ok(out);
        }
        // Sleep, in small steps so that an abort is seen.
        let until = Instant::now() + Duration::from_millis(rng.random_range(gap_ms.0..=gap_ms.1));
        while Instant::now() < until {
            if shared.aborted() {
                return Err("aborted".into());
            }
            thread::sleep(Duration::from_millis(50));
        }
        if rng.random_bool(0.5) {
            let t = Instant::now();
            while !shared.in_advance.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(3)
            {
                thread::sleep(Duration::from_micros(200));
            }
            if shared.in_advance.load(Ordering::SeqCst) {
                out.aimed_at_advance += 1;
                thread::sleep(Duration::from_micros(rng.random_range(0..20_000)));
            }
        }
        let all = rng.random_bool(0.5);
        let pm = cluster.kill9(all)?;
        if !all {
            out.postmaster_only += 1;
        }
        let n = shared.kills.fetch_add(1, Ordering::SeqCst) + 1;
        let secs = cluster.restart_after_kill(Duration::from_millis(rng.random_range(0..1500)));
        out.recovery_secs.push(secs);
        eprintln!(
            "  kill {n}: postmaster {pm} killed{}; back after {secs:.1} s",
            if all { " with every backend" } else { " alone" },
        );
        out.kills = n;
        // Right after recovery: no advance half-applied, nothing lost.
        let mut c = connect(cluster, SUPERUSER, shared, true)?;
        let check = |c: &mut Client| -> Result<Vec<String>, postgres::Error> {
            let mut v = crate::checks::consistency(c, &shared.windows)?;
            if let Some(extra) = extra {
                v.extend(extra(c)?);
            }
            Ok(v)
        };
        loop {
            match check(&mut c) {
                Ok(v) => {
                    out.checks += 1;
                    for x in v {
                        shared.violation(format!("check after crash {n}: {x}"));
                    }
                    break;
                }
                Err(e) => match crate::db::classify(&e) {
                    Failure::ConnectionLost(_) => c = connect(cluster, SUPERUSER, shared, true)?,
                    f => return Err(format!("check after crash {n}: {f:?}")),
                },
            }
        }
    }
}
