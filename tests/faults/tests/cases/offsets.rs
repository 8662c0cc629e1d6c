//! SPEC §12 under concurrency and crashes: exactly-once by source offsets.
//!
//! Six writers, as the owner `et_owner`, write the records of four logs (sources `0` to `3`;
//! writers 4 and 5 write the logs of writers 0 and 1 too, so two writers of one source take
//! turns). Each batch starts at or below its source's committed offset plus one, as read from
//! `eventtime.sources` (up to 20 records back: redeliveries), is sometimes shuffled or carries a
//! record twice, and goes by `COPY` or a multi-row `INSERT`, sometimes two batches in one
//! transaction. The server is killed with SIGKILL twice mid-run; writers reconnect and resume from
//! the committed offsets. The records are a function of (source, offset), so the model is exact:
//!
//! 1. each source's committed offset is the greatest offset of its rows in the source table (the
//!    offset moves in the ingesting transaction: never ahead of the rows, never behind them);
//! 2. after the watermark passes every window, each window's latest version equals the records
//!    of offsets 1 to the committed offset of every source, each counted once;
//! 3. a writer of another source never waits for an open transaction's source; a writer of the
//!    same source waits (its lock timeout fires), and after the commit its row is a duplicate.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use pg_eventtime_faults::cluster::Cluster;
use pg_eventtime_faults::db::{classify, describe, exec, Failure};
use pg_eventtime_faults::workload::{create_db, DB, OWNER, T0};
use pg_eventtime_faults::{env_num, seed};
use postgres::Client;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SOURCES: u64 = 4;
const WRITERS: u64 = 6;
const KEYS: i64 = 5;
const HOUR: i64 = 3_600_000_000;

const SETUP: &str = "\
    CREATE TABLE events (part int NOT NULL, off bigint NOT NULL, k int, v bigint, at timestamptz); \
    SELECT eventtime.create_pipeline(name => 'offs', source => 'events', event_time => 'at', \
        key => ARRAY['k'], window_size => '1 hour', allowed_lateness => '1 hour', \
        aggregates => 'count(*) AS n, sum(v) AS total', offset_column => 'off', source_column => 'part')";

/// The record at offset `off` of log `part`: key, value, event time (microseconds).
fn record(part: i64, off: i64) -> (i64, i64, i64) {
    let x = part * 1_000_003 + off;
    (
        x % KEYS,
        off * 10 + part,
        T0 + (x * 7_919 % 1_440) * 60_000_000,
    )
}

fn ts(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    let t = chrono::DateTime::from_timestamp(secs, 0).expect("timestamp");
    format!("{}+00", t.format("%Y-%m-%d %H:%M:%S"))
}

/// The committed offset of `part` as `eventtime.sources` shows it (0: none yet).
fn committed(c: &mut Client, part: i64) -> Result<i64, postgres::Error> {
    let row = c.query_opt(
        "SELECT \"offset\" FROM eventtime.sources WHERE pipeline = 'offs' AND source = $1",
        &[&part.to_string()],
    )?;
    Ok(row.and_then(|r| r.get::<_, Option<i64>>(0)).unwrap_or(0))
}

/// One batch of log `part` from offset `from`: `len` records, maybe shuffled, maybe with one
/// record twice.
fn batch(rng: &mut ChaCha8Rng, part: i64, from: i64, len: i64) -> Vec<(i64, i64)> {
    let mut rows: Vec<(i64, i64)> = (from..from + len).map(|o| (part, o)).collect();
    if rng.random_bool(0.1) {
        rows.shuffle(rng);
    }
    if rng.random_bool(0.1) {
        let i = rng.random_range(0..rows.len());
        let r = rows[i];
        rows.insert(rng.random_range(0..=rows.len()), r);
    }
    rows
}

