//! One test binary for all fault tests, so that `cargo test` runs every one of them even when an
//! earlier one fails (cargo stops at the first failing test binary). Run them one at a time:
//! `cargo test --release -- --test-threads=1` (each starts its own PostgreSQL server).

#[path = "cases/concurrency.rs"]
mod concurrency;
#[path = "cases/corrections.rs"]
mod corrections;
#[path = "cases/crash.rs"]
mod crash;
#[path = "cases/dump_restore.rs"]
mod dump_restore;
#[path = "cases/interleaving.rs"]
mod interleaving;
#[path = "cases/late_batches.rs"]
mod late_batches;
#[path = "cases/offsets.rs"]
mod offsets;
#[path = "cases/operations.rs"]
mod operations;
#[path = "cases/roles.rs"]
mod roles;
#[path = "cases/sessions.rs"]
mod sessions;
#[path = "cases/sources.rs"]
mod sources;
#[path = "cases/tenancy.rs"]
mod tenancy;
