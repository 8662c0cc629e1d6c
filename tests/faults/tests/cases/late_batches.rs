//! SPEC §3, batched late firings (`late_firing`) under concurrency and crashes.
//!
//! Pipeline `lf` on `events` (key `k`, `event_id` `id`, 1 hour windows, 30 days lateness,
//! `count(*) AS n, sum(v) AS s`, `late_firing => 200 milliseconds`). Keys `k0` to `k3` have
//! on-time rows in each of 20 windows, fired by one advance (version 1, `main`); key `k4` has
//! none, so its first version of a window is a late one. Then:
//!
//! 1. For `FAULTS_LATE_BATCH_SECS`, 8 writers run transactions of 1 to 4 statements (single-row
//!    and multi-row `INSERT`, `INSERT` with a refused row, `COPY`, `eventtime.ingest`), each of
//!    late rows into random (key, window) pairs of the 20 windows in random order, pausing 0 to
//!    `FAULTS_LATE_BATCH_PAUSE_MS` (10) between statements, so that transactions open at the same
//!    time touch the same pairs in opposite orders (what makes per-statement late versions
//!    deadlock; the run must have such pairs); 12% roll back. Each writer runs with
//!    `lock_timeout = 2s`: a deadlock (40P01) or a lock timeout (55P03) is counted, and there must
//!    be none. A monitor (superuser) samples `pg_stat_activity` every few ms: no writer ever waits
//!    for a lock another writer holds (PostgreSQL's relation extension lock aside, counted, as
//!    are waits behind the ticker's bounded try for the state's lock). A ticker calls `eventtime.tick()` every 60 to 140 ms, and
//!    now and then advances the watermark by a minute; each call logs its transaction, `now()`
//!    and whether the tick was skipped as busy to `tick_log`, in the same transaction. After the
//!    writers stop: a pause longer than `late_firing`, one more tick, and no pending row is left.
//! 2. A crash between a late row's commit and its batch: rows committed (and one transaction left
//!    open), no tick, the pending rows there; `kill -9` of the postmaster and every backend; after
//!    recovery the committed pending rows are still there, no version has been written, and the
//!    first tick writes exactly one version of each window they touched.
//! 3. The same with the postmaster killed alone, then at once an advance past every deadline: it
//!    writes the pending batches before it purges, and no state is left.
//!
//! After each part, as `postgres`, from committed data (with `track_commit_timestamp = on`): the
//! source holds exactly the rows of the transactions the clients committed (none of a rolled-back
//! or unfinished one); each (key, window) has versions 1 to its latest exactly once, the first
//! `main` or (`k4`) `late`, all others `late`; version `v` of a window holds exactly its rows
//! committed before `v` committed (so every committed row is in exactly one batch, and each batch
//! holds at least one new row: `n` grows at every version); every version was written by a logged
//! `tick()` or advance, none by an ingest; a batch not forced by a deadline came at least
//! `late_firing` after the oldest row in it was written, and no tick that was not busy, started
//! `late_firing` plus a margin after a row's commit, came before the version holding it; the
//! arrivals the batches recorded add up to each window's late rows.
//!
//! The source table, the log and the pipeline belong to `et_owner`, whose sessions write, tick
//! and advance; the monitor and the checks connect as `postgres`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use postgres::{Client, IsolationLevel};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use pg_eventtime_faults::cluster::Cluster;
use pg_eventtime_faults::db::{describe, exec, one_i64};
use pg_eventtime_faults::rows::{insert_sql, send, Method, SendError, TableSpec, Values};
use pg_eventtime_faults::workload::{create_db, micros_sql, ts_text, DB, HOUR, OWNER, T0};
use pg_eventtime_faults::{env_num, seed};

const PIPE: &str = "lf";
/// Keys `k0`..`k4`; the last has no on-time rows.
const KEYS: usize = 5;
const ONTIME_KEYS: usize = 4;
const WINDOWS: i64 = 20;
const ONTIME_PER_PAIR: i64 = 3;
const WRITERS: usize = 8;
const DAY: i64 = 24 * HOUR;
const LATENESS: i64 = 30 * DAY;
const LATE_FIRING_US: i64 = 200_000;
/// What a commit may take to become visible after its commit timestamp, and the clocks of two
/// backends may differ by: a tick is held to a batch only that much after it was due.
const MARGIN_US: i64 = 50_000;
/// The watermark after the on-time rows: past the end of every window.
const WM0: i64 = T0 + (WINDOWS + 1) * HOUR;
/// Past the deadline of every window.
const WM_END: i64 = T0 + (WINDOWS + 1) * HOUR + LATENESS + DAY;