fn send(c: &mut Client, rows: &[(i64, i64)], copy: bool) -> Result<(), postgres::Error> {
    let line = |&(p, o): &(i64, i64)| {
        let (k, v, at) = record(p, o);
        (p, o, k, v, ts(at))
    };
    if copy {
        use std::io::Write;
        let mut w = c.copy_in("COPY events (part, off, k, v, at) FROM STDIN")?;
        let mut buf = Vec::new();
        for r in rows {
            let (p, o, k, v, at) = line(r);
            writeln!(buf, "{p}\t{o}\t{k}\t{v}\t{at}").unwrap();
        }
        w.write_all(&buf).expect("COPY data");
        w.finish()?;
    } else {
        let values: Vec<String> = rows
            .iter()
            .map(|r| {
                let (p, o, k, v, at) = line(r);
                format!("({p}, {o}, {k}, {v}, '{at}')")
            })
            .collect();
        c.batch_execute(&format!(
            "INSERT INTO events (part, off, k, v, at) VALUES {}",
            values.join(", ")
        ))?;
    }
    Ok(())
}

/// One writer until `stop`: batches of its source, in transactions of one or two, resuming from
/// the committed offset after every failure. Returns the transactions it committed.
fn writer(
    cluster: &Cluster,
    w: u64,
    seed: u64,
    stop: &AtomicBool,
    errors: &Mutex<Vec<String>>,
) -> u64 {
    let part = (w % SOURCES) as i64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (w + 1).wrapping_mul(0x9E37_79B9));
    let mut commits = 0;
    let mut conn: Option<Client> = None;
    while !stop.load(Ordering::Relaxed) {
        let c = match conn.as_mut() {
            Some(c) if !c.is_closed() => c,
            _ => match cluster.try_connect_as(DB, OWNER) {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
            },
        };
        let result = (|| -> Result<(), postgres::Error> {
            let at = committed(c, part)?;
            let back = rng.random_range(0..=20);
            let mut from = (at + 1 - back).max(1);
            c.batch_execute("BEGIN")?;
            for _ in 0..rng.random_range(1..=2) {
                let len = rng.random_range(1..=300);
                send(c, &batch(&mut rng, part, from, len), rng.random_bool(0.5))?;
                from += len;
            }
            c.batch_execute("COMMIT")
        })();
        match result {
            Ok(()) => commits += 1,
            Err(e) => match classify(&e) {
                Failure::Retry(_) => {
                    let _ = c.batch_execute("ROLLBACK");
                }
                Failure::ConnectionLost(_) => conn = None,
                Failure::Fatal(d) => {
                    errors.lock().unwrap().push(format!("writer {w}: {d}"));
                    stop.store(true, Ordering::Relaxed);
                }
            },
        }
    }
    commits
}

