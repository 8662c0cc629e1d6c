//! (g) and (h): writers of one window (SPEC §6, *writers do not wait for each other*).
//!
//! (g) measures throughput: several connections, each its own thread, send single-row `INSERT`
//! transactions (autocommit, one prepared statement per connection) into one window of an unkeyed
//! tumbling pipeline for a fixed time, against the same connections on the table alone, the sides
//! taking turns. Every writer of the pipeline side touches the same window, so a design whose
//! writers serialize on a shared row (the window's state) shows here as a throughput well below
//! the plain side's. Afterwards the run checks that nothing was lost or counted twice: the state
//! of the window sums to the rows inserted, and after `advance_watermark('infinity')` its
//! `_latest` count does too.
//!
//! (h) is the direct check: connection A inserts a row of a window in a transaction it keeps
//! open; connection B then inserts another row of the same window, autocommit, under a
//! `statement_timeout`. B must finish while A is still open. Session pipelines are left out: their
//! writers of one key take turns by design (SPEC §7).

use crate::{
    advance, connect, describe, exec, ledger_table, median, ms, num, reset, scalar, settle,
    state_table, Measure, Opts, Res, Row, Sizes, Target, DB,
};
use postgres::Client;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// (g)'s and (h)'s unkeyed pipeline: 1-day windows, an event id, the two aggregates.
const UNKEYED_PIPELINE: &str = "SELECT eventtime.create_pipeline(name => 'bench', source => 'ev', \
     event_time => 'at', event_id => 'id', window_size => interval '1 day', \
     allowed_lateness => interval '1 day', aggregates => 'count(*) AS n, sum(amount) AS total')";

/// The one window every row of (g) and (h) goes to.
const WINDOW: &str = "2026-01-01 00:00+00";

/// Every row of (g) and (h): its id, key, amount in cents and second of [`WINDOW`] are
/// parameters, so a statement costs the same on both sides and the client formats nothing.
const INSERT: &str =
    "INSERT INTO ev (id, k, amount, at) VALUES ($1, $2, $3::bigint::numeric / 100, \
     timestamptz '2026-01-01 00:00+00' + $4::int * interval '1 second')";

/// (g)'s floor: [`INSERT`] plus the writes the pipeline makes for the row, by hand in the same
/// statement: its id into a copy of the pipeline's ledger (`ON CONFLICT DO NOTHING`, as the
/// pipeline dedups), and its partials appended to a copy of the pipeline's state as a row of
/// their own (what lets writers of one window never wait for each other).
const FLOOR_INSERT: &str = "WITH v AS (SELECT $1::bigint AS id, $2::int AS k, $3::bigint::numeric / 100 AS amount, \
       timestamptz '2026-01-01 00:00+00' + $4::int * interval '1 second' AS at), \
     f AS (INSERT INTO g_ids (window_start, event_id) SELECT timestamptz '2026-01-01 00:00+00', id FROM v \
       ON CONFLICT DO NOTHING RETURNING 1), \
     s AS (INSERT INTO g_state (window_start, window_end, _et_n, _et_a0, _et_a1) \
       SELECT timestamptz '2026-01-01 00:00+00', timestamptz '2026-01-02 00:00+00', 1, 1, amount FROM v \
       WHERE EXISTS (SELECT FROM f)) \
     INSERT INTO ev (id, k, amount, at) SELECT id, k, amount, at FROM v";

/// (g)'s floor in a trigger: [`FLOOR_INSERT`]'s writes made after [`INSERT`] by a statement
/// trigger in PL/pgSQL from its transition table, in one statement, for the one row of each
/// statement that (g) sends. That is the least a design whose trigger writes with SQL pays: the
/// transition table, the after-trigger queue, the trigger's call and the executor of a second
/// statement, with none of the pipeline's watermark, window, owner switch or counts.
const FLOOR_TRIGGER: &str = "\
    CREATE OR REPLACE FUNCTION g_ingest() RETURNS trigger LANGUAGE plpgsql AS $f$ \
    BEGIN \
      WITH f AS (INSERT INTO g_ids (window_start, event_id) \
                 SELECT timestamptz '2026-01-01 00:00+00', id FROM new_rows ON CONFLICT DO NOTHING RETURNING 1) \
      INSERT INTO g_state (window_start, window_end, _et_n, _et_a0, _et_a1) \
      SELECT timestamptz '2026-01-01 00:00+00', timestamptz '2026-01-02 00:00+00', 1, 1, amount FROM new_rows \
      WHERE EXISTS (SELECT FROM f); \
      RETURN NULL; \
    END $f$; \
    CREATE TRIGGER g_ingest AFTER INSERT ON ev REFERENCING NEW TABLE AS new_rows \
      FOR EACH STATEMENT EXECUTE FUNCTION g_ingest()";