const SETUP: &str = "
CREATE TABLE events (
    id         bigint NOT NULL,
    k          text NOT NULL,
    t          timestamptz NOT NULL,
    v          bigint NOT NULL,
    written_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- One row per tick() or advance, in its transaction: xid, now(), skipped as busy.
CREATE TABLE tick_log (xid xid8 NOT NULL, at timestamptz NOT NULL, busy boolean NOT NULL, what text NOT NULL);
SELECT eventtime.create_pipeline(
    name             => 'lf',
    source           => 'events',
    event_time       => 't',
    key              => ARRAY['k'],
    event_id         => 'id',
    window_size      => interval '1 hour',
    allowed_lateness => interval '30 days',
    aggregates       => 'count(*) AS n, sum(v) AS s',
    late_firing      => interval '200 milliseconds');
";

fn table() -> TableSpec {
    TableSpec {
        sql_name: "public.events".into(),
        columns: ["id", "k", "t", "v"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        pipeline: PIPE.into(),
    }
}

/// (key index, window index) to (rows, sum of v).
type Tally = BTreeMap<(usize, i64), (i64, i64)>;

fn add(tally: &mut Tally, other: &Tally) {
    for (k, (n, s)) in other {
        let e = tally.entry(*k).or_default();
        e.0 += n;
        e.1 += s;
    }
}

/// A row into the window `w` of key `k`.
fn row(rng: &mut ChaCha8Rng, id: i64, k: usize, w: i64) -> (Values, i64) {
    let t = T0 + w * HOUR + rng.random_range(0..3600) * 1_000_000;
    let v = rng.random_range(1..=1000);
    (
        vec![
            Some(id.to_string()),
            Some(format!("k{k}")),
            Some(ts_text(t)),
            Some(v.to_string()),
        ],
        v,
    )
}

/// A row into a window 40 days before the first: past its deadline, refused.
fn refused_row(rng: &mut ChaCha8Rng, id: i64) -> Values {
    let t = T0 - 40 * DAY + rng.random_range(0..86_400) * 1_000_000;
    vec![
        Some(id.to_string()),
        Some(format!("k{}", rng.random_range(0..KEYS))),
        Some(ts_text(t)),
        Some(rng.random_range(1..=1000i64).to_string()),
    ]
}

/// One statement: its rows, how it is sent, the late rows' tally and the refused rows.
struct Statement {
    kind: &'static str,
    method: Method,
    rows: Vec<Values>,
    late: Tally,
    pairs: Vec<(usize, i64)>,
    refused: i64,
}

fn statement(rng: &mut ChaCha8Rng, next_id: &mut i64) -> Statement {
    let roll = rng.random_range(0..100);
    let (kind, method, late_rows, with_refused) = match roll {
        0..25 => ("INSERT of 1 row", Method::Insert, 1, false),
        25..60 => (
            "INSERT of 2-5 rows",
            Method::Insert,
            rng.random_range(2..=5),
            false,
        ),
        60..75 => (
            "INSERT with a refused row",
            Method::Insert,
            rng.random_range(1..=4),
            true,
        ),
        75..90 => ("COPY", Method::Copy, rng.random_range(2..=5), false),
        _ => ("ingest()", Method::Ingest, rng.random_range(1..=5), false),
    };
    let mut st = Statement {
        kind,
        method,
        rows: Vec::new(),
        late: Tally::new(),
        pairs: Vec::new(),
        refused: 0,
    };
    for _ in 0..late_rows {
        let (k, w) = (rng.random_range(0..KEYS), rng.random_range(0..WINDOWS));
        let (values, v) = row(rng, *next_id, k, w);
        *next_id += 1;
        st.rows.push(values);
        let e = st.late.entry((k, w)).or_default();
        e.0 += 1;
        e.1 += v;
        st.pairs.push((k, w));
    }
    if with_refused {
        let at = rng.random_range(0..=st.rows.len());
        st.rows.insert(at, refused_row(rng, *next_id));
        *next_id += 1;
        st.refused = 1;
    }
    st
}

fn ids_of(rows: &[Values]) -> impl Iterator<Item = i64> + '_ {
    rows.iter()
        .map(|r| r[0].as_deref().unwrap().parse::<i64>().unwrap())
}

/// Sends `st` in `tx`; `eventtime.ingest` must count its rows as late and refused.
fn send_statement(tx: &mut postgres::Transaction<'_>, st: &Statement) -> Result<(), SendError> {
    if let Some(c) = send(tx, &table(), st.method, &st.rows)? {
        let late: i64 = st.late.values().map(|x| x.0).sum();
        if c != [0, late, st.refused, 0] {
            return Err(SendError::Contract(format!(
                "eventtime.ingest of {late} late and {} refused rows returned accepted={} late={} refused={} duplicates={}",
                st.refused, c[0], c[1], c[2], c[3]
            )));
        }
    }
    Ok(())
}

/// The (key, window) pairs a transaction touched, each with the first statement that did.
struct Trace {
    start: Instant,
    end: Instant,
    first: BTreeMap<(usize, i64), usize>,
}

#[derive(Default)]
struct WriterOut {
    committed: u64,
    rolled_back: u64,
    statements: u64,
    by_kind: BTreeMap<&'static str, u64>,
    rows: i64,
    refused: i64,
    deadlocks: u64,
    lock_timeouts: u64,
    failures: Vec<String>,
    tally: Tally,
    rolled_back_ids: Vec<i64>,
    traces: Vec<Trace>,
    slowest: Duration,
}

fn code_of(e: &SendError) -> Option<String> {
    match e {
        SendError::Pg(e) => e.code().map(|c| c.code().to_string()),
        _ => None,
    }
}

fn explain(e: &SendError) -> String {
    match e {
        SendError::Pg(e) => describe(e),
        SendError::Io(e) => format!("I/O: {e}"),
        SendError::Contract(s) => s.clone(),
    }
}

fn writer(cluster: &Cluster, w: usize, seed: u64, stop: &AtomicBool, pause_ms: u64) -> WriterOut {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (w as u64 + 1).wrapping_mul(0x9E37_79B9));
    let mut out = WriterOut::default();
    let mut c = cluster.connect_as(DB, OWNER);
    exec(
        &mut c,
        &format!("SET application_name = 'lf writer {w}'; SET lock_timeout = '2s'; SET statement_timeout = '60s'"),
    );
    let mut next_id = (w as i64 + 1) * 1_000_000_000;
    while !stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        let n = rng.random_range(1..=4);
        let stmts: Vec<Statement> = (0..n).map(|_| statement(&mut rng, &mut next_id)).collect();
        let mut first = BTreeMap::new();
        for (i, st) in stmts.iter().enumerate() {
            for p in &st.pairs {
                first.entry(*p).or_insert(i);
            }
        }
        let rollback = rng.random_bool(0.12);
        let result = (|| -> Result<(), SendError> {
            let mut tx = c.transaction()?;
            for (i, st) in stmts.iter().enumerate() {
                if i > 0 && pause_ms > 0 {
                    thread::sleep(Duration::from_millis(rng.random_range(0..=pause_ms)));
                }
                let t = Instant::now();
                send_statement(&mut tx, st)?;
                out.slowest = out.slowest.max(t.elapsed());
            }
            if rollback {
                tx.rollback()?;
            } else {
                tx.commit()?;
            }
            Ok(())
        })();
        out.traces.push(Trace {
            start,
            end: Instant::now(),
            first,
        });
        let ids = stmts.iter().flat_map(|st| ids_of(&st.rows));
        match result {
            Ok(()) if rollback => {
                out.rolled_back += 1;
                out.rolled_back_ids.extend(ids);
            }
            Ok(()) => {
                out.committed += 1;
                for st in &stmts {
                    out.statements += 1;
                    *out.by_kind.entry(st.kind).or_default() += 1;
                    out.rows += st.rows.len() as i64;
                    out.refused += st.refused;
                    add(&mut out.tally, &st.late);
                }
            }
            Err(e) => {
                out.rolled_back_ids.extend(ids);
                match code_of(&e).as_deref() {
                    Some("40P01") => out.deadlocks += 1,
                    Some("55P03") => out.lock_timeouts += 1,
                    _ => {
                        out.failures.push(format!("writer {w}: {}", explain(&e)));
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                if out.failures.len() + (out.deadlocks + out.lock_timeouts) as usize <= 5 {
                    eprintln!("  writer {w}: {}", explain(&e));
                }
            }
        }
    }
    out
}

/// `eventtime.tick()`, logged in its transaction; whether it was busy and whether it wrote.
fn tick(c: &mut Client) -> Result<(bool, bool), String> {
    let r = c
        .query_one(
            "WITH t AS MATERIALIZED (SELECT * FROM eventtime.tick()),
                  l AS (INSERT INTO tick_log (xid, at, busy, what)
                        SELECT pg_current_xact_id(), now(), EXISTS (SELECT FROM t WHERE skipped LIKE 'busy%'), 'tick'
                        RETURNING busy)
             SELECT (SELECT busy FROM l),
                    (SELECT string_agg(pipeline || ': ' || skipped, '; ') FROM t WHERE skipped NOT LIKE 'busy%'),
                    EXISTS (SELECT FROM t WHERE pipeline = 'lf' AND skipped IS NULL)",
            &[],
        )
        .map_err(|e| format!("tick: {}", describe(&e)))?;
    if let Some(err) = r.get::<_, Option<String>>(1) {
        return Err(format!("tick() skipped a pipeline: {err}"));
    }
    Ok((r.get(0), r.get(2)))
}

/// `eventtime.advance_watermark('lf', to)`, logged in its transaction; windows fired and purged.
fn advance(c: &mut Client, to: i64) -> Result<(i64, i64), String> {
    let r = c
        .query_one(
            "WITH a AS MATERIALIZED (SELECT * FROM eventtime.advance_watermark('lf', $1::text::timestamptz)),
                  l AS (INSERT INTO tick_log (xid, at, busy, what)
                        SELECT pg_current_xact_id(), now(), false, 'advance' FROM a RETURNING 1)
             SELECT windows_fired, windows_purged, (SELECT count(*) FROM l) FROM a",
            &[&ts_text(to)],
        )
        .map_err(|e| format!("advance to {}: {}", ts_text(to), describe(&e)))?;
    Ok((r.get(0), r.get(1)))
}

#[derive(Default)]
struct TickerOut {
    ticks: u64,
    busy: u64,
    wrote: u64,
    advances: u64,
    /// The longest call, and all calls together.
    slowest: Duration,
    total: Duration,
    failure: Option<String>,
}

fn ticker(cluster: &Cluster, seed: u64, stop: &AtomicBool) -> TickerOut {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x71C4);
    let mut out = TickerOut::default();
    let mut c = cluster.connect_as(DB, OWNER);
    exec(&mut c, "SET application_name = 'lf ticker'");
    let mut wm = WM0;
    while !stop.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(rng.random_range(60..=140)));
        let t = Instant::now();
        let r = if rng.random_bool(0.12) {
            wm += 60_000_000;
            out.advances += 1;
            advance(&mut c, wm).map(|_| ())
        } else {
            tick(&mut c).map(|(busy, wrote)| {
                out.ticks += 1;
                out.busy += busy as u64;
                out.wrote += wrote as u64;
            })
        };
        let took = t.elapsed();
        out.slowest = out.slowest.max(took);
        out.total += took;
        if let Err(e) = r {
            out.failure = Some(e);
            stop.store(true, Ordering::Relaxed);
        }
    }
    out
}

