//! SPEC §5 for per-source watermarks, idle sources and `watermark_lag` (see the library module
//! `sources` for the log, the model and the threads):
//!
//! 1. `lag_ingest`: 6 ingest threads into a pipeline with a watermark lag and an idle timeout
//!    (each ingest statement takes EXCLUSIVE, classifies, advances the source `watermark_lag`
//!    and fires), while a source thread advances a second source and marks sources idle. No
//!    deadlock, no error; the log replays through the model; every check of the concurrency test.
//! 2. `many_sources`: 4 source threads advance one source each of a pipeline without lag
//!    (and mark sources idle) while 4 threads ingest: the pipeline watermark, sampled from a
//!    monitor connection, never goes back and is never behind the minimum over the active
//!    sources; at the end it is that minimum, or where it was if the minimum is behind.
//! 3. `lag_crash`: workload 1 while the server is killed with SIGKILL: after every recovery the
//!    pipeline watermark and sources are what the committed log implies, and no firing is missing.
//!
//! The source table, the log and the pipeline belong to the ordinary role `et_owner`; the ingest
//! and source threads log in as it, the monitor and the checks as the superuser.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Instant;

use pg_eventtime_faults::checks::{consistency, final_checks, Expected};
use pg_eventtime_faults::cluster::Cluster;
use pg_eventtime_faults::db::{describe, text_rows};
use pg_eventtime_faults::sources::{
    advance_every_source_to_infinity, lag_setup, logged_op, replay, replay_check, run_driver,
    run_monitor, DriverConfig, DriverOut, MonitorConfig, MonitorOut, Op, LAG_SOURCE, LOG_SETUP,
};
use pg_eventtime_faults::windows::Windows;
use pg_eventtime_faults::workload::{
    create_db, join, join_workers, micros_sql, run_killer_checked, run_worker, setup,
    snapshot_sealed, ts_text, Check, Shared, Stats, WorkerConfig, DB, OWNER, T0,
};
use pg_eventtime_faults::{env_num, seed};

use postgres::{Client, IsolationLevel};

/// A cluster whose database `DB` has the objects of `setup`, created by `OWNER`.
fn start(name: &str, extra: &[&str], setup: &str) -> Cluster {
    let cluster = Cluster::start(name, extra);
    create_db(&cluster, setup);
    cluster
}

struct Run {
    stats: Stats,
    monitor: MonitorOut,
}

