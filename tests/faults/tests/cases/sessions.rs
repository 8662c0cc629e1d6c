//! SPEC §7 Session windows under concurrency and crashes, checked from the session contract
//! (library `src/sessions.rs`: the pipeline `visits`, gap 5 minutes, lateness 15 minutes; the
//! model that replays the committed statements and advances in the order they held their locks;
//! the checks), each test on a server of its own:
//!
//! - `sessions_bridge`: two transactions bridging the same two fired sessions of one key, the
//!   second sent while the first is open (it must wait for it): exactly one merged session in
//!   `_latest` with every row, one `merged` version per absorbed session, no version written
//!   twice, versions gapless. Four exact cases (both commit, the second joining or extending
//!   the merged session; the first rolls back; both carry the same event id), then rounds with
//!   random rows and timing.
//! - `sessions_purge_race`: a merge of two fired sessions racing an advance that purges one of
//!   them (sometimes with a second merging transaction in the race), many times with random
//!   timing: whichever goes first, every row is accounted for once and the history is what the
//!   contract makes of that order.
//! - `sessions_concurrent`: 6 writers (committed and rolled-back transactions) and an advancer;
//!   a monitor checks history and refused rows append-only and the model mid-run.
//! - `sessions_crash`: the same while the server is killed with SIGKILL, aimed at ingest
//!   transactions (merges) and advances; after each recovery and at the end, the model.
//!
//! The table, logs and pipeline belong to `et_owner`, whose sessions ingest and advance; the
//! observers and checks are the superuser's.

use std::sync::atomic::Ordering;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use postgres::Client;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use pg_eventtime_faults::cluster::Cluster;
use pg_eventtime_faults::db::{backend_pid, describe, wait_for_lock, Failure};
use pg_eventtime_faults::rows::{send, Method, Values};
use pg_eventtime_faults::sessions::{
    advance_to, check, ingest_tx, random_method, read_snapshot, run_advancer, run_killer,
    run_monitor, run_writer, table, AdvancerStats, Checked, Click, Run, RunConfig, Seen, Snapshot,
    Version, GAP, LOG_BATCH, SETUP,
};
use pg_eventtime_faults::workload::{create_db, join, DB, HOUR, INFINITY, MINUTE, OWNER, T0};
use pg_eventtime_faults::{env_num, seed};

const SEC: i64 = 1_000_000;
/// 2026-01-01 10:00 UTC.
const T: i64 = T0 + 10 * HOUR;

fn start(name: &str, extra: &[&str]) -> Cluster {
    let mut conf = vec!["deadlock_timeout = 100ms"];
    conf.extend_from_slice(extra);
    let cluster = Cluster::start(name, &conf);
    create_db(&cluster, SETUP);
    cluster
}

fn owner(cluster: &Cluster) -> Client {
    cluster.connect_as(DB, OWNER)
}

fn click(run: &Run, key: &str, ts: i64) -> Click {
    let id = run.shared.next_event.fetch_add(1, Ordering::SeqCst);
    Click {
        id,
        key: Some(key.into()),
        amount: (id * 37) % 1000 + 1,
        ts,
    }
}

fn values(run: &Run, batch: i64, clicks: &[Click]) -> Vec<Values> {
    clicks
        .iter()
        .map(|c| {
            c.values(
                run.shared.next_delivery.fetch_add(1, Ordering::SeqCst),
                batch,
            )
        })
        .collect()
}

fn next_batch(run: &Run) -> i64 {
    run.shared.next_batch.fetch_add(1, Ordering::SeqCst)
}

/// One committed ingest transaction; remembered as committed.
fn ingest(c: &mut Client, run: &Run, method: Method, clicks: &[Click]) {
    let b = next_batch(run);
    let r = ingest_tx(c, b, method, &values(run, b, clicks), true, Duration::ZERO)
        .unwrap_or_else(|e| panic!("ingest of batch {b}: {:?}", e.failure()));
    remember(run, b, r);
}

