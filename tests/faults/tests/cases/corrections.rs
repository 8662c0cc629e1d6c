//! SPEC §8 under concurrency, checked from the contract (README "eventtime.changes and NOTIFY
//! eventtime", "eventtime.restate"):
//!
//! - `the_feed_delivers_every_committed_version_once_in_commit_order`: a consumer loops on
//!   `eventtime.changes` while 8 writers ingest late, on-time and refused rows in transactions of
//!   several statements held open for a while (some rolled back, some losing a deadlock), and an
//!   advancer fires main versions in transactions of its own (some rolled back). Every committed
//!   version arrives exactly once, as committed, none of a rolled-back transaction, each window's
//!   versions in version order, and a transaction whose COMMIT returned before another's COMMIT
//!   was sent is delivered by the same call or an earlier one. A listener on channel `eventtime`
//!   gets, per session in commit order, one parseable notification for each statement that wrote
//!   versions of a committed transaction, with the number written by kind.
//! - `concurrent_restatements_fold_each_refused_row_once`: two restatements of a purged window,
//!   the second sent while the first holds its transaction open, with refusals arriving before,
//!   between and during them: the second waits, folds only what the first did not, each refused
//!   row is folded once, versions stay gapless and every restated value equals a `GROUP BY` over
//!   the window's accepted and folded rows.
//!
//! The tables and pipelines belong to `et_owner`, whose sessions do every ingest, advance,
//! restatement and `changes` call; the observer (`pg_stat_activity`, the internal history table
//! for `_et_xid`) and the final checks are the superuser's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use chrono::DateTime;
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, GenericClient, Transaction};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use pg_eventtime_faults::cluster::Cluster;
use pg_eventtime_faults::db::{backend_pid, describe, exec, text_rows, wait_for_lock, Failure};
use pg_eventtime_faults::rows::{insert_sql, send, Method, SendError, TableSpec, Values};
use pg_eventtime_faults::workload::{
    connect, create_db, join, table, ts_text, Shared, DB, EVENTS_TABLE, HOUR, MINUTE, OWNER, T0,
};
use pg_eventtime_faults::{env_num, seed};

// ---------------------------------------------------------------------------------------------
// Shared by both tests
// ---------------------------------------------------------------------------------------------

/// One notification on channel `eventtime`, as received.
#[derive(Debug, Clone)]
struct Note {
    pid: i32,
    channel: String,
    payload: String,
}

/// A notification's payload, parsed by PostgreSQL (`::jsonb`): pipeline, versions by kind
/// (main, late, restatement), watermark, seq.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Payload {
    pipeline: Option<String>,
    versions: [Option<i64>; 3],
    watermark: Option<String>,
    seq: Option<i64>,
}

/// What a session must have announced for one statement that wrote versions: the number written
/// by kind and, where known, the watermark as the payload spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Announced {
    versions: [i64; 3],
    watermark: Option<String>,
}

/// The watermark as the payload spells it: UTC, microseconds, `Z`.
fn payload_ts(us: i64) -> String {
    DateTime::from_timestamp_micros(us)
        .expect("timestamp in range")
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// The same, in SQL, for a timestamptz expression.
fn payload_ts_sql(expr: &str) -> String {
    format!("to_char({expr} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
}

/// Runs a thread body so that its failure, error or panic, stops the other threads at once.
fn guarded<T>(sh: &Shared, who: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    let r = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    };
    if let Err(e) = &r {
        if !sh.aborted() {
            sh.violation(format!("{who}: {e}"));
        }
    }
    r
}

/// Listens on `eventtime` from a connection of its own (as `OWNER`), signals `ready` once
/// listening, and collects every notification until `stop` is set and nothing came for `quiet`.
fn listen(
    cluster: &Cluster,
    sh: &Shared,
    stop: &AtomicBool,
    quiet: Duration,
    ready: mpsc::Sender<()>,
) -> Result<Vec<Note>, String> {
    let mut c = connect(cluster, OWNER, sh, false)?;
    c.batch_execute("LISTEN eventtime")
        .map_err(|e| describe(&e))?;
    let _ = ready.send(());
    let mut notes = Vec::new();
    let mut quiet_since: Option<Instant> = None;
    loop {
        if sh.aborted() {
            return Err("aborted".into());
        }
        let mut got = 0;
        let mut ns = c.notifications();
        let mut it = ns.timeout_iter(Duration::from_millis(100));
        while let Some(n) = it
            .next()
            .map_err(|e| format!("reading notifications: {}", describe(&e)))?
        {
            notes.push(Note {
                pid: n.process_id(),
                channel: n.channel().to_string(),
                payload: n.payload().to_string(),
            });
            got += 1;
        }
        if stop.load(Ordering::SeqCst) {
            if got > 0 {
                quiet_since = Some(Instant::now());
            }
            let since = *quiet_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= quiet {
                return Ok(notes);
            }
        }
    }
}

/// Parses every payload in PostgreSQL; a payload that is not a JSON object is a violation.
fn parse_notes(su: &mut Client, notes: &[Note], violations: &mut Vec<String>) -> Vec<Payload> {
    let mut out = Vec::with_capacity(notes.len());
    for n in notes {
        if n.channel != "eventtime" {
            violations.push(format!("a notification on channel {:?}: {n:?}", n.channel));
        }
        let r = su.query_one(
            "SELECT p->>'pipeline', (p->'versions'->>'main')::bigint, (p->'versions'->>'late')::bigint,
                    (p->'versions'->>'restatement')::bigint, p->>'watermark', (p->>'seq')::bigint
             FROM (SELECT $1::text::jsonb AS p) x WHERE jsonb_typeof(p) = 'object'",
            &[&n.payload],
        );
        match r {
            Ok(r) => out.push(Payload {
                pipeline: r.get(0),
                versions: [r.get(1), r.get(2), r.get(3)],
                watermark: r.get(4),
                seq: r.get(5),
            }),
            Err(e) => {
                violations.push(format!(
                    "the payload of a notification from pid {} does not parse as a JSON object ({}): {:?}",
                    n.pid,
                    describe(&e),
                    n.payload
                ));
                out.push(Payload {
                    pipeline: None,
                    versions: [None; 3],
                    watermark: None,
                    seq: None,
                });
            }
        }
    }
    out
}

/// Compares the notifications, per session in arrival order, with what each session announced
/// in commit order. A notification of zero versions (not required by the contract, not
/// forbidden) is counted and otherwise ignored; returns how many there were.
fn check_notes(
    su: &mut Client,
    pipeline: &str,
    notes: &[Note],
    expected: &BTreeMap<i32, Vec<Announced>>,
    violations: &mut Vec<String>,
) -> usize {
    let parsed = parse_notes(su, notes, violations);
    let mut got: BTreeMap<i32, Vec<(Announced, &Note)>> = BTreeMap::new();
    let mut last_seq: HashMap<i32, i64> = HashMap::new();
    let mut zero = 0;
    for (n, p) in notes.iter().zip(&parsed) {
        if p.pipeline.as_deref() != Some(pipeline) {
            violations.push(format!(
                "a notification whose pipeline is {:?}, not {pipeline:?}: {:?}",
                p.pipeline, n.payload
            ));
            continue;
        }
        let Some(versions) = p.versions.iter().copied().collect::<Option<Vec<i64>>>() else {
            violations.push(format!(
                "a notification without versions by kind (main, late, restatement): {:?}",
                n.payload
            ));
            continue;
        };
        match p.seq {
            Some(s) => {
                if let Some(prev) = last_seq.insert(n.pid, s) {
                    if s <= prev {
                        violations.push(format!(
                            "pid {}: notification seq {s} after {prev}: seq numbers a session's notifications",
                            n.pid
                        ));
                    }
                }
            }
            None => violations.push(format!("a notification without seq: {:?}", n.payload)),
        }
        if p.watermark.is_none() {
            violations.push(format!(
                "a notification without a watermark: {:?}",
                n.payload
            ));
        }
        if versions.iter().all(|&v| v == 0) {
            zero += 1;
            continue;
        }
        got.entry(n.pid).or_default().push((
            Announced {
                versions: [versions[0], versions[1], versions[2]],
                watermark: p.watermark.clone(),
            },
            n,
        ));
    }
    for (pid, want) in expected {
        let have = got.remove(pid).unwrap_or_default();
        let same = have.len() == want.len()
            && have.iter().zip(want).all(|((h, _), w)| {
                h.versions == w.versions && (w.watermark.is_none() || w.watermark == h.watermark)
            });
        if !same {
            let at = have
                .iter()
                .zip(want)
                .position(|((h, _), w)| {
                    h.versions != w.versions
                        || (w.watermark.is_some() && w.watermark != h.watermark)
                })
                .unwrap_or(have.len().min(want.len()));
            violations.push(format!(
                "session {pid}: {} notifications of versions, {} statements that wrote versions in committed transactions; first difference at #{at}: received {:?}, expected {:?}",
                have.len(),
                want.len(),
                have.get(at).map(|(_, n)| &n.payload),
                want.get(at)
            ));
        }
    }
    for (pid, have) in got {
        violations.push(format!(
            "session {pid} sent {} notifications of versions but committed no statement that wrote versions; first: {:?}",
            have.len(),
            have[0].1.payload
        ));
    }
    zero
}

/// Sets the flag when dropped, also while unwinding.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The internal history table of a pipeline (`_eventtime.p<id>_history`, with `_et_xid` and
/// `_et_seq`).
fn history_table(c: &mut Client, pipeline: &str) -> String {
    let id: i32 = c
        .query_one(
            "SELECT id FROM _eventtime.pipeline WHERE name = $1",
            &[&pipeline],
        )
        .unwrap_or_else(|e| panic!("pipeline id: {}", describe(&e)))
        .get(0);
    format!("_eventtime.p{id}_history")
}

/// The events table of `workload`, for a pipeline of another name.
fn events_table(pipeline: &str) -> TableSpec {
    TableSpec {
        pipeline: pipeline.into(),
        ..table()
    }
}

// ---------------------------------------------------------------------------------------------
// 1. The feed
// ---------------------------------------------------------------------------------------------

const FEED: &str = "feed";
const WRITERS: usize = 8;
const STORES: u8 = 6;

fn feed_setup() -> String {
    format!(
        "{EVENTS_TABLE}
SELECT eventtime.create_pipeline(
    name => 'feed', source => 'events', event_time => 'ts', key => ARRAY['store'],
    event_id => 'event_id', window_size => interval '20 minutes',
    allowed_lateness => interval '1 hour', aggregates => 'count(*) AS n, sum(amount) AS total');
SELECT eventtime.advance_watermark('feed', '{}');
",
        ts_text(T0)
    )
}

/// A version by its identity: key (JSON text), window start, version.
type VersionId = (String, String, i32);

/// A version as a writing transaction read it back before committing, or as history holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    id: VersionId,
    kind: String,
    aggregates: String,
    sealed: bool,
    watermark: String,
    fired_at: String,
}

