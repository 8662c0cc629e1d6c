//! SPEC §5, concurrency: 8 ingest threads (multi-row INSERT, COPY and eventtime.ingest, each
//! statement its own transaction, with on-time, late, too-late and redelivered rows and duplicates
//! inside statements) and one thread advancing the watermark a few times per second. Every
//! committed row must be accounted for exactly once, the latest version of every window must be
//! the aggregate of its accepted rows, sealed rows must never change, versions must be gapless.
//! The source table, `batches` and the pipeline belong to the ordinary role `et_owner`; the ingest
//! and advancing threads log in as it, the checks as the superuser.
//!
//! The same run once more with hopping windows (SPEC §7: 1 hour windows sliding by 20 minutes,
//! three per row): every check then holds per (row, window) pair.

use std::sync::atomic::Ordering;
use std::thread;
use std::time::Instant;

use pg_eventtime_faults::checks::{final_checks, mixed_landings, Expected};
use pg_eventtime_faults::cluster::Cluster;
use pg_eventtime_faults::windows::Windows;
use pg_eventtime_faults::workload::{
    create_db, join, join_workers, run_advancer, run_worker, setup_for, AdvancerConfig, Shared,
    WorkerConfig, DB, MINUTE,
};
use pg_eventtime_faults::{env_num, seed};

#[test]
fn concurrent_ingest_and_advances_account_for_every_row() {
    run(
        "concurrency",
        Windows::TUMBLING,
        env_num("FAULTS_EVENTS", 200_000),
    );
}

/// Each row is in three windows, and its pairs land on their own: often one refused or late and
/// another open (checked to have happened).
#[test]
fn hopping_windows_account_for_every_row_window_pair() {
    let w = Windows::hopping(20 * MINUTE);
    let (split_refused, split_late) = run(
        "concurrency_hopping",
        w,
        env_num("FAULTS_HOPPING_EVENTS", 100_000),
    );
    assert!(
        split_refused > 0 && split_late > 0,
        "the hopping run had {split_refused} events with accepted and refused pairs and {split_late} with pairs in a main firing and in a late version; both must occur"
    );
}

/// Runs the concurrent workload on a pipeline with windows `w` and asserts the final checks;
/// returns `checks::mixed_landings`.
fn run(name: &str, w: Windows, total: u64) -> (i64, i64) {
    let seed = seed(name);
    let started = Instant::now();
    let cluster = Cluster::start(name, &[]);
    create_db(&cluster, &setup_for(&w));

    let threads = 8usize;
    let shared = Shared::with_windows(threads, w);
    let wcfg = WorkerConfig {
        quota_rows: total / threads as u64,
        crash_mode: false,
        min_kills: 0,
        pause_ms: env_num("FAULTS_PAUSE_MS", 350),
        two_statements: 0.0,
    };
    let acfg = AdvancerConfig {
        crash_mode: false,
        pause_ms: (100, 300),
        step_minutes: (1, 25),
        check_every: 20,
    };

    let (stats, adv, errors) = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let (cluster, shared, wcfg) = (&cluster, &shared, &wcfg);
                s.spawn(move || run_worker(cluster, shared, i, seed, wcfg))
            })
            .collect();
        let advancer = s.spawn(|| run_advancer(&cluster, &shared, seed, &acfg));
        let mut errors = Vec::new();
        let stats = join_workers(workers, &mut errors);
        let adv = join(advancer, "advancing thread", &mut errors);
        (stats, adv, errors)
    });
    shared.assert_clean(name, seed, errors);
    let adv = adv.unwrap();
    eprintln!(
        "  {} windows: {} rows ({} (row, window) pairs) in {} statements {:?}; {} redeliveries, {} in-statement duplicates; ingest() counts [accepted, late, refused, duplicates] = {:?}",
        w.describe(), stats.rows, stats.pairs, stats.batches, stats.statements, stats.redeliveries, stats.in_statement_duplicates, stats.ingest_counts
    );
    eprintln!(
        "  retries of ingest statements: {:?}; of advances: {:?}; {} advances, {} windows fired, {} mid-run checks; run took {:.1} s",
        stats.retries,
        adv.retries,
        adv.advances,
        adv.fired_known,
        adv.checks,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        shared.next_batch.load(Ordering::SeqCst) - 1,
        stats.batches as i64
    );

    let mut c = cluster.connect(DB);
    let v = final_checks(
        &mut c,
        &Expected {
            rows: stats.rows as i64,
            batches: stats.batches as i64,
            pairs: stats.pairs as i64,
            advancer: &adv,
            windows: w,
        },
    )
    .unwrap_or_else(|e| panic!("final checks: {}", pg_eventtime_faults::db::describe(&e)));
    assert!(
        v.is_empty(),
        "contract violations after the {name} run (seed {seed}):\n{}",
        v.join("\n")
    );
    let mixed = mixed_landings(&mut c, &w)
        .unwrap_or_else(|e| panic!("landings: {}", pg_eventtime_faults::db::describe(&e)));
    eprintln!(
        "  events with accepted and refused pairs: {}; with pairs in a main firing and in a late version: {}",
        mixed.0, mixed.1
    );
    eprintln!(
        "[{name}] passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    mixed
}