#[derive(Default)]
struct MonitorOut {
    samples: u64,
    /// Writers seen waiting for a lock held by another writer.
    writer_waits: Vec<String>,
    /// Writers seen waiting behind the ticker (its bounded wait in the lock queue).
    ticker_waits: u64,
    /// Samples of writers waiting to extend a relation, by relation.
    extend_waits: BTreeMap<String, u64>,
    max_pending: i64,
    max_pending_backends: i64,
    failure: Option<String>,
}

fn monitor(cluster: &Cluster, id: i32, stop: &AtomicBool) -> MonitorOut {
    let mut out = MonitorOut::default();
    let mut c = cluster.connect(DB);
    let state = format!("_eventtime.p{id}_state");
    while !stop.load(Ordering::Relaxed) {
        let rows = match c.query(
            "SELECT a.application_name, a.wait_event, left(a.query, 60),
                    array(SELECT b.application_name FROM pg_stat_activity b WHERE b.pid = ANY (pg_blocking_pids(a.pid))),
                    (SELECT string_agg(l.locktype || coalesce(' of ' || l.relation::regclass::text, ''), ', ')
                     FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted)
             FROM pg_stat_activity a WHERE a.wait_event_type = 'Lock' AND a.application_name LIKE 'lf writer%'",
            &[],
        ) {
            Ok(r) => r,
            Err(e) => {
                out.failure = Some(format!("monitor: {}", describe(&e)));
                return out;
            }
        };
        out.samples += 1;
        for r in rows {
            let blockers: Vec<String> = r.get(3);
            let what: String = r.get::<_, Option<String>>(4).unwrap_or_default();
            if r.get::<_, String>(1) == "extend" {
                // PostgreSQL's relation extension lock, held while a page is added to a table
                // any two inserting sessions share: not a lock of the pipeline's rows.
                *out.extend_waits.entry(what).or_default() += 1;
            } else if blockers.iter().any(|b| b.starts_with("lf writer")) {
                if out.writer_waits.len() < 10 {
                    out.writer_waits.push(format!(
                        "{} waits ({}: {what}) for {blockers:?}: {}",
                        r.get::<_, String>(0),
                        r.get::<_, String>(1),
                        r.get::<_, String>(2)
                    ));
                }
            } else {
                out.ticker_waits += 1;
            }
        }
        if out.samples % 50 == 0 {
            match c.query_one(
                &format!("SELECT count(*), count(DISTINCT _et_pending) FROM {state} WHERE _et_pending IS NOT NULL"),
                &[],
            ) {
                Ok(r) => {
                    out.max_pending = out.max_pending.max(r.get(0));
                    out.max_pending_backends = out.max_pending_backends.max(r.get(1));
                }
                Err(e) => {
                    out.failure = Some(format!("monitor: {}", describe(&e)));
                    return out;
                }
            }
        }
        thread::sleep(Duration::from_millis(5));
    }
    out
}