/// One transaction of a writer or the advancer.
#[derive(Debug)]
struct Tx {
    who: String,
    pid: i32,
    xid: String,
    /// `Some((COMMIT sent, COMMIT returned))` if it committed.
    commit: Option<(Instant, Instant)>,
    /// How long it was open.
    held: Duration,
    written: Vec<Written>,
    /// Per statement that wrote versions: what it must announce.
    announced: Vec<Announced>,
    /// The kind its versions must have.
    kind: &'static str,
}

/// The versions the current transaction wrote after `_et_seq` `after` (moved on past them), in
/// the form `changes` returns them, and the watermark of each as the payload spells it.
fn read_written(
    tx: &mut Transaction<'_>,
    hist: &str,
    after: &mut i64,
) -> Result<Vec<(Written, String)>, postgres::Error> {
    let rows = tx.query(
        &format!(
            "SELECT _et_seq, jsonb_build_object('store', store)::text, window_start::text, version, kind,
                    jsonb_build_object('n', n, 'total', total)::text, sealed, watermark::text,
                    fired_at::text, {}
             FROM {hist} WHERE _et_xid = pg_current_xact_id() AND _et_seq > $1 ORDER BY _et_seq",
            payload_ts_sql("watermark")
        ),
        &[&*after],
    )?;
    Ok(rows
        .iter()
        .map(|r| {
            *after = (*after).max(r.get::<_, i64>(0));
            (
                Written {
                    id: (r.get(1), r.get(2), r.get(3)),
                    kind: r.get(4),
                    aggregates: r.get(5),
                    sealed: r.get(6),
                    watermark: r.get(7),
                    fired_at: r.get(8),
                },
                r.get::<_, Option<String>>(9).unwrap_or_default(),
            )
        })
        .collect())
}

#[derive(Debug, Default)]
struct WriterOut {
    txs: Vec<Tx>,
    deadlocks: u64,
    statements: u64,
    rows: u64,
}

fn feed_rows(rng: &mut ChaCha8Rng, sh: &Shared, batch: i64) -> Vec<Values> {
    let wm = sh.watermark.load(Ordering::SeqCst);
    (0..rng.random_range(1..=3))
        .map(|_| {
            let u: f64 = rng.random();
            let ts = if u < 0.6 {
                // Mostly in a fired window within its lateness: a late version.
                wm - rng.random_range(1..60 * MINUTE)
            } else if u < 0.85 {
                wm + rng.random_range(0..40 * MINUTE)
            } else {
                // Past the deadline: refused, no version.
                wm - rng.random_range(90 * MINUTE..240 * MINUTE)
            };
            let cents: i64 = rng.random_range(1..=100_000);
            vec![
                Some(sh.next_delivery.fetch_add(1, Ordering::SeqCst).to_string()),
                Some(batch.to_string()),
                Some(sh.next_event.fetch_add(1, Ordering::SeqCst).to_string()),
                Some(format!("s{}", rng.random_range(0..STORES))),
                Some("r0".into()),
                Some(format!("{}.{:02}", cents / 100, cents % 100)),
                Some(ts_text(ts)),
            ]
        })
        .collect()
}