/// The sides of (g), in the order they take turns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hot {
    Plain,
    Floor,
    /// The floor's writes made by [`FLOOR_TRIGGER`].
    FloorTrigger,
    Pipeline,
}

/// Ids of writer `w`'s rows start at `w * ID_STRIDE + 1`: unique across writers.
const ID_STRIDE: i64 = 1_000_000_000;

/// The `application_name` of (g)'s writers, by which the sampler finds their backends.
const WRITER_APP: &str = "eventtime-bench writer";

/// Opens a connection to the benchmark's database with the options of the main connection.
fn writer(opts: &Opts) -> Res<Client> {
    let mut c = connect(DB)?;
    exec(&mut c, &format!("SET application_name = '{WRITER_APP}'"))?;
    if opts.async_commit {
        exec(&mut c, "SET synchronous_commit = off")?;
    }
    Ok(c)
}

/// How often (g)'s sampler looks at the writers' backends.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// Where (g)'s writers' backends were, sampled from `pg_stat_activity`: `wait_event_type:wait_event`,
/// `running` (active and waiting on nothing PostgreSQL instruments: on the CPU or ready to run),
/// with the number of backend samples of each. `Lock:transactionid` and `Lock:tuple` are a
/// writer waiting for another transaction to end (a row it must lock or a unique entry it must
/// check), what SPEC §6 forbids; `Lock:extend` is the extension of a table or index by a page,
/// which plain inserts wait for too. `Client:ClientRead` is a backend waiting for the next
/// statement from its client, `IO:WALSync`/`LWLock:WALWrite` the commit's flush.
type Waits = BTreeMap<String, i64>;

fn sample(c: &mut Client, waits: &mut Waits) -> Res<()> {
    let rows = c
        .query(
            "SELECT coalesce(wait_event_type || ':' || wait_event, \
                             CASE WHEN state = 'active' THEN 'running' ELSE coalesce(state, '?') END), count(*) \
             FROM pg_stat_activity WHERE application_name = $1 GROUP BY 1",
            &[&WRITER_APP],
        )
        .map_err(|e| describe(&e))?;
    for r in rows {
        *waits.entry(r.get(0)).or_default() += r.get::<_, i64>(1);
    }
    Ok(())
}

/// The samples as shares, the largest first (those of at least 1%, and every `Lock:*`), then the
/// share of waits for another transaction.
fn show_waits(w: &Waits) -> String {
    let total: i64 = w.values().sum::<i64>().max(1);
    let mut v: Vec<(&String, &i64)> = w.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let pct = |n: i64| 100.0 * n as f64 / total as f64;
    let mut parts: Vec<String> = v
        .iter()
        .filter(|(k, &n)| pct(n) >= 1.0 || k.starts_with("Lock:"))
        .map(|(k, &n)| format!("{k} {:.1}%", pct(n)))
        .collect();
    let lock: i64 = w
        .iter()
        .filter(|(k, _)| *k == "Lock:transactionid" || *k == "Lock:tuple")
        .map(|(_, n)| n)
        .sum();
    parts.push(format!(
        "waiting for another transaction (`Lock:transactionid`, `Lock:tuple`) {:.1}%",
        pct(lock)
    ));
    format!("{} ({} samples)", parts.join(", "), num(total as usize))
}

/// What one side of (g) did: rows committed and the time from the common start to the last
/// writer's end.
struct HotRun {
    rows: usize,
    elapsed: Duration,
    waits: Waits,
    /// WAL written from the start to the end of the writers (theirs, but for autovacuum's: nothing
    /// else of the benchmark runs meanwhile).
    wal_bytes: i64,
}