/// Runs ingest threads, source threads, a monitor and optionally a killer; joins them and asserts
/// the run was clean. (Each argument configures another part of the run.)
#[allow(clippy::too_many_arguments)]
fn run(
    what: &str,
    seed: u64,
    cluster: &Cluster,
    workers: usize,
    wcfg: &WorkerConfig,
    dcfgs: &[DriverConfig],
    mcfg: &MonitorConfig,
    killer: Option<(usize, (u64, u64), &Check)>,
) -> Run {
    let shared = Shared::new(workers);
    let stop = AtomicBool::new(false);
    let (stats, drivers, monitor, killed, errors) = thread::scope(|s| {
        let ws: Vec<_> = (0..workers)
            .map(|i| {
                let (cluster, shared) = (cluster, &shared);
                s.spawn(move || run_worker(cluster, shared, i, seed, wcfg))
            })
            .collect();
        let ds: Vec<_> = dcfgs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let (cluster, shared) = (cluster, &shared);
                s.spawn(move || run_driver(cluster, shared, seed, i, d))
            })
            .collect();
        let m = s.spawn(|| run_monitor(cluster, &shared, seed, mcfg, &stop));
        let k = killer.map(|(min_kills, gap, check)| {
            let shared = &shared;
            s.spawn(move || run_killer_checked(cluster, shared, seed, min_kills, gap, Some(check)))
        });
        let mut errors = Vec::new();
        let stats = join_workers(ws, &mut errors);
        let killed = k.and_then(|k| join(k, "killer thread", &mut errors));
        let drivers: Vec<DriverOut> = ds
            .into_iter()
            .enumerate()
            .filter_map(|(i, h)| join(h, &format!("source thread {i}"), &mut errors))
            .collect();
        stop.store(true, Ordering::SeqCst);
        let monitor = join(m, "monitor", &mut errors);
        (stats, drivers, monitor, killed, errors)
    });
    shared.assert_clean(what, seed, errors);
    let monitor = monitor.unwrap();
    if let Some(k) = killed {
        eprintln!(
            "  {} kills ({} of the postmaster alone, {} aimed at a source call in flight), recoveries took {:?} s, {} checks after recovery",
            k.kills,
            k.postmaster_only,
            k.aimed_at_advance,
            k.recovery_secs.iter().map(|s| (s * 10.0).round() / 10.0).collect::<Vec<_>>(),
            k.checks
        );
        assert!(k.kills >= killer.unwrap().0, "only {} kills", k.kills);
    }
    eprintln!(
        "  {} rows in {} statements {:?} ({} transactions of two); {} redeliveries, {} in-statement duplicates; ingest() counts [accepted, late, refused, duplicates] = {:?}",
        stats.rows,
        stats.batches,
        stats.statements,
        stats.two_statement_transactions,
        stats.redeliveries,
        stats.in_statement_duplicates,
        stats.ingest_counts
    );
    if stats.connection_losses > 0 {
        eprintln!(
            "  lost connections of ingest threads: {} ({} statements had committed after all, {} were sent again)",
            stats.connection_losses, stats.resolved_committed, stats.resent
        );
    }
    for (i, d) in drivers.iter().enumerate() {
        eprintln!(
            "  source thread {i}: calls {:?} (mean {} ms, max {} ms), {} mark_idle of a source not registered yet, {} lost connections, retries {:?}",
            d.ops,
            d.total_call_ms / d.ops.values().sum::<u64>().max(1),
            d.max_call_ms,
            d.unknown_source,
            d.connection_losses,
            d.retries
        );
    }
    eprintln!(
        "  monitor: {} samples, the watermark moved at {} of them, last {}; {} log replays, {} consistency checks ({} right after reconnecting), {} sealed rows seen",
        monitor.samples,
        monitor.moves,
        monitor.last.map(ts_text).unwrap_or_default(),
        monitor.replays,
        monitor.checks,
        monitor.checks_after_reconnect,
        monitor.sealed.sealed.len()
    );
    // A deadlock or serialization failure is a failure here, not something to retry: ingest
    // transactions of a lag pipeline run one at a time and take their locks in the order of
    // advance_watermark and mark_idle.
    let driver_retries: Vec<_> = drivers
        .iter()
        .filter(|d| !d.retries.is_empty())
        .map(|d| &d.retries)
        .collect();
    assert!(
        stats.retries.is_empty() && driver_retries.is_empty(),
        "{what} (seed {seed}): deadlocks or serialization failures: ingest statements {:?}, source calls {driver_retries:?}",
        stats.retries
    );
    Run { stats, monitor }
}