/// Pairs of transactions open at the same time that touched two (key, window) pairs in opposite
/// orders in different statements: with a late version per statement, each would wait for the
/// other's lock.
fn opposite_orders(traces: &mut [Trace]) -> u64 {
    traces.sort_by_key(|t| t.start);
    let mut n = 0;
    for i in 0..traces.len() {
        for j in i + 1..traces.len() {
            let (a, b) = (&traces[i], &traces[j]);
            if b.start >= a.end {
                break;
            }
            let common: Vec<_> = a.first.keys().filter(|k| b.first.contains_key(k)).collect();
            let opposite = common.iter().any(|x| {
                common
                    .iter()
                    .any(|y| a.first[*x] < a.first[*y] && b.first[*y] < b.first[*x])
            });
            n += opposite as u64;
        }
    }
    n
}

fn pipeline_id(c: &mut Client) -> i32 {
    c.query_one(
        "SELECT id FROM _eventtime.pipeline WHERE name = $1",
        &[&PIPE],
    )
    .expect("pipeline id")
    .get(0)
}

fn pending(c: &mut Client, id: i32) -> i64 {
    one_i64(
        c,
        &format!("SELECT count(*) FROM _eventtime.p{id}_state WHERE _et_pending IS NOT NULL"),
    )
}

/// The latest version of each (key index, window index).
fn latest_versions(c: &mut Client, id: i32) -> BTreeMap<(usize, i64), i32> {
    c.query(
        &format!(
            "SELECT k, {ws}, max(version) FROM _eventtime.p{id}_history GROUP BY 1, 2",
            ws = micros_sql("window_start")
        ),
        &[],
    )
    .expect("latest versions")
    .iter()
    .map(|r| (pair_of(&r.get::<_, String>(0), r.get(1)), r.get(2)))
    .collect()
}

fn pair_of(k: &str, window_start: i64) -> (usize, i64) {
    (
        k.trim_start_matches('k').parse().expect("key k<n>"),
        (window_start - T0).div_euclid(HOUR),
    )
}

/// What the clients know committed, over the whole test.
struct Expected {
    /// Every accepted row (on time and late) by (key, window).
    rows: Tally,
    ontime: Tally,
    refused: i64,
    rolled_back_ids: Vec<i64>,
}

struct Source {
    id: i64,
    pair: (usize, i64),
    v: i64,
    written: i64,
    committed: i64,
}

struct Version {
    version: i32,
    kind: String,
    n: i64,
    s: i64,
    window_end: i64,
    watermark: i64,
    fired: i64,
    xid: String,
    committed: i64,
}