impl HotRun {
    fn rate(&self) -> f64 {
        self.rows as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// One side of (g): `g_conns` writers, each on its own connection and thread, start together
/// and insert single rows until `g_secs` have passed, while a sampler watches their backends.
fn hot_once(c: &mut Client, opts: &Opts, s: &Sizes, side: Hot) -> Res<HotRun> {
    reset(c, false)?;
    if side != Hot::Plain {
        exec(c, UNKEYED_PIPELINE)?;
    }
    let floor = matches!(side, Hot::Floor | Hot::FloorTrigger);
    if floor {
        // The floor's tables are copies of the pipeline's (columns, defaults, indexes; the fill
        // factor set by hand), made from a pipeline created for the purpose and dropped.
        let (ids, state) = (ledger_table(c)?, state_table(c)?);
        exec(
            c,
            &format!(
                "CREATE TABLE g_ids (LIKE {ids} INCLUDING ALL); \
                 CREATE TABLE g_state (LIKE {state} INCLUDING ALL) WITH (fillfactor = 70); \
                 SELECT eventtime.drop_pipeline('bench')"
            ),
        )?;
        if side == Hot::FloorTrigger {
            exec(c, FLOOR_TRIGGER)?;
        }
    }
    let pipeline = side == Hot::Pipeline;
    settle(c)?;
    // Connections and statements are made before any thread starts, so that no writer can fail
    // while the others wait at the barrier.
    let mut writers = Vec::with_capacity(s.g_conns);
    for _ in 0..s.g_conns {
        let mut w = writer(opts)?;
        let sql = if side == Hot::Floor {
            FLOOR_INSERT
        } else {
            INSERT
        };
        let st = w.prepare(sql).map_err(|e| describe(&e))?;
        writers.push((w, st));
    }
    let mut sampler = connect(DB)?;
    let lsn = "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint";
    let wal_start = scalar(c, lsn)?;
    let barrier = Barrier::new(s.g_conns + 1);
    let done = AtomicBool::new(false);
    let run_for = Duration::from_secs_f64(s.g_secs);
    let (results, waits) = std::thread::scope(|scope| {
        let sampling = scope.spawn(|| -> Res<Waits> {
            let mut waits = Waits::new();
            barrier.wait();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(SAMPLE_EVERY);
                sample(&mut sampler, &mut waits)?;
            }
            Ok(waits)
        });
        let handles: Vec<_> = writers
            .into_iter()
            .enumerate()
            .map(|(i, (mut w, st))| {
                let barrier = &barrier;
                scope.spawn(move || -> Res<(usize, Duration)> {
                    barrier.wait();
                    let start = Instant::now();
                    let mut n = 0usize;
                    while start.elapsed() < run_for {
                        let id = i as i64 * ID_STRIDE + n as i64 + 1;
                        let k = i as i32;
                        let cents = (n as i64 * 7919) % 100_000;
                        let secs = (n % 86_400) as i32;
                        w.execute(&st, &[&id, &k, &cents, &secs])
                            .map_err(|e| format!("writer {i}: {}", describe(&e)))?;
                        n += 1;
                    }
                    Ok((n, start.elapsed()))
                })
            })
            .collect();
        let results: Vec<Res<(usize, Duration)>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a writer panicked".into())))
            .collect();
        done.store(true, Ordering::Relaxed);
        let waits = sampling
            .join()
            .unwrap_or_else(|_| Err("the sampler panicked".into()));
        (results, waits)
    });
    let mut run = HotRun {
        rows: 0,
        elapsed: Duration::ZERO,
        waits: waits?,
        wal_bytes: 0,
    };
    run.wal_bytes = scalar(c, lsn)? - wal_start;
    for r in results {
        let (n, d) = r?;
        run.rows += n;
        run.elapsed = run.elapsed.max(d);
    }
    // Nothing lost, nothing counted twice.
    let rows = run.rows as i64;
    let source = scalar(c, "SELECT count(*) FROM ev")?;
    if source != rows {
        return Err(format!(
            "{source} rows in the source table, the writers committed {rows}"
        ));
    }
    if floor {
        let (in_state, ids) = (
            scalar(c, "SELECT sum(_et_n)::bigint FROM g_state")?,
            scalar(c, "SELECT count(*) FROM g_ids")?,
        );
        if in_state != rows || ids != rows {
            return Err(format!(
                "the floor's state holds {in_state} rows and its ledger {ids} ids, the writers committed {rows}"
            ));
        }
    }
    if pipeline {
        let state = state_table(c)?;
        let in_state = scalar(
            c,
            &format!(
                "SELECT sum(_et_n)::bigint FROM {state} WHERE window_start = timestamptz '{WINDOW}'"
            ),
        )?;
        let windows = scalar(
            c,
            &format!("SELECT count(DISTINCT window_start) FROM {state}"),
        )?;
        if in_state != rows || windows != 1 {
            return Err(format!(
                "the state holds {in_state} rows in {windows} windows, the writers committed {rows} rows into one"
            ));
        }
        advance(c, "infinity")?;
        let latest = scalar(
            c,
            "SELECT CASE WHEN count(*) = 1 THEN max(n) ELSE -count(*) END FROM bench_latest",
        )?;
        if latest != rows {
            return Err(format!(
                "bench_latest says {latest} rows after advance_watermark('infinity') (a negative number: \
                 that many windows), the writers committed {rows} into one window"
            ));
        }
        let (dups, refused) = (
            scalar(
                c,
                "SELECT duplicates::bigint FROM eventtime.pipelines WHERE name = 'bench'",
            )?,
            scalar(
                c,
                "SELECT refused::bigint FROM eventtime.pipelines WHERE name = 'bench'",
            )?,
        );
        if dups != 0 || refused != 0 {
            return Err(format!(
                "{dups} duplicates and {refused} refused rows: every id is new and every row on time"
            ));
        }
    }
    Ok(run)
}

/// (g) hot window: throughput of `g_conns` writers into one window, with and without the pipeline.
/// Returns the table's row, the floor in a trigger's throughput (rows/s), and, per side (with,
/// without, floor, floor in a trigger), where the writers' backends were.
pub(crate) fn workload_g(c: &mut Client, opts: &Opts, s: &Sizes) -> Res<(Row, f64, [String; 4])> {
    println!(
        "(g) {} connections of single-row INSERT transactions into one window of an unkeyed pipeline, {} s per side",
        s.g_conns, s.g_secs
    );
    let mut rates: [Vec<f64>; 4] = Default::default();
    let mut waits: [Waits; 4] = Default::default();
    let mut wal: [(i64, usize); 4] = Default::default();
    for r in 1..=opts.runs {
        let mut line = format!("  (g) run {r}:");
        let sides = [
            (Hot::Plain, "without"),
            (Hot::Floor, "floor"),
            (Hot::FloorTrigger, "floor in a trigger"),
            (Hot::Pipeline, "with"),
        ];
        for (i, (side, name)) in sides.iter().enumerate() {
            let run = hot_once(c, opts, s, *side).map_err(|e| format!("(g), {name}: {e}"))?;
            line += &format!(
                "{} {name} {} rows in {} = {} rows/s",
                if i == 0 { "" } else { "," },
                num(run.rows),
                ms(run.elapsed),
                num(run.rate().round() as usize)
            );
            rates[i].push(run.rate());
            wal[i].0 += run.wal_bytes;
            wal[i].1 += run.rows;
            for (k, n) in run.waits {
                *waits[i].entry(k).or_default() += n;
            }
        }
        println!("{line}");
    }
    // The median of rates, as `median` does for times.
    let med = |v: &[f64]| -> f64 {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let row = Row {
        workload: format!(
            "(g) hot window: {} connections of single-row `INSERT` transactions into one window, {} s",
            s.g_conns, s.g_secs
        ),
        with: Measure::Rate(med(&rates[3])),
        without: Measure::Rate(med(&rates[0])),
        target: Some(Target::AtLeast(0.7)),
        floor: Some(Measure::Rate(med(&rates[1]))),
    };
    let per_row = |(bytes, rows): (i64, usize)| {
        format!(
            "; WAL {} bytes per row",
            num((bytes as f64 / rows.max(1) as f64).round() as usize)
        )
    };
    Ok((
        row,
        med(&rates[2]),
        [
            show_waits(&waits[3]) + &per_row(wal[3]),
            show_waits(&waits[0]) + &per_row(wal[0]),
            show_waits(&waits[1]) + &per_row(wal[1]),
            show_waits(&waits[2]) + &per_row(wal[2]),
        ],
    ))
}

/// The cases of (h).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum HoldCase {
    /// The table alone: what a second writer costs when nothing can make it wait.
    Plain,
    /// An unkeyed tumbling pipeline: every row of the window shares its state.
    Unkeyed,
    /// A keyed tumbling pipeline, both rows of one key.
    HotKey,
}

impl HoldCase {
    pub(crate) fn name(self) -> &'static str {
        match self {
            HoldCase::Plain => "table alone (reference)",
            HoldCase::Unkeyed => "unkeyed tumbling pipeline",
            HoldCase::HotKey => "keyed tumbling pipeline, one hot key",
        }
    }
}