/// A writer: until `until`, transactions of 1 to 4 ingest statements (INSERT, COPY or
/// `eventtime.ingest`) with pauses of up to 300 ms before each and before the end; 15% roll back.
/// A deadlock (40P01) rolls the transaction back too. Inside each transaction, after each
/// statement, it reads back the versions the statement wrote.
fn feed_writer(
    cluster: &Cluster,
    sh: &Shared,
    hist: &str,
    idx: usize,
    seed: u64,
    until: Instant,
) -> Result<WriterOut, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (0x5EED_F00D_u64 * (idx as u64 + 1)));
    let t = events_table(FEED);
    let mut out = WriterOut::default();
    let mut c = connect(cluster, OWNER, sh, false)?;
    let me = backend_pid(&mut c);
    while Instant::now() < until {
        if sh.aborted() {
            return Err("aborted".into());
        }
        let statements = rng.random_range(1..=4);
        let roll_back = rng.random_bool(0.15);
        let opened = Instant::now();
        let mut rec = Tx {
            who: format!("writer {idx}"),
            pid: me,
            xid: String::new(),
            commit: None,
            held: Duration::ZERO,
            written: Vec::new(),
            announced: Vec::new(),
            kind: "late",
        };
        let mut tx = c.transaction().map_err(|e| describe(&e))?;
        let r = (|| -> Result<(), SendError> {
            rec.xid = tx
                .query_one("SELECT pg_current_xact_id()::text", &[])?
                .get(0);
            let mut after = 0i64;
            for _ in 0..statements {
                thread::sleep(Duration::from_millis(rng.random_range(0..=300)));
                let batch = sh.next_batch.fetch_add(1, Ordering::SeqCst);
                let rows = feed_rows(&mut rng, sh, batch);
                let u: f64 = rng.random();
                let method = if u < 0.5 {
                    Method::Insert
                } else if u < 0.75 {
                    Method::Copy
                } else {
                    Method::Ingest
                };
                send(&mut tx, &t, method, &rows)?;
                out.statements += 1;
                out.rows += rows.len() as u64;
                let w = read_written(&mut tx, hist, &mut after)?;
                if let Some((_, wm)) = w.first() {
                    rec.announced.push(Announced {
                        versions: [0, w.len() as i64, 0],
                        watermark: Some(wm.clone()),
                    });
                }
                rec.written.extend(w.into_iter().map(|(v, _)| v));
            }
            thread::sleep(Duration::from_millis(rng.random_range(0..=300)));
            Ok(())
        })();
        match r {
            Ok(()) if roll_back => tx.rollback().map_err(|e| describe(&e))?,
            Ok(()) => {
                let sent = Instant::now();
                tx.commit()
                    .map_err(|e| format!("COMMIT: {}", describe(&e)))?;
                rec.commit = Some((sent, Instant::now()));
            }
            Err(e) => match e.failure() {
                Failure::Retry(_) => {
                    let _ = tx.rollback();
                    out.deadlocks += 1;
                }
                f => return Err(format!("transaction {}: {f:?}", rec.xid)),
            },
        }
        rec.held = opened.elapsed();
        out.txs.push(rec);
    }
    Ok(out)
}

/// The advancer: while writers run, every 150 to 400 ms, a transaction that advances the
/// watermark 2 to 10 minutes and reads back the main versions it wrote; 10% roll back. Then one
/// committed advance to `infinity`.
fn feed_advancer(cluster: &Cluster, sh: &Shared, hist: &str, seed: u64) -> Result<Vec<Tx>, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xADD_A11CE);
    let mut c = connect(cluster, OWNER, sh, false)?;
    let me = backend_pid(&mut c);
    let mut txs = Vec::new();
    let mut w = sh.watermark.load(Ordering::SeqCst);
    loop {
        if sh.aborted() {
            return Err("aborted".into());
        }
        let last = sh.workers_left.load(Ordering::SeqCst) == 0;
        let target = if last {
            i64::MAX
        } else {
            thread::sleep(Duration::from_millis(rng.random_range(150..=400)));
            w + rng.random_range(2..=10) * MINUTE + rng.random_range(0..60) * 1_000_000
        };
        let roll_back = !last && rng.random_bool(0.1);
        let opened = Instant::now();
        let mut rec = Tx {
            who: "advancer".into(),
            pid: me,
            xid: String::new(),
            commit: None,
            held: Duration::ZERO,
            written: Vec::new(),
            announced: Vec::new(),
            kind: "main",
        };
        let mut tx = c.transaction().map_err(|e| describe(&e))?;
        let r = (|| -> Result<(), postgres::Error> {
            rec.xid = tx
                .query_one("SELECT pg_current_xact_id()::text", &[])?
                .get(0);
            tx.query_one(
                "SELECT windows_fired FROM eventtime.advance_watermark($1, $2::text::timestamptz)",
                &[&FEED, &ts_text(target)],
            )?;
            let w = read_written(&mut tx, hist, &mut 0)?;
            if !w.is_empty() {
                rec.announced.push(Announced {
                    versions: [w.len() as i64, 0, 0],
                    watermark: None,
                });
            }
            rec.written.extend(w.into_iter().map(|(v, _)| v));
            Ok(())
        })();
        let committed = match r {
            Ok(()) if roll_back => {
                tx.rollback().map_err(|e| describe(&e))?;
                false
            }
            Ok(()) => {
                let sent = Instant::now();
                tx.commit()
                    .map_err(|e| format!("COMMIT: {}", describe(&e)))?;
                rec.commit = Some((sent, Instant::now()));
                true
            }
            Err(e) => match pg_eventtime_faults::db::classify(&e) {
                Failure::Retry(_) => {
                    let _ = tx.rollback();
                    false
                }
                f => return Err(format!("advance to {}: {f:?}", ts_text(target))),
            },
        };
        rec.held = opened.elapsed();
        txs.push(rec);
        if committed {
            if last {
                return Ok(txs);
            }
            w = target;
            sh.watermark.store(w, Ordering::SeqCst);
        }
    }
}

/// A row `changes` returned.
#[derive(Debug, Clone)]
struct Got {
    v: Written,
    cursor: String,
}

struct Call {
    sent: Instant,
    returned: Instant,
    rows: Vec<Got>,
}

/// The consumer: loops on `changes(feed, cursor)`, the cursor of the last row received (kept
/// when a call returns nothing), pausing up to 40 ms after an empty call and, one call in ten, 200
/// to 600 ms, until a call made after `done` was set returns nothing.
fn feed_consumer(
    cluster: &Cluster,
    sh: &Shared,
    done: &AtomicBool,
    seed: u64,
) -> Result<Vec<Call>, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xC0_FFEE);
    let mut c = connect(cluster, OWNER, sh, false)?;
    let mut cursor: Option<String> = None;
    let mut calls = Vec::new();
    loop {
        if sh.aborted() {
            return Err("aborted".into());
        }
        let last = done.load(Ordering::SeqCst);
        let sent = Instant::now();
        let rows = c
            .query(
                "SELECT key::text, window_start::text, version, kind, aggregates::text, sealed,
                        watermark::text, fired_at::text, cursor
                 FROM eventtime.changes($1, $2)",
                &[&FEED, &cursor],
            )
            .map_err(|e| format!("changes after {cursor:?}: {}", describe(&e)))?;
        let returned = Instant::now();
        let rows: Vec<Got> = rows
            .iter()
            .map(|r| Got {
                v: Written {
                    id: (r.get(0), r.get(1), r.get(2)),
                    kind: r.get(3),
                    aggregates: r.get(4),
                    sealed: r.get(5),
                    watermark: r.get(6),
                    fired_at: r.get(7),
                },
                cursor: r.get(8),
            })
            .collect();
        let empty = rows.is_empty();
        if let Some(g) = rows.last() {
            cursor = Some(g.cursor.clone());
        }
        calls.push(Call {
            sent,
            returned,
            rows,
        });
        if empty && last {
            return Ok(calls);
        }
        if rng.random_bool(0.1) {
            // A slow consumer: several transactions commit before the next call.
            thread::sleep(Duration::from_millis(rng.random_range(200..=600)));
        } else if empty {
            thread::sleep(Duration::from_millis(rng.random_range(0..=40)));
        }
    }
}