/// After the run: every source to `infinity`, the last sealed read, the replay of the whole log
/// and the final checks of the concurrency test.
fn finish(what: &str, seed: u64, cluster: &Cluster, r: &mut Run, lag: bool) {
    let names = advance_every_source_to_infinity(&mut cluster.connect_as(DB, OWNER))
        .unwrap_or_else(|e| panic!("advance to infinity: {}", describe(&e)));
    let mut c = cluster.connect(DB);
    eprintln!("  every source to infinity: {names:?}");
    let shared = Shared::new(0);
    snapshot_sealed(
        &mut c,
        &mut r.monitor.sealed,
        &mut r.monitor.last_read_wm,
        &shared,
    )
    .unwrap_or_else(|e| panic!("sealed read: {}", describe(&e)));
    shared.assert_clean(what, seed, Vec::new());
    let rp = replay_check(&mut c).unwrap_or_else(|e| panic!("replay: {}", describe(&e)));
    assert!(
        rp.violations.is_empty(),
        "{what} (seed {seed}): the log does not replay:\n{}",
        rp.violations.join("\n")
    );
    let v = final_checks(
        &mut c,
        &Expected {
            rows: r.stats.rows as i64,
            batches: r.stats.batches as i64,
            pairs: r.stats.pairs as i64,
            advancer: &r.monitor.sealed,
            windows: Windows::TUMBLING,
        },
    )
    .unwrap_or_else(|e| panic!("final checks: {}", describe(&e)));
    assert!(
        v.is_empty(),
        "contract violations after the {what} run (seed {seed}):\n{}",
        v.join("\n")
    );

    // The run exercised what it is meant to: print what happened, and fail if it was vacuous.
    let r = text_rows(
        &mut c,
        "SELECT (SELECT count(*) FROM wm_log)::text,
                (SELECT count(*) FROM wm_log WHERE op = 'mark_idle')::text,
                (SELECT count(*) FROM (SELECT op, wm_after, lag(wm_after) OVER (ORDER BY seq) AS prev FROM wm_log) l
                 WHERE op = 'batch' AND wm_after IS DISTINCT FROM prev)::text,
                (SELECT count(*) FROM (SELECT op, wm_after, lag(wm_after) OVER (ORDER BY seq) AS prev FROM wm_log) l
                 WHERE op <> 'batch' AND wm_after IS DISTINCT FROM prev)::text,
                (SELECT count(*) FROM faults_history WHERE kind = 'main')::text,
                (SELECT count(*) FROM faults_history WHERE kind = 'late')::text,
                (SELECT count(*) FROM faults_refused)::text,
                (SELECT duplicates FROM eventtime.pipelines WHERE name = 'faults')::text,
                (SELECT count(*) FROM (SELECT at, max(at) OVER (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS m
                                       FROM wm_log) l WHERE at < m)::text",
    )
    .unwrap();
    let n: Vec<i64> = r[0]
        .iter()
        .map(|x| x.as_deref().unwrap().parse().unwrap())
        .collect();
    eprintln!(
        "  log: {} changes, {} mark_idle; the pipeline watermark moved in {} ingest statements and {} source calls; history: {} main, {} late; {} refused, {} duplicates",
        n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]
    );
    // A transaction's now() is its start, before it queued for the lock: a change can be judged
    // at an earlier processing time than the change before it (the model replays that too).
    eprintln!(
        "  {} changes were judged at a now() earlier than a change ordered before them",
        n[8]
    );
    assert!(
        n[1] > 0 && n[3] > 0 && n[4] > 0 && n[5] > 0 && n[6] > 0 && n[7] > 0 && (n[2] > 0 || !lag),
        "{what}: the workload did not exercise idle sources, advances, firings, late versions, refused rows, duplicates{}: {n:?}",
        if lag { " and advances by ingest statements" } else { "" }
    );
}

/// The source threads of a lag pipeline: `ext` advances often and is marked idle now and then;
/// `ext2` is mostly idle: marked so, or pausing beyond the idle timeout of 2 s (it times out), it
/// counts again when it advances, often behind the pipeline watermark; the same thread also
/// advances the source `watermark_lag` itself and marks it and `ext` idle. Both threads advance
/// to around the watermark of the source `watermark_lag`.
fn lag_drivers(crash_mode: bool) -> Vec<DriverConfig> {
    vec![
        DriverConfig {
            own: vec!["ext".into()],
            others: vec![],
            pause_ms: (30, 150),
            long_pause: 0.0,
            long_pause_ms: 0,
            offset_minutes: (-30, 60),
            anchor_source: Some(LAG_SOURCE.into()),
            p_mark_own: 0.12,
            p_mark_other: 0.0,
            crash_mode,
        },
        DriverConfig {
            own: vec!["ext2".into(), LAG_SOURCE.into()],
            others: vec!["ext".into()],
            pause_ms: (50, 250),
            long_pause: 0.2,
            long_pause_ms: 2_500,
            offset_minutes: (-60, 60),
            anchor_source: Some(LAG_SOURCE.into()),
            p_mark_own: 0.3,
            p_mark_other: 0.12,
            crash_mode,
        },
    ]
}