fn remember(run: &Run, batch: i64, counts: Option<[i64; 4]>) {
    let mut seen = run.seen.lock().unwrap();
    seen.committed.insert(batch);
    if let Some(c) = counts {
        seen.counts.insert(batch, c);
    }
}

fn advance(c: &mut Client, cluster: &Cluster, run: &Run, w: i64) {
    let mut client = Some(std::mem::replace(c, owner(cluster)));
    let mut st = AdvancerStats::default();
    advance_to(&mut client, cluster, run, false, w, &mut st).unwrap_or_else(|e| panic!("{e}"));
    *c = client.unwrap();
    if !st.retries.is_empty() {
        eprintln!("  advance to {w}: retries {:?}", st.retries);
    }
}

/// Reads a snapshot and checks it against the model; panics with every violation.
fn checked(c: &mut Client, run: &Run, final_: bool, what: &str, seed: u64) -> (Snapshot, Checked) {
    let seen: Seen = run.seen.lock().unwrap().clone();
    let s = read_snapshot(c).unwrap_or_else(|e| panic!("snapshot: {}", describe(&e)));
    let ck = check(&s, final_, &seen);
    assert!(
        ck.violations.is_empty(),
        "{what} (seed {seed}):\n{}",
        ck.violations.join("\n")
    );
    (s, ck)
}

/// A version without its aggregates but `n`, for the exact expectations.
fn shape(v: &Version) -> String {
    let t = pg_eventtime_faults::sessions::t;
    format!(
        "[{}, {}) v{} {}{} n={} wm={}",
        t(v.start),
        t(v.end),
        v.version,
        v.kind,
        v.merged_into
            .map(|(a, b)| format!(" into [{}, {})", t(a), t(b)))
            .unwrap_or_default(),
        v.agg.n,
        t(v.watermark)
    )
}

fn history_of(s: &Snapshot, key: &str) -> Vec<String> {
    let mut vs: Vec<&Version> = s
        .history
        .iter()
        .map(|h| &h.v)
        .filter(|v| v.key.as_deref() == Some(key))
        .collect();
    vs.sort_by_key(|v| (v.start, v.end, v.version));
    vs.into_iter().map(shape).collect()
}