/// History rows by version, with the writing transaction.
type History = HashMap<VersionId, (Written, String)>;

/// History as committed, with the writing transaction (`_et_xid`) of each version.
fn read_history(su: &mut Client, hist: &str) -> History {
    su.query(
        &format!(
            "SELECT jsonb_build_object('store', store)::text, window_start::text, version, kind,
                        jsonb_build_object('n', n, 'total', total)::text, sealed, watermark::text,
                        fired_at::text, _et_xid::text
                 FROM {hist}"
        ),
        &[],
    )
    .unwrap_or_else(|e| panic!("history: {}", describe(&e)))
    .iter()
    .map(|r| {
        let w = Written {
            id: (r.get(0), r.get(1), r.get(2)),
            kind: r.get(3),
            aggregates: r.get(4),
            sealed: r.get(5),
            watermark: r.get(6),
            fired_at: r.get(7),
        };
        (w.id.clone(), (w, r.get::<_, String>(8)))
    })
    .collect()
}

/// Each committed transaction wrote, per history, exactly what it read back before its commit,
/// of the kind it writes; every version belongs to one of them.
fn check_attribution(history: &History, txs: &[Tx]) -> Vec<String> {
    let mut v = Vec::new();
    let by_xid: HashMap<&str, usize> = txs
        .iter()
        .enumerate()
        .filter(|(_, t)| t.commit.is_some())
        .map(|(i, t)| (t.xid.as_str(), i))
        .collect();
    let mut in_history: HashMap<&str, usize> = HashMap::new();
    for (id, (w, xid)) in history {
        match by_xid.get(xid.as_str()) {
            None => v.push(format!(
                "history version {id:?} was written by transaction {xid}, which no client committed"
            )),
            Some(&i) => {
                *in_history.entry(xid.as_str()).or_default() += 1;
                let t = &txs[i];
                match t.written.iter().find(|x| x.id == *id) {
                    Some(x) if x == w => {}
                    other => v.push(format!(
                        "history version {w:?} differs from what {} read back in its transaction {xid}: {other:?}",
                        t.who
                    )),
                }
                if w.kind != t.kind {
                    v.push(format!(
                        "{} wrote a version of kind {} (expected {}): {w:?}",
                        t.who, w.kind, t.kind
                    ));
                }
            }
        }
    }
    for t in txs.iter().filter(|t| t.commit.is_some()) {
        let n = in_history.get(t.xid.as_str()).copied().unwrap_or(0);
        if n != t.written.len() {
            v.push(format!(
                "{} committed transaction {} with {} versions, history holds {n} of it",
                t.who,
                t.xid,
                t.written.len()
            ));
        }
    }
    v
}

/// What the consumer received against history and the transactions: returns the violations
/// and the number of versions written by transactions that rolled back.
fn check_delivery(history: &History, txs: &[Tx], calls: &[Call]) -> (Vec<String>, usize) {
    let mut v = Vec::new();
    // Every committed version received exactly once, as committed; nothing else received.
    let mut received: HashMap<&VersionId, Vec<(usize, &Got)>> = HashMap::new();
    for (i, c) in calls.iter().enumerate() {
        for g in &c.rows {
            received.entry(&g.v.id).or_default().push((i, g));
        }
    }
    for (id, (w, _)) in history {
        match received.get(id).map(|r| r.as_slice()) {
            None | Some([]) => v.push(format!("committed version {w:?} was never received")),
            Some([(_, g)]) => {
                if g.v != *w {
                    v.push(format!(
                        "version {id:?} received as {:?}, committed as {w:?}",
                        g.v
                    ));
                }
            }
            Some(many) => v.push(format!(
                "version {id:?} received {} times, by calls {:?}",
                many.len(),
                many.iter().map(|(i, _)| i).collect::<Vec<_>>()
            )),
        }
    }
    for (id, r) in &received {
        if !history.contains_key(*id) {
            v.push(format!(
                "received a version that is not in history: {:?} (call {})",
                r[0].1.v, r[0].0
            ));
        }
    }
    // None of a rolled-back transaction: no received version is one a rolled-back transaction
    // wrote (the same version number, value and fired_at).
    let mut rolled_back_versions = 0;
    for t in txs.iter().filter(|t| t.commit.is_none()) {
        for w in &t.written {
            rolled_back_versions += 1;
            if let Some(r) = received.get(&w.id) {
                for (i, g) in r {
                    if g.v.aggregates == w.aggregates && g.v.fired_at == w.fired_at {
                        v.push(format!(
                            "call {i} delivered {w:?}, written by {}'s transaction {}, which rolled back",
                            t.who, t.xid
                        ));
                    }
                }
            }
        }
    }
    // The versions of each window in version order; every row has a cursor.
    let mut last: HashMap<(&str, &str), (i32, usize)> = HashMap::new();
    for (i, c) in calls.iter().enumerate() {
        for g in &c.rows {
            if g.cursor.is_empty() {
                v.push(format!("call {i} returned {:?} without a cursor", g.v));
            }
            let (key, ws, version) = &g.v.id;
            if let Some((prev, at)) = last.insert((key, ws), (*version, i)) {
                if *version <= prev {
                    v.push(format!(
                        "window {key} {ws}: version {version} received (call {i}) after version {prev} (call {at})"
                    ));
                }
            }
        }
    }

    // Commit order. Per committed transaction with versions: the first and last call that
    // delivered them.
    struct Delivered<'a> {
        t: &'a Tx,
        sent: Instant,
        returned: Instant,
        first: usize,
        last: usize,
    }
    let mut delivered: Vec<Delivered> = Vec::new();
    for t in txs {
        let Some((sent, returned)) = t.commit else {
            continue;
        };
        let calls_of: Vec<usize> = t
            .written
            .iter()
            .filter_map(|w| received.get(&w.id))
            .flat_map(|r| r.iter().map(|(i, _)| *i))
            .collect();
        if let (Some(&first), Some(&last)) = (calls_of.iter().min(), calls_of.iter().max()) {
            delivered.push(Delivered {
                t,
                sent,
                returned,
                first,
                last,
            });
        }
    }
    // T1's COMMIT returned before T2 sent its COMMIT: every version of T1 came by the call that
    // first delivered T2.
    delivered.sort_by_key(|d| d.returned);
    let mut prefix_max: Vec<usize> = Vec::with_capacity(delivered.len());
    for (i, d) in delivered.iter().enumerate() {
        let best = match prefix_max.last() {
            Some(&b) if delivered[b].last >= d.last => b,
            _ => i,
        };
        prefix_max.push(best);
    }
    let mut order_violations = 0;
    for d2 in &delivered {
        let before = delivered.partition_point(|d1| d1.returned < d2.sent);
        if before == 0 {
            continue;
        }
        let d1 = &delivered[prefix_max[before - 1]];
        if d1.last > d2.first {
            order_violations += 1;
            if order_violations <= 5 {
                v.push(format!(
                    "commit order: {}'s transaction {} returned from COMMIT {:?} before {}'s transaction {} sent its COMMIT, but its versions came by call {} and the other's first by call {}",
                    d1.t.who,
                    d1.t.xid,
                    d2.sent - d1.returned,
                    d2.t.who,
                    d2.t.xid,
                    d1.last,
                    d2.first
                ));
            }
        }
    }
    if order_violations > 5 {
        v.push(format!(
            "... {order_violations} commit order violations in all"
        ));
    }
    // And by the calls themselves: a transaction whose COMMIT returned before a call was sent is
    // delivered by that call or an earlier one; none is delivered by a call that returned before
    // its COMMIT was sent.
    for d in &delivered {
        let next = calls.partition_point(|c| c.sent <= d.returned);
        if next < calls.len() && d.last > next {
            v.push(format!(
                "{}'s transaction {} returned from COMMIT before call {next} was sent, but its versions came by call {}",
                d.t.who, d.t.xid, d.last
            ));
        }
        if calls[d.first].returned < d.sent {
            v.push(format!(
                "{}'s transaction {} was delivered by call {}, which returned before its COMMIT was sent",
                d.t.who, d.t.xid, d.first
            ));
        }
    }
    (v, rolled_back_versions)
}