/// What B's statement did in one case of (h), over all runs.
pub(crate) struct Hold {
    pub(crate) case: HoldCase,
    /// B's times (the runs in which B finished).
    pub(crate) times: Vec<Duration>,
    /// Runs in which B's statement was cancelled by its `statement_timeout`: it waited for A.
    pub(crate) timeouts: usize,
}

impl Hold {
    pub(crate) fn worst(&self) -> Option<Duration> {
        self.times.iter().max().copied()
    }
}

/// (h)'s limit: B waited when its single-row insert took longer.
pub(crate) const HOLD_LIMIT: Duration = Duration::from_secs(1);
/// (h)'s `statement_timeout` on B.
pub(crate) const HOLD_TIMEOUT: &str = "5s";

/// One run of a case of (h). B first inserts a committed row of the window (the window has state,
/// and B's connection has run the trigger once), then A begins and inserts a row it keeps
/// uncommitted, then B's timed insert. Returns B's time, or `None` when B was cancelled.
fn hold_once(c: &mut Client, opts: &Opts, case: HoldCase) -> Res<Option<Duration>> {
    reset(c, case == HoldCase::HotKey)?;
    if case == HoldCase::Unkeyed {
        exec(c, UNKEYED_PIPELINE)?;
    }
    let mut a = writer(opts)?;
    let mut b = writer(opts)?;
    exec(&mut b, &format!("SET statement_timeout = '{HOLD_TIMEOUT}'"))?;
    let sa = a.prepare(INSERT).map_err(|e| describe(&e))?;
    let sb = b.prepare(INSERT).map_err(|e| describe(&e))?;
    let hot_key = 42i32;
    let ins = |cl: &mut Client, st: &postgres::Statement, id: i64, secs: i32| {
        cl.execute(st, &[&id, &hot_key, &1_234i64, &secs])
    };
    ins(&mut b, &sb, 1, 3_600).map_err(|e| format!("B's first row: {}", describe(&e)))?;
    exec(&mut a, "BEGIN")?;
    ins(&mut a, &sa, 2, 7_200).map_err(|e| format!("A's row: {}", describe(&e)))?;
    let t = Instant::now();
    let got = ins(&mut b, &sb, 3, 10_800);
    let took = t.elapsed();
    let waited = match got {
        Ok(_) => false,
        Err(e) if e.code() == Some(&postgres::error::SqlState::QUERY_CANCELED) => true,
        Err(e) => return Err(format!("B's timed row: {}", describe(&e))),
    };
    // A's transaction was open all along: it commits only now.
    exec(&mut a, "COMMIT")?;
    drop((a, b));
    let expected = if waited { 2 } else { 3 };
    let source = scalar(c, "SELECT count(*) FROM ev")?;
    if source != expected {
        return Err(format!(
            "{source} rows in the source table, expected {expected}"
        ));
    }
    if case != HoldCase::Plain {
        advance(c, "infinity")?;
        let latest = scalar(c, "SELECT sum(n)::bigint FROM bench_latest")?;
        if latest != expected {
            return Err(format!(
                "bench_latest counts {latest} rows after advance_watermark('infinity'), expected {expected}"
            ));
        }
    }
    Ok(if waited { None } else { Some(took) })
}