#[test]
fn lag_ingest_with_sources_never_deadlocks_and_accounts_for_every_row() {
    let seed = seed("sources_lag");
    let started = Instant::now();
    let cluster = start("sources_lag", &["deadlock_timeout = 20ms"], &lag_setup());
    let workers = 6;
    let total = env_num("FAULTS_LAG_EVENTS", 30_000);
    let wcfg = WorkerConfig {
        quota_rows: total / workers as u64,
        crash_mode: false,
        min_kills: 0,
        pause_ms: env_num("FAULTS_LAG_PAUSE_MS", 250),
        two_statements: 0.15,
    };
    let mcfg = MonitorConfig {
        crash_mode: false,
        exact_minimum: false,
        pause_ms: (5, 25),
        sealed_every: 10,
        replay_every: 40,
        check_every: 80,
    };
    let mut r = run(
        "sources_lag",
        seed,
        &cluster,
        workers,
        &wcfg,
        &lag_drivers(false),
        &mcfg,
        None,
    );
    eprintln!("  run took {:.1} s", started.elapsed().as_secs_f64());
    finish("sources_lag", seed, &cluster, &mut r, true);
    eprintln!(
        "[sources_lag] passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn concurrent_sources_never_move_the_watermark_back() {
    let seed = seed("sources_many");
    let started = Instant::now();
    let cluster = start(
        "sources_many",
        &["deadlock_timeout = 200ms"],
        &format!("{}\n{LOG_SETUP}", setup()),
    );
    let names: Vec<String> = (0..4).map(|i| format!("kafka-{i}")).collect();
    {
        // Every source registers at T0 before the run, so that the first minimum counts them all.
        let mut c = cluster.connect_as(DB, OWNER);
        for n in &names {
            logged_op(
                &mut c,
                &Op::Advance {
                    source: n.clone(),
                    to: T0,
                },
            )
            .unwrap_or_else(|e| panic!("{}", describe(&e)));
        }
    }
    let workers = 4;
    let total = env_num("FAULTS_SOURCES_EVENTS", 24_000);
    let wcfg = WorkerConfig {
        quota_rows: total / workers as u64,
        crash_mode: false,
        min_kills: 0,
        pause_ms: env_num("FAULTS_SOURCES_PAUSE_MS", 250),
        two_statements: 0.0,
    };
    let dcfgs: Vec<DriverConfig> = names
        .iter()
        .map(|n| DriverConfig {
            own: vec![n.clone()],
            others: names.iter().filter(|o| *o != n).cloned().collect(),
            pause_ms: (20, 120),
            long_pause: 0.0,
            long_pause_ms: 0,
            offset_minutes: (-20, 150),
            anchor_source: None,
            p_mark_own: 0.06,
            p_mark_other: 0.04,
            crash_mode: false,
        })
        .collect();
    let mcfg = MonitorConfig {
        crash_mode: false,
        exact_minimum: true,
        pause_ms: (2, 15),
        sealed_every: 10,
        replay_every: 50,
        check_every: 100,
    };
    let mut r = run(
        "sources_many",
        seed,
        &cluster,
        workers,
        &wcfg,
        &dcfgs,
        &mcfg,
        None,
    );
    eprintln!("  run took {:.1} s", started.elapsed().as_secs_f64());

    // At the end: the minimum over the active sources, or where it was if that is behind.
    let mut c = cluster.connect(DB);
    let mut tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .unwrap();
    let rp = replay(&mut tx).unwrap_or_else(|e| panic!("replay: {}", describe(&e)));
    let row = tx
        .query_one(
            &format!(
                "SELECT {}, {}, (SELECT string_agg(format('%s=%s%s', source, watermark, CASE WHEN idle THEN ' (' || idle_reason || ')' ELSE '' END), ', ' ORDER BY source)
                                  FROM eventtime.sources WHERE pipeline = 'faults')
                 FROM (SELECT (SELECT watermark FROM eventtime.pipelines WHERE name = 'faults') AS pw,
                              (SELECT min(watermark) FROM eventtime.sources WHERE pipeline = 'faults' AND NOT idle) AS mn) x",
                micros_sql("pw"),
                micros_sql("mn")
            ),
            &[],
        )
        .unwrap();
    tx.commit().unwrap();
    let (pw, mn, text): (Option<i64>, Option<i64>, Option<String>) =
        (row.get(0), row.get(1), row.get(2));
    let want = match (rp.before_last, mn) {
        (Some(b), Some(m)) => Some(b.max(m)),
        (b, m) => b.or(m),
    };
    eprintln!(
        "  at the end: pipeline watermark {}, minimum over the active sources {}, before the last change {}; sources: {}",
        pw.map(ts_text).unwrap_or_default(),
        mn.map(ts_text).unwrap_or_default(),
        rp.before_last.map(ts_text).unwrap_or_default(),
        text.unwrap_or_default()
    );
    assert!(
        rp.violations.is_empty(),
        "the log does not replay (seed {seed}):\n{}",
        rp.violations.join("\n")
    );
    assert_eq!(
        pw,
        want,
        "the pipeline watermark must be the minimum over the active sources, or where it was before the last change if that minimum is behind (seed {seed})"
    );
    assert!(
        pw.is_some_and(|w| w > T0 + 12 * pg_eventtime_faults::workload::HOUR),
        "the pipeline watermark hardly moved: {pw:?}"
    );
    finish("sources_many", seed, &cluster, &mut r, false);
    eprintln!(
        "[sources_many] passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn kill_9_during_lag_ingest_half_applies_nothing() {
    let seed = seed("sources_crash");
    let started = Instant::now();
    let cluster = start(
        "sources_crash",
        &[
            "deadlock_timeout = 200ms",
            "checkpoint_timeout = 30s",
            "max_wal_size = 256MB",
        ],
        &lag_setup(),
    );
    let workers = 6;
    let total = env_num("FAULTS_LAG_CRASH_EVENTS", 12_000);
    let min_kills = env_num("FAULTS_LAG_KILLS", 4) as usize;
    let wcfg = WorkerConfig {
        quota_rows: total / workers as u64,
        crash_mode: true,
        min_kills,
        pause_ms: env_num("FAULTS_LAG_CRASH_PAUSE_MS", 500),
        two_statements: 0.15,
    };
    let mcfg = MonitorConfig {
        crash_mode: true,
        exact_minimum: false,
        pause_ms: (5, 25),
        sealed_every: 10,
        replay_every: 40,
        check_every: 80,
    };
    let after_recovery = |c: &mut Client| -> Result<Vec<String>, postgres::Error> {
        Ok(replay_check(c)?
            .violations
            .into_iter()
            .map(|v| format!("replay of the log: {v}"))
            .collect())
    };
    let mut r = run(
        "sources_crash",
        seed,
        &cluster,
        workers,
        &wcfg,
        &lag_drivers(true),
        &mcfg,
        Some((min_kills, (2_500, 5_000), &after_recovery)),
    );
    eprintln!("  run took {:.1} s", started.elapsed().as_secs_f64());
    let mut c = cluster.connect(DB);
    let v = consistency(&mut c, &Windows::TUMBLING)
        .unwrap_or_else(|e| panic!("consistency: {}", describe(&e)));
    assert!(
        v.is_empty(),
        "after the crash run (seed {seed}):\n{}",
        v.join("\n")
    );
    finish("sources_crash", seed, &cluster, &mut r, true);
    let log = cluster.log_text();
    let panics: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("PANIC") || l.contains(" XX000 "))
        .take(5)
        .collect();
    assert!(
        panics.is_empty(),
        "server log has internal errors:\n{}",
        panics.join("\n")
    );
    eprintln!(
        "[sources_crash] passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