#[test]
fn offsets_concurrent_writers_and_crashes() {
    let seed = seed("offsets_concurrent_writers_and_crashes");
    let secs = env_num("FAULTS_OFFSETS_SECS", 12);
    let cluster = Cluster::start("offsets", &[]);
    create_db(&cluster, SETUP);

    let stop = AtomicBool::new(false);
    let errors = Mutex::new(Vec::new());
    let (commits, kills) = thread::scope(|s| {
        let ws: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (cluster, stop, errors) = (&cluster, &stop, &errors);
                s.spawn(move || writer(cluster, w, seed, stop, errors))
            })
            .collect();
        // Two kills, a third and two thirds into the run.
        let t = Instant::now();
        let mut kills = 0;
        for at in [secs / 3, 2 * secs / 3] {
            while t.elapsed() < Duration::from_secs(at) && !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(50));
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            cluster.kill9(true).expect("kill -9");
            cluster.restart_after_kill(Duration::from_millis(200));
            kills += 1;
        }
        while t.elapsed() < Duration::from_secs(secs) && !stop.load(Ordering::Relaxed) {
            thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        let commits: u64 = ws.into_iter().map(|h| h.join().expect("writer")).sum();
        (commits, kills)
    });
    let errors = errors.into_inner().unwrap();
    assert!(errors.is_empty(), "seed {seed}: {}", errors.join("\n"));

    let mut c = cluster.connect(DB);
    // 1. Each committed offset is the greatest of its source's rows.
    let mut offsets = BTreeMap::new();
    for part in 0..SOURCES as i64 {
        let offset = committed(&mut c, part).expect("offsets");
        let greatest: Option<i64> = c
            .query_one(
                "SELECT max(off) FROM events WHERE part = $1",
                &[&(part as i32)],
            )
            .expect("source rows")
            .get(0);
        assert_eq!(
            Some(offset),
            greatest,
            "seed {seed}: source {part}: committed offset and the greatest offset of its rows"
        );
        assert!(offset > 0, "seed {seed}: source {part} committed nothing");
        offsets.insert(part, offset);
    }
    let rows: i64 = c
        .query_one("SELECT count(*) FROM events", &[])
        .unwrap()
        .get(0);
    let distinct: i64 = offsets.values().sum();
    assert!(
        rows > distinct,
        "seed {seed}: the run should redeliver records ({rows} rows for {distinct} records)"
    );

    // 2. Every record up to the committed offsets, counted once.
    exec(
        &mut c,
        "SELECT eventtime.advance_watermark('offs', 'infinity')",
    );
    let mut expected: BTreeMap<(i64, i64), (i64, i64)> = BTreeMap::new();
    for (&part, &offset) in &offsets {
        for off in 1..=offset {
            let (k, v, at) = record(part, off);
            let e = expected.entry((k, at - at.rem_euclid(HOUR))).or_default();
            e.0 += 1;
            e.1 += v;
        }
    }
    let latest: BTreeMap<(i64, i64), (i64, i64)> = c
        .query(
            "SELECT k::bigint, (extract(epoch FROM window_start) * 1000000)::bigint, n, total::bigint FROM offs_latest",
            &[],
        )
        .expect("latest")
        .iter()
        .map(|r| ((r.get(0), r.get(1)), (r.get(2), r.get(3))))
        .collect();
    assert_eq!(
        latest, expected,
        "seed {seed}: the latest versions are not the records up to the committed offsets"
    );
    let duplicates: i64 = c
        .query_one(
            "SELECT duplicates FROM eventtime.pipelines WHERE name = 'offs'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        duplicates,
        rows - distinct,
        "seed {seed}: every row not counted is a duplicate"
    );

    // 3. Another source never waits for an open transaction; the same source does.
    let mut holder = cluster.connect_as(DB, OWNER);
    exec(&mut holder, "BEGIN");
    exec(
        &mut holder,
        &format!("INSERT INTO events VALUES (10, 1, 0, 1, '{}')", ts(T0)),
    );
    let mut other = cluster.connect_as(DB, OWNER);
    exec(&mut other, "SET lock_timeout = '5s'");
    let t = Instant::now();
    exec(
        &mut other,
        &format!("INSERT INTO events VALUES (11, 1, 0, 1, '{}')", ts(T0)),
    );
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "seed {seed}: a writer of another source waited {:?}",
        t.elapsed()
    );
    exec(&mut other, "SET lock_timeout = '300ms'");
    let same = other.batch_execute(&format!(
        "INSERT INTO events VALUES (10, 1, 0, 1, '{}')",
        ts(T0)
    ));
    let code = same
        .as_ref()
        .err()
        .and_then(|e| e.code())
        .map(|c| c.code().to_string());
    assert_eq!(
        code.as_deref(),
        Some("55P03"),
        "seed {seed}: a writer of the same source should wait for the open transaction: {:?}",
        same.map_err(|e| describe(&e))
    );
    exec(&mut holder, "COMMIT");
    let counts = other
        .query_one(
            &format!(
                "SELECT accepted, duplicates FROM eventtime.ingest('offs', '{{\"part\": 10, \"off\": 1, \"k\": 0, \"v\": 1, \"at\": \"{}\"}}')",
                ts(T0)
            ),
            &[],
        )
        .expect("ingest after the commit");
    assert_eq!(
        (counts.get::<_, i64>(0), counts.get::<_, i64>(1)),
        (0, 1),
        "seed {seed}: after the commit, the same offset is a duplicate"
    );
    eprintln!(
        "[offsets] {commits} transactions committed by {WRITERS} writers, {kills} kills, {rows} rows for {distinct} records"
    );
}