fn assert_clean_log(cluster: &Cluster) {
    let log = cluster.log_text();
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("PANIC") || l.contains(" XX000 "))
        .take(5)
        .collect();
    assert!(
        bad.is_empty(),
        "server log has internal errors:\n{}",
        bad.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// 1. Two transactions bridging the same fired sessions
// ---------------------------------------------------------------------------------------------

/// T1 sends its statement and stays open; T2's statement, sent from another thread, must wait
/// for it (a lock wait in `pg_stat_activity`); then T1 commits or rolls back and T2 commits.
fn bridge_pair(
    cluster: &Cluster,
    obs: &mut Client,
    run: &Run,
    key: &str,
    t1: &[Click],
    t2: &[Click],
    t1_commits: bool,
) {
    let mut c1 = owner(cluster);
    let mut c2 = owner(cluster);
    let pid2 = backend_pid(&mut c2);
    let (b1, b2) = (next_batch(run), next_batch(run));
    let (rows1, rows2) = (values(run, b1, t1), values(run, b2, t2));
    let mut tx = c1.transaction().unwrap();
    let r1 = send(&mut tx, &table(), Method::Ingest, &rows1)
        .unwrap_or_else(|e| panic!("{key}: T1: {:?}", e.failure()));
    tx.execute(LOG_BATCH, &[&b1]).unwrap();
    let h = thread::spawn(move || {
        let r = ingest_tx(&mut c2, b2, Method::Ingest, &rows2, true, Duration::ZERO);
        r.map_err(|e| format!("{:?}", e.failure()))
    });
    let waits = wait_for_lock(obs, pid2, Duration::from_secs(10));
    assert!(
        waits.is_some() && !h.is_finished(),
        "{key}: the second ingest statement of the key did not wait for the open transaction of the first (the contract: ingest statements of a session pipeline serialize per key)"
    );
    eprintln!(
        "  {key}: the second transaction waits on {} while the first is open",
        waits.unwrap()
    );
    if t1_commits {
        tx.commit().unwrap();
        remember(run, b1, r1);
    } else {
        tx.rollback().unwrap();
    }
    let r2 = h
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{key}: T2 failed: {e}"));
    remember(run, b2, r2);
}

#[test]
fn two_bridges_of_the_same_fired_sessions_merge_once() {
    let seed = seed("sessions_bridge");
    let started = Instant::now();
    let cluster = start("sessions_bridge", &[]);
    let run = Run::new(0);
    let mut obs = cluster.connect(DB);
    let mut c = owner(&cluster);
    let rounds = env_num("FAULTS_SESSION_BRIDGES", 16) as usize;
    let exact = ["d1", "d2", "d3", "d4"];
    let random: Vec<String> = (0..rounds).map(|i| format!("r{i}")).collect();
    let keys: Vec<&str> = exact
        .iter()
        .copied()
        .chain(random.iter().map(String::as_str))
        .collect();

    // Per key, A = [10:00, 10:05) and B = [10:07, 10:12); both fire at 10:15 and stay live
    // until 10:20 and 10:27. A row at 10:03 to 10:05 (exclusive) overlaps both.
    let setup: Vec<Click> = keys
        .iter()
        .flat_map(|k| [click(&run, k, T), click(&run, k, T + 7 * MINUTE)])
        .collect();
    ingest(&mut c, &run, Method::Copy, &setup);
    let w1 = T + 15 * MINUTE;
    advance(&mut c, &cluster, &run, w1);

    // d1: both commit; T2's row lies inside the merged session: it joins it (version 2).
    let (x, y) = (
        click(&run, "d1", T + 4 * MINUTE),
        click(&run, "d1", T + 5 * MINUTE),
    );
    bridge_pair(&cluster, &mut obs, &run, "d1", &[x], &[y], true);
    // d2: both commit; T2's row extends the merged session: merged again, into [10:00, 10:15).
    let (x, y) = (
        click(&run, "d2", T + 4 * MINUTE),
        click(&run, "d2", T + 10 * MINUTE),
    );
    bridge_pair(&cluster, &mut obs, &run, "d2", &[x], &[y], true);
    // d3: T1 rolls back; T2 bridges alone.
    let (x, y) = (
        click(&run, "d3", T + 4 * MINUTE),
        click(&run, "d3", T + 3 * MINUTE + 30 * SEC),
    );
    bridge_pair(&cluster, &mut obs, &run, "d3", &[x], &[y], false);
    // d4: both carry the same event: T2's copy is a duplicate.
    let x = [click(&run, "d4", T + 4 * MINUTE)];
    bridge_pair(&cluster, &mut obs, &run, "d4", &x, &x, true);

    let (s, _) = checked(&mut obs, &run, false, "after the exact rounds", seed);
    let a = "[10:00:00, 10:05:00) v1 main n=1 wm=10:15:00";
    let b = "[10:07:00, 10:12:00) v1 main n=1 wm=10:15:00";
    let into = |e: &str| {
        [
            a.to_string(),
            format!("[10:00:00, 10:05:00) v2 merged into {e} n=1 wm=10:15:00"),
            b.to_string(),
            format!("[10:07:00, 10:12:00) v2 merged into {e} n=1 wm=10:15:00"),
        ]
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let m = "[10:00:00, 10:12:00)";
    let mut d1 = into(m).to_vec();
    d1.push(format!("{m} v1 late n=3 wm=10:15:00"));
    d1.push(format!("{m} v2 late n=4 wm=10:15:00"));
    let mut d2 = into(m).to_vec();
    d2.push(format!("{m} v1 late n=3 wm=10:15:00"));
    d2.push(format!(
        "{m} v2 merged into [10:00:00, 10:15:00) n=3 wm=10:15:00"
    ));
    d2.push("[10:00:00, 10:15:00) v1 late n=4 wm=10:15:00".into());
    let mut d3 = into(m).to_vec();
    d3.push(format!("{m} v1 late n=3 wm=10:15:00"));
    let d4 = d3.clone();
    for (key, want) in [("d1", d1), ("d2", d2), ("d3", d3), ("d4", d4)] {
        assert_eq!(
            sorted(history_of(&s, key)),
            sorted(want),
            "history of key {key} (seed {seed})"
        );
    }

    // Random rounds: each transaction carries a row bridging A and B (10:03 to 10:05) and up
    // to two more rows overlapping them (late, or open after 10:10); random pauses before the
    // statement and before the end; 15% roll back. Both are in flight at once.
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xB21D);
    let mut overlapped = 0;
    for key in &random {
        let barrier = Barrier::new(2);
        let plans: Vec<(Vec<Click>, u64, u64, bool, Method)> = (0..2)
            .map(|_| {
                let mut rows = vec![click(
                    &run,
                    key,
                    T + 3 * MINUTE + rng.random_range(0..120) * SEC,
                )];
                for _ in 0..rng.random_range(0..=2) {
                    rows.push(click(
                        &run,
                        key,
                        T - 4 * MINUTE - 59 * SEC + rng.random_range(0..16 * 60 + 58) * SEC,
                    ));
                }
                (
                    rows,
                    rng.random_range(0..15),
                    rng.random_range(0..15),
                    rng.random_bool(0.85),
                    random_method(&mut rng),
                )
            })
            .collect();
        type Outcome = (
            i64,
            Result<Option<[i64; 4]>, String>,
            bool,
            (Instant, Instant),
        );
        let results: Vec<Outcome> = thread::scope(|sc| {
            let hs: Vec<_> = plans
                .iter()
                .map(|(rows, before, hold, commit, method)| {
                    let (cluster, run, barrier) = (&cluster, &run, &barrier);
                    sc.spawn(move || {
                        let mut c = owner(cluster);
                        let b = next_batch(run);
                        let vals = values(run, b, rows);
                        barrier.wait();
                        thread::sleep(Duration::from_millis(*before));
                        let t0 = Instant::now();
                        let r = ingest_tx(
                            &mut c,
                            b,
                            *method,
                            &vals,
                            *commit,
                            Duration::from_millis(*hold),
                        )
                        .map_err(|e| format!("{:?}", e.failure()));
                        (b, r, *commit, (t0, Instant::now()))
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let (p, q) = (results[0].3, results[1].3);
        if p.0 < q.1 && q.0 < p.1 {
            overlapped += 1;
        }
        for (b, r, commit, _) in results {
            match r {
                Ok(counts) if commit => remember(&run, b, counts),
                Ok(_) => {}
                Err(e) => panic!("round {key}: batch {b}: {e}"),
            }
        }
    }
    eprintln!(
        "  {} random rounds, {overlapped} with both transactions in flight at once",
        random.len()
    );

    advance(&mut c, &cluster, &run, INFINITY);
    let (s, ck) = checked(&mut obs, &run, true, "after infinity", seed);
    // Per key: one session in _latest with every accepted row; A and B each one merged
    // version, naming a session of the key.
    let mut problems = Vec::new();
    for key in &keys {
        let latest: Vec<&Version> = s
            .latest
            .iter()
            .filter(|v| v.key.as_deref() == Some(*key))
            .collect();
        let ids: std::collections::HashSet<i64> = s
            .statements
            .iter()
            .flat_map(|st| st.rows.iter())
            .filter(|r| r.key.as_deref() == Some(*key))
            .map(|r| r.id)
            .collect();
        let bridged = ids.len() > 2;
        if bridged {
            if latest.len() != 1 || latest[0].agg.n != ids.len() as i64 {
                problems.push(format!(
                    "key {key}: _latest must be one session with all {} rows: {:?}",
                    ids.len(),
                    latest.iter().map(|v| shape(v)).collect::<Vec<_>>()
                ));
            }
            for start in [T, T + 7 * MINUTE] {
                let merged = s
                    .history
                    .iter()
                    .filter(|h| {
                        h.v.key.as_deref() == Some(*key)
                            && h.v.start == start
                            && h.v.end == start + GAP
                            && h.v.kind == "merged"
                    })
                    .count();
                if merged != 1 {
                    problems.push(format!(
                        "key {key}: the fired session at {} has {merged} merged versions, not 1",
                        pg_eventtime_faults::sessions::t(start)
                    ));
                }
            }
        } else if latest.len() != 2 {
            problems.push(format!(
                "key {key}: nothing bridged (both rolled back), yet _latest has {:?}",
                latest.iter().map(|v| shape(v)).collect::<Vec<_>>()
            ));
        }
    }
    assert!(problems.is_empty(), "seed {seed}:\n{}", problems.join("\n"));
    eprintln!(
        "  replay: {:?}\n[sessions_bridge] passed in {:.1} s",
        ck.stats,
        started.elapsed().as_secs_f64()
    );
    assert_clean_log(&cluster);
}

// ---------------------------------------------------------------------------------------------
// 2. A merge racing an advance that purges one of its sessions
// ---------------------------------------------------------------------------------------------

#[test]
fn a_merge_racing_a_purging_advance_loses_nothing() {
    let seed = seed("sessions_purge_race");
    let started = Instant::now();
    let cluster = start("sessions_purge_race", &[]);
    let run = Run::new(0);
    let mut obs = cluster.connect(DB);
    let mut c = owner(&cluster);
    let mut merger = owner(&cluster);
    let mut merger2 = owner(&cluster);
    let mut adv = Some(owner(&cluster));
    let iterations = env_num("FAULTS_SESSION_RACES", 60) as i64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9A5E);
    let (mut rolled_back, mut retried, mut three) = (0, 0, 0);
    let mut adv_stats = AdvancerStats::default();
    for i in 0..iterations {
        // A = [S, S+5m) and B = [S+8m, S+13m) fire at S+14m; A is purged at S+20m, B at S+28m.
        let s0 = T + (i + 1) * 2 * HOUR;
        let a = click(&run, "u", s0);
        let b = click(&run, "u", s0 + 8 * MINUTE);
        ingest(&mut c, &run, random_method(&mut rng), &[a.clone(), b]);
        advance(&mut c, &cluster, &run, s0 + 14 * MINUTE);
        // The merge: a row overlapping A and B (late at S+14m; refused from its own deadline,
        // S+23m to S+25m, on), sometimes one more row, sometimes A's row again (a duplicate).
        let mut rows = vec![click(
            &run,
            "u",
            s0 + 3 * MINUTE + rng.random_range(1..120) * SEC,
        )];
        if rng.random_bool(0.5) {
            rows.push(click(
                &run,
                "u",
                s0 - 4 * MINUTE + rng.random_range(0..17 * 60) * SEC,
            ));
        }
        if rng.random_bool(0.2) {
            rows.push(a);
        }
        // The advance: S+15m to S+27m, from purging nothing to purging A and refusing the row;
        // mostly S+20m (A's deadline exactly, now and then) to S+23m, where it purges A and
        // the row is still accepted.
        let w2 = if rng.random_bool(0.1) {
            s0 + 20 * MINUTE
        } else if rng.random_bool(0.6) {
            s0 + 20 * MINUTE + rng.random_range(0..3 * 60) * SEC
        } else {
            s0 + 15 * MINUTE + rng.random_range(0..12 * 60) * SEC
        };
        let (before, hold, commit, method) = (
            rng.random_range(0..8),
            rng.random_range(0..8),
            rng.random_bool(0.9),
            random_method(&mut rng),
        );
        let adv_delay = rng.random_range(0..12);
        // Now and then a second merging transaction (another bridging row; its pause before
        // the statement lands it before, behind or between the other two).
        let second: Option<(Vec<Click>, u64, u64, Method)> = rng.random_bool(0.4).then(|| {
            (
                vec![click(
                    &run,
                    "u",
                    s0 + 3 * MINUTE + rng.random_range(1..120) * SEC,
                )],
                rng.random_range(0..15),
                rng.random_range(0..8),
                random_method(&mut rng),
            )
        });
        let mut plans = vec![(rows, before, hold, commit, method)];
        if let Some((rows, before, hold, method)) = second {
            plans.push((rows, before, hold, true, method));
        }
        let batches: Vec<(i64, Vec<Values>)> = plans
            .iter()
            .map(|p| {
                let b = next_batch(&run);
                (b, values(&run, b, &p.0))
            })
            .collect();
        let barrier = Barrier::new(plans.len() + 1);
        let results: Vec<_> = thread::scope(|sc| {
            let hs: Vec<_> = plans
                .iter()
                .zip(&batches)
                .zip([&mut merger, &mut merger2])
                .map(|(((_, before, hold, commit, method), (b, vals)), conn)| {
                    let barrier = &barrier;
                    sc.spawn(move || {
                        barrier.wait();
                        thread::sleep(Duration::from_millis(*before));
                        ingest_tx(
                            conn,
                            *b,
                            *method,
                            vals,
                            *commit,
                            Duration::from_millis(*hold),
                        )
                    })
                })
                .collect();
            barrier.wait();
            thread::sleep(Duration::from_millis(adv_delay));
            advance_to(&mut adv, &cluster, &run, false, w2, &mut adv_stats)
                .unwrap_or_else(|e| panic!("iteration {i}: {e}"));
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        if plans.len() > 1 {
            three += 1;
        }
        for ((plan, (batch, _)), merged) in plans.iter().zip(&batches).zip(results) {
            match merged {
                Ok(counts) if plan.3 => remember(&run, *batch, counts),
                Ok(_) => rolled_back += 1,
                Err(e) => match e.failure() {
                    Failure::Retry(_) => retried += 1,
                    f => panic!("iteration {i}: a merging transaction failed: {f:?}"),
                },
            }
        }
        if i % 15 == 14 {
            checked(&mut obs, &run, false, &format!("after iteration {i}"), seed);
        }
    }
    advance(&mut c, &cluster, &run, INFINITY);
    let (_, ck) = checked(&mut obs, &run, true, "after infinity", seed);
    let st = &ck.stats;
    eprintln!(
        "  {iterations} races ({three} with a second merging transaction): {} fired sessions absorbed by a merge, {} rows overlapping a purged session, {} refused, {} duplicates; {rolled_back} rolled back, {retried} retried merges, advance retries {:?}",
        st.absorbed_fired, st.rows_over_purged, st.refused, st.duplicates, adv_stats.retries
    );
    eprintln!("  replay: {st:?}");
    assert!(
        st.absorbed_fired > 0 && st.rows_over_purged > 0,
        "the races must have had both orders: merges that absorbed a fired session ({}) and rows that came after the purge of a session they overlap ({})",
        st.absorbed_fired,
        st.rows_over_purged
    );
    assert_clean_log(&cluster);
    eprintln!(
        "[sessions_purge_race] passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------------
// 3 and 4. Concurrent writers and an advancer, with and without kill -9
// ---------------------------------------------------------------------------------------------

fn run_concurrent(name: &str, cfg: RunConfig, extra: &[&str]) {
    let seed = seed(name);
    let started = Instant::now();
    let cluster = start(name, extra);
    let run = Run::new(cfg.writers);
    let (mut errors, mut ws) = (
        Vec::new(),
        pg_eventtime_faults::sessions::WriterStats::default(),
    );
    let (adv, mon, kil) = thread::scope(|s| {
        let writers: Vec<_> = (0..cfg.writers)
            .map(|i| {
                let (cluster, run, cfg) = (&cluster, &run, &cfg);
                s.spawn(move || run_writer(cluster, run, i, seed, cfg))
            })
            .collect();
        let advancer = s.spawn(|| run_advancer(&cluster, &run, seed, &cfg));
        let monitor = s.spawn(|| run_monitor(&cluster, &run, &cfg));
        let killer = cfg
            .crash
            .then(|| s.spawn(|| run_killer(&cluster, &run, seed, cfg.kills, (1_500, 3_000))));
        for (i, h) in writers.into_iter().enumerate() {
            if let Some(st) = join(h, &format!("writer {i}"), &mut errors) {
                ws.merge(&st);
            }
        }
        let kil = killer.and_then(|h| join(h, "killer", &mut errors));
        let adv = join(advancer, "advancer", &mut errors);
        run.done.store(true, Ordering::SeqCst);
        let mon = join(monitor, "monitor", &mut errors);
        (adv, mon, kil)
    });
    run.shared.assert_clean(name, seed, errors);
    let (adv, mon) = (adv.unwrap(), mon.unwrap());
    let mut c = cluster.connect(DB);
    let (s, ck) = checked(&mut c, &run, true, &format!("{name}: after infinity"), seed);
    let st = &ck.stats;
    if let Some(k) = &kil {
        eprintln!(
            "  {} kills ({} with every backend; aimed at {} ingest transactions, {} advances), recoveries {:?} s",
            k.kills,
            k.with_backends,
            k.aimed_at_ingest,
            k.aimed_at_advance,
            k.recovery_secs
                .iter()
                .map(|x| (x * 10.0).round() / 10.0)
                .collect::<Vec<_>>()
        );
    }
    eprintln!(
        "  writers: {} committed ({} with two statements; {} rows, {:?}), {} rolled back, retries {:?}, {} lost connections; {} source rows; advancer: {} advances, retries {:?}, {} lost; monitor: {} snapshots, {} model checks",
        ws.committed, ws.two_statement_transactions, ws.rows_committed, ws.statements, ws.rolled_back, ws.retries, ws.lost,
        s.source_rows, adv.advances, adv.retries, adv.lost, mon.snapshots, mon.model_checks
    );
    // The contract lets a merge target vanish without trace when it is absorbed again before
    // it fires: its merged_into then names no session of history (checked: it lies inside one).
    let sessions: std::collections::HashSet<_> = s.history.iter().map(|h| h.v.session()).collect();
    let merged: Vec<&Version> = s
        .history
        .iter()
        .map(|h| &h.v)
        .filter(|v| v.kind == "merged")
        .collect();
    let unnamed = merged
        .iter()
        .filter(|v| {
            let (a, b) = v.merged_into.unwrap();
            !sessions.contains(&(v.key.clone(), a, b))
        })
        .count();
    eprintln!(
        "  history: {} versions, {} merged ({unnamed} of them into a session absorbed again before it fired); replay: {st:?}",
        s.history.len(),
        merged.len()
    );
    let exercised = [
        ("main firings", st.main_fired),
        ("late versions of fired sessions", st.late_joins),
        ("sessions due when formed", st.late_first),
        ("islands of two or more sessions", st.bridges),
        ("absorbed fired sessions", st.absorbed_fired),
        ("absorbed unfired sessions", st.absorbed_unfired),
        ("refused rows", st.refused),
        ("duplicates", st.duplicates),
        ("rolled-back transactions", ws.rolled_back as i64),
        (
            "committed two-statement transactions",
            ws.two_statement_transactions as i64,
        ),
    ];
    let missing: Vec<&str> = exercised.iter().filter(|x| x.1 == 0).map(|x| x.0).collect();
    assert!(
        missing.is_empty(),
        "the {name} run did not exercise: {missing:?}"
    );
    assert_clean_log(&cluster);
    eprintln!(
        "[{name}] passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn concurrent_writers_and_advances_keep_sessions_consistent() {
    run_concurrent(
        "sessions_concurrent",
        RunConfig {
            writers: 6,
            secs: env_num("FAULTS_SESSION_SECS", 12),
            keys: 5,
            crash: false,
            kills: 0,
            pause_ms: env_num("FAULTS_SESSION_PAUSE_MS", 200),
            two_statements: 0.15,
        },
        &[],
    );
}

#[test]
fn kill_9_during_session_merges_loses_nothing() {
    run_concurrent(
        "sessions_crash",
        RunConfig {
            writers: 6,
            secs: env_num("FAULTS_SESSION_CRASH_SECS", 8),
            keys: 5,
            crash: true,
            kills: env_num("FAULTS_SESSION_KILLS", 3) as usize,
            pause_ms: env_num("FAULTS_SESSION_PAUSE_MS", 200),
            two_statements: 0.15,
        },
        &["checkpoint_timeout = 30s"],
    );
}
