//! Out-of-process fault and concurrency tests of pg_eventtime (SPEC §5). Each test starts its own
//! PostgreSQL 15 server (see `cluster`), drives it from several client threads and checks the
//! guarantees over committed data.
//!
//! Run: `cd tests/faults && cargo test --release -- --test-threads=1`
//! Environment: `FAULTS_PG_BIN` (default /usr/lib/postgresql/15/bin), `FAULTS_SEED` (default
//! fixed, printed by every test), `FAULTS_KEEP` (keep the cluster directory).

pub mod checks;
pub mod cluster;
pub mod db;
pub mod roles;
pub mod rows;
pub mod sessions;
pub mod sources;
pub mod windows;
pub mod workload;

pub const DEFAULT_SEED: u64 = 20_261_029;

/// The seed of this run, printed so that a failure can be replayed with `FAULTS_SEED=<n>`.
pub fn seed(test: &str) -> u64 {
    let s = std::env::var("FAULTS_SEED")
        .ok()
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("FAULTS_SEED must be a u64, not {v:?}"))
        })
        .unwrap_or(DEFAULT_SEED);
    eprintln!("[{test}] FAULTS_SEED={s}");
    s
}

/// A number from the environment, for scaling a test down or up while debugging.
pub fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}