#[test]
fn the_feed_delivers_every_committed_version_once_in_commit_order() {
    let name = "corrections_feed";
    let seed = seed(name);
    let started = Instant::now();
    let cluster = Cluster::start(name, &["deadlock_timeout = 100ms"]);
    create_db(&cluster, &feed_setup());
    let mut su = cluster.connect(DB);
    let hist = history_table(&mut su, FEED);
    let run = Duration::from_secs(env_num("FAULTS_FEED_SECS", 20));

    let sh = Shared::new(WRITERS);
    sh.watermark.store(T0, Ordering::SeqCst);
    let done = AtomicBool::new(false);
    let stop_listening = AtomicBool::new(false);
    let (ready_tx, ready_rx) = mpsc::channel();
    let (writers, advancer, calls, notes, errors) = thread::scope(|s| {
        let (cluster, sh, hist, done, stop) = (&cluster, &sh, &hist, &done, &stop_listening);
        let listener = s.spawn(move || {
            guarded(sh, "listener", || {
                listen(cluster, sh, stop, Duration::from_millis(1500), ready_tx)
            })
        });
        let _ = ready_rx.recv_timeout(Duration::from_secs(30));
        let until = Instant::now() + run;
        let writers: Vec<_> = (0..WRITERS)
            .map(|i| {
                s.spawn(move || {
                    let r = guarded(sh, &format!("writer {i}"), || {
                        feed_writer(cluster, sh, hist, i, seed, until)
                    });
                    sh.workers_left.fetch_sub(1, Ordering::SeqCst);
                    r
                })
            })
            .collect();
        let advancer =
            s.spawn(move || guarded(sh, "advancer", || feed_advancer(cluster, sh, hist, seed)));
        let consumer =
            s.spawn(move || guarded(sh, "consumer", || feed_consumer(cluster, sh, done, seed)));
        let mut errors = Vec::new();
        let writers: Vec<WriterOut> = writers
            .into_iter()
            .enumerate()
            .filter_map(|(i, h)| join(h, &format!("writer {i}"), &mut errors))
            .collect();
        let advancer = join(advancer, "advancer", &mut errors);
        done.store(true, Ordering::SeqCst);
        let calls = join(consumer, "consumer", &mut errors);
        stop.store(true, Ordering::SeqCst);
        let notes = join(listener, "listener", &mut errors);
        (writers, advancer, calls, notes, errors)
    });
    sh.assert_clean(name, seed, errors);
    let (advancer, calls, notes) = (advancer.unwrap(), calls.unwrap(), notes.unwrap());
    let mut txs: Vec<Tx> = Vec::new();
    let (mut deadlocks, mut statements, mut rows) = (0, 0, 0);
    for w in writers {
        deadlocks += w.deadlocks;
        statements += w.statements;
        rows += w.rows;
        txs.extend(w.txs);
    }
    txs.extend(advancer);

    let mut v: Vec<String> = Vec::new();

    // History as committed, with the writing transaction of each version.
    let history = read_history(&mut su, &hist);
    let view_rows: i64 = su
        .query_one("SELECT count(*) FROM feed_history", &[])
        .unwrap()
        .get(0);
    if view_rows != history.len() as i64 {
        v.push(format!(
            "feed_history has {view_rows} rows, {hist} {}",
            history.len()
        ));
    }
    v.extend(check_attribution(&history, &txs));
    let (delivery, rolled_back_versions) = check_delivery(&history, &txs, &calls);
    v.extend(delivery);

    // Notifications: per session, one per statement that wrote versions, in commit order.
    let mut expected: BTreeMap<i32, Vec<Announced>> = BTreeMap::new();
    let mut committed: Vec<&Tx> = txs.iter().filter(|t| t.commit.is_some()).collect();
    committed.sort_by_key(|t| t.commit.unwrap().1);
    for t in &committed {
        if !t.announced.is_empty() {
            expected
                .entry(t.pid)
                .or_default()
                .extend(t.announced.iter().cloned());
        }
    }
    let zero_notes = check_notes(&mut su, FEED, &notes, &expected, &mut v);

    let count = |f: &dyn Fn(&Tx) -> bool| txs.iter().filter(|t| f(t)).count();
    let late_versions = history.values().filter(|(w, _)| w.kind == "late").count();
    let main_versions = history.values().filter(|(w, _)| w.kind == "main").count();
    let busy_calls = calls.iter().filter(|c| !c.rows.is_empty()).count();
    let many_tx_calls = calls
        .iter()
        .filter(|c| {
            c.rows
                .iter()
                .filter_map(|g| history.get(&g.v.id).map(|(_, x)| x))
                .collect::<BTreeSet<_>>()
                .len()
                > 1
        })
        .count();
    let long = count(&|t: &Tx| t.commit.is_some() && t.held >= Duration::from_millis(700));
    let rolled_back_writing = count(&|t: &Tx| t.commit.is_none() && !t.written.is_empty());
    eprintln!(
        "  {} transactions ({} committed, {} rolled back of which {} had written versions, {deadlocks} lost a deadlock; {long} committed after 700 ms or more open); {statements} ingest statements, {rows} rows",
        txs.len(),
        count(&|t: &Tx| t.commit.is_some()),
        count(&|t: &Tx| t.commit.is_none()),
        rolled_back_writing
    );
    eprintln!(
        "  history: {} versions ({main_versions} main, {late_versions} late); {rolled_back_versions} versions rolled back; {} calls of changes ({busy_calls} with rows, {many_tx_calls} with versions of several transactions); {} notifications ({zero_notes} of zero versions)",
        history.len(),
        calls.len(),
        notes.len()
    );
    assert!(
        v.is_empty(),
        "the feed (seed {seed}) broke the contract:\n{}",
        v.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
    assert!(
        late_versions > 50
            && main_versions > 5
            && rolled_back_writing > 0
            && long > 0
            && many_tx_calls > 0,
        "the run did not exercise enough: {late_versions} late and {main_versions} main versions, {rolled_back_writing} rolled-back transactions with versions, {long} long transactions, {many_tx_calls} calls with several transactions"
    );
    eprintln!(
        "[{name}] passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Concurrent restatements
// ---------------------------------------------------------------------------------------------

const FIX: &str = "fix";

const FIX_SETUP: &str = "
SELECT eventtime.create_pipeline(
    name => 'fix', source => 'events', event_time => 'ts', key => ARRAY['store'],
    event_id => 'event_id', window_size => interval '1 hour', allowed_lateness => interval '1 hour',
    aggregates => 'count(*) AS n, sum(amount) AS total, avg(amount) AS mean, max(amount) AS hi');
";

/// A row of `restate`: key (JSON text), window start, version, rows folded.
type Restated = (String, String, i32, i64);

/// One `restate` call: the session, what it returned, whether its transaction committed.
#[derive(Debug)]
struct RestateCall {
    who: &'static str,
    pid: i32,
    rows: Vec<Restated>,
    committed: bool,
}

/// The restatement calls of a test, the refused rows each folded and the versions seen so far:
/// what [`check_restated`] checks the pipeline against, call after call.
#[derive(Default)]
struct Restates {
    calls: Vec<RestateCall>,
    folded: HashMap<i64, i32>,
    seen: BTreeSet<Vec<Option<String>>>,
}

impl Restates {
    fn push(&mut self, who: &'static str, pid: i32, rows: Vec<Restated>, committed: bool) {
        self.calls.push(RestateCall {
            who,
            pid,
            rows,
            committed,
        });
    }

    /// [`check_restated`] of window `ws` after the calls so far.
    fn check(&mut self, su: &mut Client, ws: &str, all_folded: bool) -> Vec<String> {
        check_restated(
            su,
            ws,
            &self.calls,
            all_folded,
            &mut self.folded,
            &mut self.seen,
        )
    }
}

fn restate_sql(from: i64, to: Option<i64>, key: Option<&str>) -> String {
    format!(
        "SELECT key::text, window_start::text, version, rows_folded FROM eventtime.restate('{FIX}', '{}'{}{}) ORDER BY 1, 2",
        ts_text(from),
        to.map(|t| format!(", window_to => '{}'", ts_text(t)))
            .unwrap_or_default(),
        key.map(|k| format!(", key => '{k}'")).unwrap_or_default()
    )
}

fn restated<C: GenericClient>(c: &mut C, sql: &str) -> Vec<Restated> {
    c.query(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {}", describe(&e)))
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect()
}

/// Runs `sql` on `c` in a thread; the result comes back on the channel.
fn spawn_restate(
    mut c: Client,
    sql: String,
) -> (
    mpsc::Receiver<Result<Vec<Restated>, String>>,
    thread::JoinHandle<Client>,
) {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        let r = c
            .query(&sql, &[])
            .map(|rows| {
                rows.iter()
                    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                    .collect()
            })
            .map_err(|e| describe(&e));
        let _ = tx.send(r);
        c
    });
    (rx, h)
}

/// Inserts rows `(event_id, store, amount, event time)` into `events` in one statement.
fn ingest<C: GenericClient>(c: &mut C, next_delivery: &AtomicI64, rows: &[(i64, &str, &str, i64)]) {
    let values: Vec<Values> = rows
        .iter()
        .map(|(id, store, amount, ts)| {
            vec![
                Some(next_delivery.fetch_add(1, Ordering::SeqCst).to_string()),
                Some("0".into()),
                Some(id.to_string()),
                Some(store.to_string()),
                Some("r0".into()),
                Some(amount.to_string()),
                Some(ts_text(*ts)),
            ]
        })
        .collect();
    let sql = insert_sql(&events_table(FIX), &values);
    c.batch_execute(&sql)
        .unwrap_or_else(|e| panic!("{sql}\n=> {}", describe(&e)));
}

fn key(store: &str) -> String {
    format!("{{\"store\": \"{store}\"}}")
}

fn row(store: &str, ws: &str, version: i32, folded: i64) -> Restated {
    (key(store), ws.to_string(), version, folded)
}

/// Every check of the restatement contract on window `ws` (as the superuser): no refused row
/// whose fold changed (`restated_in` is set once, recorded in `folded`) and, if `all_folded`,
/// none left; each call's row names a restatement version that folded exactly `rows_folded`
/// refused rows of its key, and every folded row is counted by one committed call; versions
/// gapless; every restatement's value equals a `GROUP BY` over the window's accepted rows and
/// the refused rows folded at or before it; versions seen before never change.
fn check_restated(
    su: &mut Client,
    ws: &str,
    calls: &[RestateCall],
    all_folded: bool,
    folded: &mut HashMap<i64, i32>,
    seen: &mut BTreeSet<Vec<Option<String>>>,
) -> Vec<String> {
    let mut v = Vec::new();
    let refused: Vec<(i64, String, Option<i32>)> = su
        .query(
            "SELECT event_id, jsonb_build_object('store', store)::text, restated_in FROM fix_refused
             WHERE window_start = $1::text::timestamptz ORDER BY event_id",
            &[&ws],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let mut by_version: HashMap<(String, i32), i64> = HashMap::new();
    let mut ids = BTreeSet::new();
    for (id, key, restated_in) in &refused {
        if !ids.insert(*id) {
            v.push(format!(
                "event {id} is refused twice in window {ws}: a redelivery is a duplicate"
            ));
        }
        match restated_in {
            Some(r) => {
                *by_version.entry((key.clone(), *r)).or_default() += 1;
                if let Some(before) = folded.insert(*id, *r) {
                    if before != *r {
                        v.push(format!(
                            "refused event {id} ({key}, {ws}): restated_in was {before}, is now {r}"
                        ));
                    }
                }
            }
            None => {
                if all_folded {
                    v.push(format!("refused event {id} ({key}, {ws}) was never folded"));
                }
                if let Some(before) = folded.get(id) {
                    v.push(format!(
                        "refused event {id} ({key}, {ws}): restated_in was {before}, is now NULL"
                    ));
                }
            }
        }
    }
    let history: BTreeMap<(String, i32), String> = su
        .query(
            "SELECT jsonb_build_object('store', store)::text, version, kind FROM fix_history
             WHERE window_start = $1::text::timestamptz",
            &[&ws],
        )
        .unwrap()
        .iter()
        .map(|r| ((r.get(0), r.get(1)), r.get(2)))
        .collect();
    let mut counted: HashMap<(String, i32), i64> = HashMap::new();
    for c in calls.iter().filter(|c| c.committed) {
        for (key, _, version, n) in c.rows.iter().filter(|r| r.1 == ws) {
            if counted.insert((key.clone(), *version), *n).is_some() {
                v.push(format!(
                    "two committed restatements returned version {version} of {key} {ws}"
                ));
            }
            let folded_there = by_version
                .get(&(key.clone(), *version))
                .copied()
                .unwrap_or(0);
            if folded_there != *n || *n <= 0 {
                v.push(format!(
                    "{} returned version {version} of {key} {ws} with {n} rows folded; fix_refused has {folded_there} rows restated_in it",
                    c.who
                ));
            }
            if history.get(&(key.clone(), *version)).map(|s| s.as_str()) != Some("restatement") {
                v.push(format!(
                    "{} returned version {version} of {key} {ws}; history has {:?}",
                    c.who,
                    history.get(&(key.clone(), *version))
                ));
            }
        }
    }
    for ((key, version), n) in &by_version {
        if !counted.contains_key(&(key.clone(), *version)) {
            v.push(format!(
                "{n} refused rows of {key} {ws} are restated_in version {version}, which no committed restate call returned"
            ));
        }
    }
    for ((key, version), kind) in &history {
        if kind == "restatement" && !counted.contains_key(&(key.clone(), *version)) {
            v.push(format!(
                "history has restatement version {version} of {key} {ws}, which no committed restate call returned"
            ));
        }
    }
    // Gapless.
    let mut per_key: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (key, version) in history.keys() {
        per_key.entry(key).or_default().push(*version);
    }
    for (key, versions) in per_key {
        if versions != (1..=versions.len() as i32).collect::<Vec<_>>() {
            v.push(format!(
                "versions of {key} {ws} are not gapless: {versions:?}"
            ));
        }
    }
    // Values: a GROUP BY over the accepted rows (source rows, each event id once, that were not
    // refused) and the refused rows folded at or before the version.
    let wrong = text_rows(
        su,
        &format!(
            "SELECT h.store, h.version::text, h.n::text, h.total::text, h.mean::text, h.hi::text,
                    e.n::text, e.total::text, e.mean::text, e.hi::text
             FROM fix_history h
             CROSS JOIN LATERAL (
                 SELECT count(*) AS n, sum(s.amount) AS total, avg(s.amount) AS mean, max(s.amount) AS hi
                 FROM (SELECT DISTINCT ON (event_id) * FROM events
                       WHERE ts >= h.window_start AND ts < h.window_end AND store IS NOT DISTINCT FROM h.store
                       ORDER BY event_id, delivery_id) s
                 LEFT JOIN fix_refused r ON r.event_id = s.event_id AND r.window_start = h.window_start
                 WHERE r.event_id IS NULL OR r.restated_in <= h.version) e
             WHERE h.window_start = {} AND h.kind = 'restatement'
               AND (h.n::text, h.total::text, h.mean::text, h.hi::text)
                   IS DISTINCT FROM (e.n::text, e.total::text, e.mean::text, e.hi::text)",
            pg_eventtime_faults::db::lit(ws) + "::timestamptz"
        ),
    )
    .unwrap_or_else(|e| panic!("values: {}", describe(&e)));
    for r in wrong {
        v.push(format!(
            "restatement of {} {ws} version {}: n, total, mean, hi = {}; GROUP BY over its accepted and folded rows = {}",
            r[0].as_deref().unwrap_or("∅"),
            r[1].as_deref().unwrap_or("∅"),
            pg_eventtime_faults::db::render(&r[2..6]),
            pg_eventtime_faults::db::render(&r[6..10])
        ));
    }
    // Versions never change.
    let now: BTreeSet<Vec<Option<String>>> = text_rows(
        su,
        &format!(
            "SELECT window_start::text, store, version::text, kind, n::text, total::text, mean::text,
                    hi::text, sealed::text, watermark::text, fired_at::text
             FROM fix_history WHERE window_start = {}::timestamptz",
            pg_eventtime_faults::db::lit(ws)
        ),
    )
    .unwrap()
    .into_iter()
    .collect();
    for old in seen.iter().filter(|r| r[0].as_deref() == Some(ws)) {
        if !now.contains(old) {
            v.push(format!(
                "a version changed or went away: {}",
                pg_eventtime_faults::db::render(old)
            ));
        }
    }
    seen.extend(now);
    v
}

#[test]
fn concurrent_restatements_fold_each_refused_row_once() {
    let name = "corrections_restate";
    let started = Instant::now();
    let cluster = Cluster::start(name, &["deadlock_timeout = 100ms"]);
    create_db(&cluster, &format!("{EVENTS_TABLE}{FIX_SETUP}"));
    let mut su = cluster.connect(DB);
    let owner = || {
        let mut c = cluster.connect_as(DB, OWNER);
        exec(
            &mut c,
            "SET lock_timeout = '30s'; SET statement_timeout = '60s'",
        );
        c
    };
    let d = AtomicI64::new(1);
    let mut a = owner();
    let at = |h: i64, m: i64| T0 + h * HOUR + m * MINUTE;
    let w1 = at(10, 0);
    let w2 = at(11, 0);
    // Window starts as PostgreSQL prints them (TimeZone UTC), as `restate` returns them.
    let pg_text = |c: &mut Client, t: i64| -> String {
        c.query_one("SELECT $1::text::timestamptz::text", &[&ts_text(t)])
            .unwrap()
            .get(0)
    };
    let (w1s, w2s) = (pg_text(&mut su, w1), pg_text(&mut su, w2));
    let advance = |c: &mut Client, to: i64| {
        exec(
            c,
            &format!(
                "SELECT eventtime.advance_watermark('{FIX}', '{}')",
                ts_text(to)
            ),
        )
    };

    // W1 = [10:00, 11:00) and W2 = [11:00, 12:00): version 1 by the advance to 11:30, a late
    // version, both purged by 13:30 (1 hour lateness).
    ingest(
        &mut a,
        &d,
        &[
            (1, "s1", "10.00", at(10, 5)),
            (2, "s1", "20.50", at(10, 10)),
            (3, "s1", "5", at(11, 0) - 1),
            (4, "s2", "7.25", at(10, 0)),
            (5, "s2", "1", at(10, 30)),
            (6, "s1", "3", at(11, 1)),
            (7, "s1", "4", at(11, 30)),
            (8, "s2", "9.99", at(11, 45)),
        ],
    );
    advance(&mut a, at(11, 30));
    ingest(&mut a, &d, &[(9, "s1", "2.5", at(10, 20))]);
    advance(&mut a, at(12, 30));
    ingest(&mut a, &d, &[(10, "s2", "6", at(11, 50))]);
    advance(&mut a, at(13, 30));
    let wm_text = payload_ts(at(13, 30));

    let stop = AtomicBool::new(false);
    let sh = Shared::new(0);
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut log = Restates::default();
    let mut v: Vec<String> = Vec::new();
    let notes = thread::scope(|s| {
        let listener =
            s.spawn(|| listen(&cluster, &sh, &stop, Duration::from_millis(500), ready_tx));
        // Stops the listener also when a check below panics, so that the scope can end.
        let _stop = StopOnDrop(&stop);
        ready_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the listener listens");
        v.extend(log.check(&mut su, &w1s, false));
        v.extend(log.check(&mut su, &w2s, false));
        let mut b = owner();
        let (a_pid, b_pid) = (backend_pid(&mut a), backend_pid(&mut b));

        // Round 1, W1: refused rows (s3 has never published in W1), and a redelivery of one of
        // them, a duplicate. A restates in an open transaction; B's restatement waits for it,
        // then finds nothing new to fold.
        ingest(
            &mut a,
            &d,
            &[
                (11, "s1", "11", at(10, 15)),
                (12, "s1", "12", at(10, 45)),
                (13, "s2", "13", at(10, 1)),
                (14, "s3", "14", at(10, 2)),
            ],
        );
        ingest(&mut a, &d, &[(11, "s1", "11", at(10, 15))]);
        exec(&mut a, "BEGIN");
        let got = restated(&mut a, &restate_sql(w1, None, None));
        let want = vec![
            row("s1", &w1s, 3, 2),
            row("s2", &w1s, 2, 1),
            row("s3", &w1s, 1, 1),
        ];
        assert_eq!(got, want, "round 1: the first restatement of W1");
        log.push("round 1, A", a_pid, got, true);
        let (b_rx, b_h) = spawn_restate(b, restate_sql(w1, None, None));
        let waits = wait_for_lock(&mut su, b_pid, Duration::from_secs(20));
        assert!(
            waits.is_some(),
            "round 1: B's restatement did not wait for A's open transaction"
        );
        thread::sleep(Duration::from_millis(200));
        assert!(
            b_rx.try_recv().is_err(),
            "round 1: B's restatement returned while A's transaction was open"
        );
        eprintln!("  round 1: B waits on {}", waits.unwrap());
        exec(&mut a, "COMMIT");
        let got = b_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("B's restatement returns once A commits")
            .unwrap_or_else(|e| panic!("round 1, B: {e}"));
        b = b_h.join().unwrap();
        assert_eq!(
            got,
            vec![],
            "round 1: B, after A folded everything, folds nothing"
        );
        log.push("round 1, B", b_pid, got, true);
        v.extend(log.check(&mut su, &w1s, true));

        // Round 2, W2: refusals before A, while A holds its transaction (committed before B is
        // sent: B must fold them), while B waits (B or the next call folds them), and in a
        // transaction that commits only after B (the next call folds them).
        ingest(
            &mut a,
            &d,
            &[
                (15, "s1", "15", at(11, 10)),
                (16, "s2", "16", at(11, 20)),
                (17, "s2", "17", at(12, 0) - 1),
            ],
        );
        exec(&mut a, "BEGIN");
        let got = restated(&mut a, &restate_sql(w2, None, None));
        assert_eq!(
            got,
            vec![row("s1", &w2s, 2, 1), row("s2", &w2s, 3, 2)],
            "round 2: A"
        );
        log.push("round 2, A", a_pid, got, true);
        let mut c = owner();
        ingest(
            &mut c,
            &d,
            &[(18, "s1", "18", at(11, 5)), (19, "s4", "19", at(11, 6))],
        );
        let (b_rx, b_h) = spawn_restate(b, restate_sql(w2, None, None));
        let waits = wait_for_lock(&mut su, b_pid, Duration::from_secs(20));
        assert!(
            waits.is_some(),
            "round 2: B's restatement did not wait for A's open transaction"
        );
        ingest(&mut c, &d, &[(20, "s2", "20", at(11, 7))]);
        let mut dd = owner();
        exec(&mut dd, "BEGIN");
        ingest(&mut dd, &d, &[(21, "s1", "21", at(11, 8))]);
        thread::sleep(Duration::from_millis(100));
        assert!(
            b_rx.try_recv().is_err(),
            "round 2: B's restatement returned while A's transaction was open"
        );
        exec(&mut a, "COMMIT");
        let got = b_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("B's restatement returns once A commits")
            .unwrap_or_else(|e| panic!("round 2, B: {e}"));
        b = b_h.join().unwrap();
        // Events 18 and 19 committed before B was sent; event 20 while it waited; 21 after.
        let s2_by_b = got.iter().any(|r| r.0 == key("s2"));
        let mut want = vec![row("s1", &w2s, 3, 1), row("s4", &w2s, 1, 1)];
        if s2_by_b {
            want.insert(1, row("s2", &w2s, 4, 1));
        }
        assert_eq!(got, want, "round 2: B folds what was refused after A's snapshot (events 18, 19 and perhaps 20), not the uncommitted 21");
        log.push("round 2, B", b_pid, got, true);
        v.extend(log.check(&mut su, &w2s, false));
        exec(&mut dd, "COMMIT");
        let got = restated(&mut a, &restate_sql(w2, None, None));
        let mut want = vec![row("s1", &w2s, 4, 1)];
        if !s2_by_b {
            want.push(row("s2", &w2s, 4, 1));
        }
        assert_eq!(got, want, "round 2: the next call folds the rest");
        log.push("round 2, after", a_pid, got, true);
        // A restatement that rolls back folds nothing: the next one folds the same row.
        ingest(&mut c, &d, &[(22, "s3", "22", at(11, 30))]);
        exec(&mut b, "BEGIN");
        let got = restated(&mut b, &restate_sql(w2, None, None));
        assert_eq!(
            got,
            vec![row("s3", &w2s, 1, 1)],
            "round 2: a restatement that will roll back"
        );
        log.push("round 2, rolled back", b_pid, got, false);
        exec(&mut b, "ROLLBACK");
        let got = restated(&mut a, &restate_sql(w2, None, None));
        assert_eq!(
            got,
            vec![row("s3", &w2s, 1, 1)],
            "round 2: after the rollback"
        );
        log.push("round 2, after the rollback", a_pid, got, true);
        let got = restated(&mut b, &restate_sql(w2, None, None));
        assert_eq!(got, vec![], "round 2: nothing left");
        log.push("round 2, last", b_pid, got, true);
        v.extend(log.check(&mut su, &w2s, true));

        // Round 3, W1 again, on top of restatements: A restates one key by range and key filter
        // in an open transaction while a refusal of another key commits; B, waiting, folds that
        // other key only.
        ingest(
            &mut c,
            &d,
            &[(23, "s1", "23", at(10, 50)), (24, "s2", "24", at(10, 51))],
        );
        exec(&mut a, "BEGIN");
        let got = restated(
            &mut a,
            &restate_sql(w1, Some(w2), Some(r#"{"store": "s1"}"#)),
        );
        assert_eq!(got, vec![row("s1", &w1s, 4, 1)], "round 3: A, key s1");
        log.push("round 3, A", a_pid, got, true);
        ingest(&mut c, &d, &[(25, "s2", "25", at(10, 52))]);
        let (b_rx, b_h) = spawn_restate(b, restate_sql(w1, None, None));
        let waits = wait_for_lock(&mut su, b_pid, Duration::from_secs(20));
        assert!(
            waits.is_some(),
            "round 3: B's restatement did not wait for A's open transaction"
        );
        exec(&mut a, "COMMIT");
        let got = b_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("B's restatement returns once A commits")
            .unwrap_or_else(|e| panic!("round 3, B: {e}"));
        let _b = b_h.join().unwrap();
        assert_eq!(
            got,
            vec![row("s2", &w1s, 3, 2)],
            "round 3: B folds the two s2 rows"
        );
        log.push("round 3, B", b_pid, got, true);
        v.extend(log.check(&mut su, &w1s, true));
        v.extend(log.check(&mut su, &w2s, true));

        stop.store(true, Ordering::SeqCst);
        listener.join().unwrap()
    });
    let notes = notes.unwrap_or_else(|e| panic!("listener: {e}"));
    // One notification per committed call that restated, from its session, in order.
    let mut expected: BTreeMap<i32, Vec<Announced>> = BTreeMap::new();
    for c in log
        .calls
        .iter()
        .filter(|c| c.committed && !c.rows.is_empty())
    {
        expected.entry(c.pid).or_default().push(Announced {
            versions: [0, 0, c.rows.len() as i64],
            watermark: Some(wm_text.clone()),
        });
    }
    let zero = check_notes(&mut su, FIX, &notes, &expected, &mut v);
    assert!(
        v.is_empty(),
        "restatements broke the contract:\n{}",
        v.join("\n")
    );
    eprintln!(
        "  {} restate calls, {} refused rows folded, {} notifications ({zero} of zero versions)",
        log.calls.len(),
        log.folded.len(),
        notes.len()
    );
    eprintln!(
        "[{name}] passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