/// (h) blocking check, `runs` times per case, the cases taking turns.
pub(crate) fn workload_h(c: &mut Client, opts: &Opts) -> Res<Vec<Hold>> {
    println!(
        "(h) a second writer of a window while a transaction holding an uncommitted row of it stays open \
         (statement_timeout {HOLD_TIMEOUT}, limit {} s)",
        HOLD_LIMIT.as_secs_f64()
    );
    let cases = [HoldCase::Plain, HoldCase::Unkeyed, HoldCase::HotKey];
    let mut holds: Vec<Hold> = cases
        .iter()
        .map(|&case| Hold {
            case,
            times: Vec::new(),
            timeouts: 0,
        })
        .collect();
    for r in 1..=opts.runs {
        let mut line = format!("  (h) run {r}:");
        for (i, h) in holds.iter_mut().enumerate() {
            let got =
                hold_once(c, opts, h.case).map_err(|e| format!("(h), {}: {e}", h.case.name()))?;
            line += &format!(
                "{} {} {}",
                if i == 0 { "" } else { "," },
                h.case.name(),
                match got {
                    Some(d) => ms(d),
                    None => format!("cancelled after {HOLD_TIMEOUT}"),
                }
            );
            match got {
                Some(d) => h.times.push(d),
                None => h.timeouts += 1,
            }
        }
        println!("{line}");
    }
    Ok(holds)
}

/// The median of B's times, for the report.
pub(crate) fn hold_median(h: &Hold) -> Option<Duration> {
    (!h.times.is_empty()).then(|| median(h.times.clone()))
}
