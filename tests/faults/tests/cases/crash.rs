//! SPEC §5, crashes: the concurrent workload of the concurrency test while a killer thread kills
//! the postmaster with SIGKILL at random moments (half of them while an advance is in flight) and
//! restarts the server. Clients reconnect; a statement whose commit outcome is unknown is looked
//! up by its batch id (inserted in the same transaction) and sent again only if it did not
//! commit. After each recovery: no advance is half-applied and the window state matches the
//! committed rows. At the end: every committed statement is there exactly once, and the same
//! invariants as in the concurrency test hold.
//! As there, the workload's clients log in as the ordinary role `et_owner`, which owns the source
//! table and the pipeline; the killer's checks connect as the superuser.

use std::thread;
use std::time::Instant;

use pg_eventtime_faults::checks::{consistency, final_checks, Expected};
use pg_eventtime_faults::cluster::Cluster;
use pg_eventtime_faults::db::describe;
use pg_eventtime_faults::workload::{
    create_db, join, join_workers, run_advancer, run_killer, run_worker, setup, AdvancerConfig,
    Shared, WorkerConfig, DB,
};
use pg_eventtime_faults::{env_num, seed};

#[test]
fn kill_9_of_the_server_loses_nothing_and_half_applies_nothing() {
    let seed = seed("crash");
    let started = Instant::now();
    // Checkpoints come often, so that kills fall before, during and after them.
    let cluster = Cluster::start(
        "crash",
        &["checkpoint_timeout = 30s", "max_wal_size = 256MB"],
    );
    create_db(&cluster, &setup());

    let threads = 8usize;
    let total = env_num("FAULTS_CRASH_EVENTS", 80_000);
    let min_kills = env_num("FAULTS_KILLS", 8) as usize;
    let shared = Shared::new(threads);
    let wcfg = WorkerConfig {
        quota_rows: total / threads as u64,
        crash_mode: true,
        min_kills,
        pause_ms: env_num("FAULTS_CRASH_PAUSE_MS", 2000),
        two_statements: 0.0,
    };
    let acfg = AdvancerConfig {
        crash_mode: true,
        pause_ms: (100, 300),
        step_minutes: (1, 25),
        check_every: 25,
    };

    let (stats, adv, killer, errors) = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let (cluster, shared, wcfg) = (&cluster, &shared, &wcfg);
                s.spawn(move || run_worker(cluster, shared, i, seed, wcfg))
            })
            .collect();
        let advancer = s.spawn(|| run_advancer(&cluster, &shared, seed, &acfg));
        let killer = s.spawn(|| run_killer(&cluster, &shared, seed, min_kills, (4_000, 10_000)));
        let mut errors = Vec::new();
        let stats = join_workers(workers, &mut errors);
        let killer = join(killer, "killer thread", &mut errors);
        let adv = join(advancer, "advancing thread", &mut errors);
        (stats, adv, killer, errors)
    });
    shared.assert_clean("crash", seed, errors);
    let (adv, killer) = (adv.unwrap(), killer.unwrap());
    eprintln!(
        "  {} kills ({} of the postmaster alone, {} aimed at an advance in flight), recoveries took {:?} s, {} checks after recovery",
        killer.kills,
        killer.postmaster_only,
        killer.aimed_at_advance,
        killer.recovery_secs.iter().map(|s| (s * 10.0).round() / 10.0).collect::<Vec<_>>(),
        killer.checks
    );
    eprintln!(
        "  {} rows in {} statements {:?}; {} redeliveries, {} in-statement duplicates",
        stats.rows,
        stats.batches,
        stats.statements,
        stats.redeliveries,
        stats.in_statement_duplicates
    );
    eprintln!(
        "  lost connections: {} of ingest threads ({} statements had committed after all, {} were sent again), {} of the advancing thread; retries {:?} / advances {:?}; {} advances, {} mid-run checks; run took {:.1} s",
        stats.connection_losses,
        stats.resolved_committed,
        stats.resent,
        adv.connection_losses,
        stats.retries,
        adv.retries,
        adv.advances,
        adv.checks,
        started.elapsed().as_secs_f64()
    );
    assert!(killer.kills >= min_kills, "only {} kills", killer.kills);

    let mut c = cluster.connect(DB);
    let v = consistency(&mut c, &shared.windows)
        .unwrap_or_else(|e| panic!("consistency: {}", describe(&e)));
    assert!(
        v.is_empty(),
        "after the crash run (seed {seed}):\n{}",
        v.join("\n")
    );
    let v = final_checks(
        &mut c,
        &Expected {
            rows: stats.rows as i64,
            batches: stats.batches as i64,
            pairs: stats.pairs as i64,
            advancer: &adv,
            windows: shared.windows,
        },
    )
    .unwrap_or_else(|e| panic!("final checks: {}", describe(&e)));
    assert!(
        v.is_empty(),
        "contract violations after the crash run (seed {seed}):\n{}",
        v.join("\n")
    );
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
    eprintln!("[crash] passed in {:.1} s", started.elapsed().as_secs_f64());
}