struct Logged {
    at: i64,
    busy: bool,
    what: String,
    committed: i64,
}

#[derive(Default, Debug)]
struct Found {
    versions: usize,
    late_versions: usize,
    max_version: i32,
    /// The least time from the oldest row of a batch not forced by a deadline to its version.
    min_wait_us: i64,
    /// The longest time from a batch being due (its first row's commit plus `late_firing`) to its
    /// version's commit.
    max_delay_us: i64,
}

/// Every check of the header, from committed data.
fn check(c: &mut Client, id: i32, exp: &Expected, out: &mut Vec<String>) -> Found {
    let mut tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .expect("check transaction");
    let ct = |xid: &str| {
        micros_sql(&format!(
            "pg_xact_commit_timestamp(({xid}::text::bigint % 4294967296)::text::xid)"
        ))
    };
    let mut found = Found {
        min_wait_us: i64::MAX,
        ..Default::default()
    };
    let sources: Vec<Source> = tx
        .query(
            &format!(
                "SELECT id, k, {t}, v, {w}, {c} FROM events WHERE t >= $1::text::timestamptz",
                t = micros_sql("t"),
                w = micros_sql("written_at"),
                c = micros_sql("pg_xact_commit_timestamp(xmin)"),
            ),
            &[&ts_text(T0)],
        )
        .expect("source rows")
        .iter()
        .map(|r| Source {
            id: r.get(0),
            pair: pair_of(
                &r.get::<_, String>(1),
                r.get::<_, i64>(2) - r.get::<_, i64>(2).rem_euclid(HOUR),
            ),
            v: r.get(3),
            written: r.get(4),
            committed: r.get(5),
        })
        .collect();
    // The source: exactly the committed rows.
    let mut src = Tally::new();
    let mut ids = BTreeSet::new();
    for s in &sources {
        let e = src.entry(s.pair).or_default();
        e.0 += 1;
        e.1 += s.v;
        if !ids.insert(s.id) {
            out.push(format!("workload sanity: id {} twice in the source", s.id));
        }
    }
    if src != exp.rows {
        let diff: Vec<_> = exp
            .rows
            .keys()
            .chain(src.keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|k| exp.rows.get(k) != src.get(k))
            .take(5)
            .map(|k| {
                format!(
                    "{k:?}: committed {:?}, source {:?}",
                    exp.rows.get(k),
                    src.get(k)
                )
            })
            .collect();
        out.push(format!(
            "the source rows are not those of the committed transactions: {diff:?}"
        ));
    }
    let lost = one_i64(
        &mut tx,
        &format!(
            "SELECT count(*) FROM events WHERE id = ANY ('{{{}}}'::bigint[])",
            exp.rolled_back_ids
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
    );
    if lost != 0 {
        out.push(format!(
            "{lost} rows of rolled-back or unfinished transactions are in the source"
        ));
    }
    let refused = one_i64(
        &mut tx,
        &format!("SELECT count(*) FROM events WHERE t < '{}'", ts_text(T0)),
    );
    let refused_view = one_i64(&mut tx, "SELECT count(*) FROM lf_refused");
    if refused != exp.refused || refused_view != exp.refused {
        out.push(format!(
            "refused rows: the clients committed {}, the source holds {refused}, lf_refused {refused_view}",
            exp.refused
        ));
    }

    // History, and the transactions that wrote it.
    let mut history: BTreeMap<(usize, i64), Vec<Version>> = BTreeMap::new();
    for r in tx
        .query(
            &format!(
                "SELECT k, {ws}, version, kind, n, s::bigint, {we}, {wm}, {fired}, _et_xid::text, {c}
                 FROM _eventtime.p{id}_history",
                ws = micros_sql("window_start"),
                we = micros_sql("window_end"),
                wm = micros_sql("watermark"),
                fired = micros_sql("fired_at"),
                c = ct("_et_xid"),
            ),
            &[],
        )
        .expect("history")
    {
        history
            .entry(pair_of(&r.get::<_, String>(0), r.get(1)))
            .or_default()
            .push(Version {
                version: r.get(2),
                kind: r.get(3),
                n: r.get(4),
                s: r.get(5),
                window_end: r.get(6),
                watermark: r.get(7),
                fired: r.get(8),
                xid: r.get(9),
                committed: r.get(10),
            });
    }
    let mut log: Vec<Logged> = Vec::new();
    let mut writers: HashMap<String, String> = HashMap::new();
    for r in tx
        .query(
            &format!(
                "SELECT xid::text, {at}, busy, what, {c} FROM tick_log",
                at = micros_sql("at"),
                c = ct("xid")
            ),
            &[],
        )
        .expect("tick log")
    {
        let xid: String = r.get(0);
        let l = Logged {
            at: r.get(1),
            busy: r.get(2),
            what: r.get(3),
            committed: r.get(4),
        };
        writers.insert(xid, l.what.clone());
        log.push(l);
    }
    log.sort_by_key(|l| l.at);
    let arrivals: BTreeMap<(usize, i64), i64> = tx
        .query(
            &format!(
                "SELECT k, {ws}, sum(_et_n)::bigint FROM _eventtime.p{id}_arrivals GROUP BY 1, 2",
                ws = micros_sql("window_start")
            ),
            &[],
        )
        .expect("arrivals")
        .iter()
        .map(|r| (pair_of(&r.get::<_, String>(0), r.get(1)), r.get(2)))
        .collect();
    tx.commit().expect("end of the check transaction");

    let mut by_pair: BTreeMap<(usize, i64), Vec<&Source>> = BTreeMap::new();
    for s in &sources {
        by_pair.entry(s.pair).or_default().push(s);
    }
    for pair in by_pair.keys() {
        if !history.contains_key(pair) {
            out.push(format!("{pair:?} has committed rows but no version"));
        }
    }
    let mut problems = 0usize;
    let mut say = |out: &mut Vec<String>, s: String| {
        problems += 1;
        if problems <= 20 {
            out.push(s);
        }
    };
    for (pair, versions) in &mut history {
        versions.sort_by_key(|v| v.version);
        found.versions += versions.len();
        let mut rows: Vec<&Source> = by_pair.get(pair).cloned().unwrap_or_default();
        rows.sort_by_key(|s| s.committed);
        let numbers: Vec<i32> = versions.iter().map(|v| v.version).collect();
        if numbers != (1..=versions.len() as i32).collect::<Vec<_>>() {
            say(
                out,
                format!("{pair:?}: versions {numbers:?} are not 1..n, each once"),
            );
            continue;
        }
        found.max_version = found.max_version.max(versions.len() as i32);
        let mut prev_committed = i64::MIN;
        let mut prev_n = 0;
        let mut prev_wm = i64::MIN;
        for v in versions.iter() {
            let want_kind = if v.version == 1 && pair.0 < ONTIME_KEYS {
                "main"
            } else {
                "late"
            };
            if v.kind != want_kind {
                say(
                    out,
                    format!(
                        "{pair:?} version {}: kind {}, not {want_kind}",
                        v.version, v.kind
                    ),
                );
            }
            match writers.get(&v.xid).map(|s| s.as_str()) {
                Some("advance") => {}
                Some("tick") if v.kind == "late" => {}
                w => say(
                    out,
                    format!(
                        "{pair:?} version {} ({}) written by transaction {} ({w:?}), not a logged tick or advance",
                        v.version, v.kind, v.xid
                    ),
                ),
            }
            if v.committed <= prev_committed {
                say(
                    out,
                    format!(
                        "{pair:?} version {} committed before version {}",
                        v.version,
                        v.version - 1
                    ),
                );
            }
            if v.watermark < prev_wm {
                say(
                    out,
                    format!(
                        "{pair:?} version {} has a watermark behind the version before",
                        v.version
                    ),
                );
            }
            // The rows it holds: those committed before it; the new ones: after the version before.
            let held: Vec<&&Source> = rows.iter().filter(|s| s.committed < v.committed).collect();
            let n = held.len() as i64;
            let s: i64 = held.iter().map(|s| s.v).sum();
            if (v.n, v.s) != (n, s) {
                say(
                    out,
                    format!(
                        "{pair:?} version {} ({}) has n={} s={}; the rows committed before it: n={n} s={s}",
                        v.version, v.kind, v.n, v.s
                    ),
                );
            }
            if v.n <= prev_n {
                say(
                    out,
                    format!(
                        "{pair:?} version {} holds no new row (n {} after {prev_n})",
                        v.version, v.n
                    ),
                );
            }
            let new: Vec<&&Source> = held
                .iter()
                .filter(|s| s.committed > prev_committed)
                .copied()
                .collect();
            if v.kind == "late" && !new.is_empty() {
                found.late_versions += 1;
                let oldest = new.iter().map(|s| s.written).min().unwrap();
                let first_commit = new.iter().map(|s| s.committed).min().unwrap();
                let forced = v.window_end <= v.watermark.saturating_sub(LATENESS);
                if !forced {
                    let wait = v.fired - oldest;
                    found.min_wait_us = found.min_wait_us.min(wait);
                    if wait < LATE_FIRING_US {
                        say(
                            out,
                            format!(
                                "{pair:?} version {} fired at {} only {wait} us after its oldest row was written ({}), before late_firing",
                                v.version,
                                ts_text(v.fired),
                                ts_text(oldest)
                            ),
                        );
                    }
                }
                // A tick or advance that was not busy and started well after this batch came due
                // must have written it (or an earlier version holding its rows).
                let due = first_commit + LATE_FIRING_US;
                if let Some(l) = log.iter().find(|l| !l.busy && l.at > due + MARGIN_US) {
                    if l.committed < v.committed {
                        say(
                            out,
                            format!(
                                "{pair:?} version {}: due at {} (first row committed {}), but the {} at {} (committed {}) did not write it; it came at {}",
                                v.version,
                                ts_text(due),
                                ts_text(first_commit),
                                l.what,
                                ts_text(l.at),
                                ts_text(l.committed),
                                ts_text(v.committed)
                            ),
                        );
                    }
                }
                found.max_delay_us = found.max_delay_us.max(v.committed - due);
            }
            prev_committed = v.committed;
            prev_n = v.n;
            prev_wm = v.watermark;
        }
        // Every committed row is in the latest version.
        let last = versions.last().unwrap();
        if rows.iter().any(|s| s.committed > last.committed) {
            say(
                out,
                format!(
                    "{pair:?}: {} committed rows are in no version (latest {})",
                    rows.iter().filter(|s| s.committed > last.committed).count(),
                    last.version
                ),
            );
        }
        let late_rows = rows.len() as i64 - exp.ontime.get(pair).map_or(0, |x| x.0);
        let arrived = arrivals.get(pair).copied().unwrap_or(0);
        if arrived != late_rows {
            say(
                out,
                format!(
                    "{pair:?}: the batches recorded {arrived} arrivals for {late_rows} late rows"
                ),
            );
        }
    }
    if problems > 20 {
        out.push(format!("... {} more", problems - 20));
    }
    found
}

#[track_caller]
fn fail_if(what: &str, seed: u64, v: &[String]) {
    assert!(v.is_empty(), "seed {seed}: {what}:\n  {}", v.join("\n  "));
}

#[test]
fn late_batches_never_deadlock_and_survive_kill_9() {
    let seed = seed("late_batches");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let secs = env_num("FAULTS_LATE_BATCH_SECS", 10);
    let pause_ms = env_num("FAULTS_LATE_BATCH_PAUSE_MS", 10);
    let started = Instant::now();
    let cluster = Cluster::start("late_batches", &["track_commit_timestamp = on"]);
    create_db(&cluster, SETUP);
    let mut su = cluster.connect(DB);
    let id = pipeline_id(&mut su);
    let mut owner = cluster.connect_as(DB, OWNER);

    // On-time rows of k0..k3 in every window, then the advance that fires them.
    let mut ontime = Tally::new();
    let mut rows = Vec::new();
    let mut next_id = 1;
    for k in 0..ONTIME_KEYS {
        for w in 0..WINDOWS {
            for _ in 0..ONTIME_PER_PAIR {
                let (values, v) = row(&mut rng, next_id, k, w);
                next_id += 1;
                rows.push(values);
                let e = ontime.entry((k, w)).or_default();
                e.0 += 1;
                e.1 += v;
            }
        }
    }
    exec(&mut owner, &insert_sql(&table(), &rows));
    let (fired, _) = advance(&mut owner, WM0).unwrap();
    assert_eq!(
        fired,
        (ONTIME_KEYS as i64) * WINDOWS,
        "seed {seed}: the first advance fires every (key, window) with on-time rows"
    );
    let mut exp = Expected {
        rows: ontime.clone(),
        ontime,
        refused: 0,
        rolled_back_ids: Vec::new(),
    };

    // 1. Eight writers, a ticker, a monitor.
    let stop = AtomicBool::new(false);
    let (outs, tk, mon) = thread::scope(|s| {
        let ws: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (cluster, stop) = (&cluster, &stop);
                s.spawn(move || writer(cluster, w, seed, stop, pause_ms))
            })
            .collect();
        let tk = s.spawn(|| ticker(&cluster, seed, &stop));
        let mon = s.spawn(|| monitor(&cluster, id, &stop));
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(secs) && !stop.load(Ordering::Relaxed) {
            thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        let outs: Vec<WriterOut> = ws.into_iter().map(|h| h.join().expect("writer")).collect();
        (
            outs,
            tk.join().expect("ticker"),
            mon.join().expect("monitor"),
        )
    });
    let mut errors: Vec<String> = outs.iter().flat_map(|o| o.failures.clone()).collect();
    errors.extend(tk.failure.clone());
    errors.extend(mon.failure.clone());
    fail_if("a client failed", seed, &errors);
    let mut traces = Vec::new();
    let (mut committed, mut rolled_back, mut statements, mut late_rows) = (0, 0, 0, 0);
    let (mut deadlocks, mut lock_timeouts) = (0, 0);
    let mut by_kind: BTreeMap<&str, u64> = BTreeMap::new();
    let mut slowest = Duration::ZERO;
    for o in outs {
        committed += o.committed;
        rolled_back += o.rolled_back;
        statements += o.statements;
        late_rows += o.rows - o.refused;
        deadlocks += o.deadlocks;
        lock_timeouts += o.lock_timeouts;
        exp.refused += o.refused;
        add(&mut exp.rows, &o.tally);
        exp.rolled_back_ids.extend(o.rolled_back_ids);
        traces.extend(o.traces);
        slowest = slowest.max(o.slowest);
        for (k, n) in o.by_kind {
            *by_kind.entry(k).or_default() += n;
        }
    }
    let opposite = opposite_orders(&mut traces);
    eprintln!(
        "[late_batches] {committed} transactions committed, {rolled_back} rolled back, {statements} statements {by_kind:?}, \
         {late_rows} late and {} refused rows committed; {deadlocks} deadlocks, {lock_timeouts} lock timeouts; \
         slowest statement {slowest:?}; {opposite} pairs of concurrent transactions touched two windows in opposite orders",
        exp.refused
    );
    eprintln!(
        "  ticker: {} ticks ({} busy, {} wrote versions), {} advances, {:?} on average, the slowest {:?}; monitor: {} samples, \
         {} waits of writers behind the ticker, relation extension waits {:?}, up to {} pending rows of {} backends",
        tk.ticks,
        tk.busy,
        tk.wrote,
        tk.advances,
        tk.total / (tk.ticks + tk.advances).max(1) as u32,
        tk.slowest,
        mon.samples,
        mon.ticker_waits,
        mon.extend_waits,
        mon.max_pending,
        mon.max_pending_backends
    );
    assert_eq!(
        (deadlocks, lock_timeouts),
        (0, 0),
        "seed {seed}: writers of late rows deadlocked or waited for a lock"
    );
    fail_if(
        "a writer waited for another writer",
        seed,
        &mon.writer_waits,
    );
    assert!(
        opposite > 0 && rolled_back > 0 && exp.refused > 0 && tk.wrote > 0 && mon.max_pending > 0,
        "seed {seed}: the run must have had transactions touching windows in opposite orders ({opposite}), \
         rollbacks ({rolled_back}), refused rows ({}), ticks that wrote batches ({}) and pending rows ({})",
        exp.refused,
        tk.wrote,
        mon.max_pending
    );
    thread::sleep(Duration::from_millis(300));
    let (busy, _) = tick(&mut owner).unwrap();
    assert!(
        !busy,
        "seed {seed}: the last tick, with no writer left, was busy"
    );
    assert_eq!(
        pending(&mut su, id),
        0,
        "seed {seed}: pending rows left after a tick later than late_firing"
    );
    let mut v = Vec::new();
    let found = check(&mut su, id, &exp, &mut v);
    eprintln!(
        "  {} versions ({} late batches), up to {} per window; the least wait of a batch {} ms, the longest delay past due {} ms",
        found.versions,
        found.late_versions,
        found.max_version,
        found.min_wait_us / 1000,
        found.max_delay_us / 1000
    );
    fail_if("after the concurrent writers", seed, &v);
    assert!(
        found.max_version >= 3,
        "seed {seed}: the run should write several batches of a window ({} ticks and {} advances, the slowest {:?})",
        tk.ticks,
        tk.advances,
        tk.slowest
    );

    // 2. and 3. Late rows committed, the server killed before their batch.
    for (part, with_backends) in [(2, true), (3, false)] {
        let before = latest_versions(&mut su, id);
        let history = one_i64(
            &mut su,
            &format!("SELECT count(*) FROM _eventtime.p{id}_history"),
        );
        let mut touched = BTreeSet::new();
        for w in 0..3usize {
            let mut c = cluster.connect_as(DB, OWNER);
            let mut next_id = (100 + part * 10 + w as i64) * 1_000_000_000;
            for _ in 0..2 {
                let mut tx = c.transaction().unwrap();
                let mut late = Tally::new();
                for _ in 0..rng.random_range(1..=3) {
                    let st = statement(&mut rng, &mut next_id);
                    send_statement(&mut tx, &st).unwrap_or_else(|e| panic!("{}", explain(&e)));
                    add(&mut late, &st.late);
                    exp.refused += st.refused;
                }
                tx.commit().unwrap();
                touched.extend(late.keys().copied());
                add(&mut exp.rows, &late);
            }
        }
        // One transaction still open at the kill.
        let mut open = cluster.connect_as(DB, OWNER);
        let st = statement(&mut rng, &mut next_id);
        exec(&mut open, "BEGIN");
        exec(&mut open, &insert_sql(&table(), &st.rows));
        exp.rolled_back_ids.extend(ids_of(&st.rows));
        let waiting = pending(&mut su, id);
        assert!(waiting > 0, "seed {seed}: part {part}: no pending rows");
        assert_eq!(
            one_i64(
                &mut su,
                &format!("SELECT count(*) FROM _eventtime.p{id}_history")
            ),
            history,
            "seed {seed}: part {part}: an ingest of late rows wrote versions"
        );
        drop(su);
        cluster.kill9(with_backends).expect("kill -9");
        let secs = cluster.restart_after_kill(Duration::from_millis(100));
        drop(open);
        su = cluster.connect(DB);
        owner = cluster.connect_as(DB, OWNER);
        assert_eq!(
            pending(&mut su, id),
            waiting,
            "seed {seed}: part {part}: the committed pending rows after recovery"
        );
        assert_eq!(
            latest_versions(&mut su, id),
            before,
            "seed {seed}: part {part}: versions written before any tick"
        );
        if part == 2 {
            thread::sleep(Duration::from_millis(250));
            let (busy, wrote) = tick(&mut owner).unwrap();
            assert!(
                !busy && wrote,
                "seed {seed}: part {part}: the tick after recovery wrote nothing"
            );
        } else {
            let (_, purged) = advance(&mut owner, WM_END).unwrap();
            assert!(
                purged > 0,
                "seed {seed}: part {part}: the advance past every deadline purged nothing"
            );
            let left = one_i64(
                &mut su,
                &format!("SELECT count(*) FROM _eventtime.p{id}_state"),
            );
            assert_eq!(
                left, 0,
                "seed {seed}: part {part}: state left after every deadline"
            );
        }
        assert_eq!(
            pending(&mut su, id),
            0,
            "seed {seed}: part {part}: pending rows left"
        );
        let after = latest_versions(&mut su, id);
        let mut wrong = Vec::new();
        for (pair, latest) in &after {
            let want = before.get(pair).copied().unwrap_or(0) + touched.contains(pair) as i32;
            if *latest != want {
                wrong.push(format!(
                    "{pair:?}: latest version {latest}, expected {want}"
                ));
            }
        }
        fail_if(
            &format!("part {part}: one version of each window the committed rows touched"),
            seed,
            &wrong,
        );
        let mut v = Vec::new();
        check(&mut su, id, &exp, &mut v);
        fail_if(&format!("part {part}: after kill -9"), seed, &v);
        eprintln!(
            "  part {part}: {waiting} pending rows of {} windows survived a kill -9 ({}); back after {secs:.1} s; one version each by {}",
            touched.len(),
            if with_backends { "with every backend" } else { "of the postmaster alone" },
            if part == 2 { "the next tick" } else { "the advance past every deadline, which then purged" }
        );
    }
    eprintln!(
        "[late_batches] done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
