//! The advance's lock on a pipeline's state table, taken so that no writer queues behind a wait.
//!
//! Ingest statements hold `ROW EXCLUSIVE` on the state table until their transaction ends; the
//! advance needs `EXCLUSIVE` (see `api::watermark`). Waiting for it in the lock queue the plain
//! way (`LOCK TABLE`) makes every writer that comes after the advance queue behind it, for as
//! long as the advance waits: one ingestion job idle in its transaction would stop every other
//! writer of the pipeline. So the advance never waits in the queue for long:
//!
//! 1. it tries the lock without waiting;
//! 2. failing that, it waits for the transactions that hold a conflicting lock now to end
//!    (`WaitForLockers`, as `CREATE INDEX CONCURRENTLY` does), which puts nobody behind it: new
//!    writers go on;
//! 3. then tries again without waiting, and failing that (writers that started meanwhile hold
//!    it), waits in the queue for at most [`QUEUE_WAIT`] (`_eventtime.lock_briefly`), enough for
//!    running statements to end, and goes back to 2 if that was not enough.
//!
//! A writer idle in its transaction therefore delays only the advance of its own pipeline (step
//! 2 waits for it), and other writers queue behind the advance for at most [`QUEUE_WAIT`] at a
//! time. `eventtime.tick()` takes the lock only without waiting, and skips a pipeline whose state
//! is held. The caller's `lock_timeout` bounds each wait, and `statement_timeout` the whole.

use pgrx::prelude::*;

use crate::pg::error::EtError;

/// How long the advance waits in the lock queue at a time, in milliseconds; the same value is
/// the `lock_timeout` of `_eventtime.lock_briefly`.
pub const QUEUE_WAIT: &str = "20ms";

/// How long `eventtime.tick()` waits for the writers of one pipeline before it skips it: enough
/// for running statements to end, so that a pipeline under a steady load of short transactions
/// still moves, and short, so that one idle in its transaction costs the tick little.
pub const TICK_WAIT: &std::ffi::CStr = c"200ms";

/// Runs `f` with `lock_timeout` set to `timeout`, in a GUC nest level of its own (restored after
/// `f`, or by the abort of the (sub)transaction on an error).
pub fn with_lock_timeout<R>(timeout: &std::ffi::CStr, f: impl FnOnce() -> R) -> R {
    let level = crate::pg::security::set_in_nest_level(c"lock_timeout", timeout);
    let r = f();
    // SAFETY: closes the nest level opened above; every level above it was closed by `f`.
    unsafe { pg_sys::AtEOXact_GUC(true, level) };
    r
}

/// The oid of table `name` (a qualified, quoted name) of pipeline `pipeline`; 55000 when it is
/// gone.
pub fn relation_oid(pipeline: &str, name: &str) -> pg_sys::Oid {
    crate::pg::spi::read_one::<pg_sys::Oid>(
        "SELECT pg_catalog.to_regclass($1)::pg_catalog.oid",
        &[name.into()],
    )
    .expect("relation lookup")
    .unwrap_or_else(|| {
        EtError::TableGone {
            pipeline: pipeline.to_string(),
            table: name.to_string(),
        }
        .raise()
    })
}

/// Takes `EXCLUSIVE` on `rel` without waiting; whether it got it.
pub fn try_exclusive(rel: pg_sys::Oid) -> bool {
    // SAFETY: a lock request on a relation of this database, released at the transaction's end.
    unsafe { pg_sys::ConditionalLockRelationOid(rel, pg_sys::ExclusiveLock as i32) }
}

/// Takes `EXCLUSIVE` on `rel` (named `name`) as described at the top of this module. Runs as
/// the role that may lock it.
pub fn exclusive_without_queueing(rel: pg_sys::Oid, name: &str) {
    loop {
        if try_exclusive(rel) {
            return;
        }
        wait_for_holders(rel);
        if try_exclusive(rel) {
            return;
        }
        let got = Spi::get_one_with_args::<bool>(
            "SELECT _eventtime.lock_briefly($1::pg_catalog.regclass)",
            &[name.into()],
        )
        .expect("brief lock")
        .unwrap_or(false);
        if got {
            return;
        }
        pg_sys::check_for_interrupts!();
    }
}

/// Waits for every transaction that holds a lock on `rel` conflicting with `EXCLUSIVE` now,
/// without asking for the lock: nobody waits behind this.
fn wait_for_holders(rel: pg_sys::Oid) {
    let tag = pg_sys::LOCKTAG {
        // SAFETY: reads a backend global.
        locktag_field1: unsafe { pg_sys::MyDatabaseId }.to_u32(),
        locktag_field2: rel.to_u32(),
        locktag_field3: 0,
        locktag_field4: 0,
        locktag_type: pg_sys::LockTagType::LOCKTAG_RELATION as u8,
        locktag_lockmethodid: pg_sys::DEFAULT_LOCKMETHOD as u8,
    };
    // SAFETY: waits on the virtual transaction locks of the current holders; interruptible.
    unsafe { pg_sys::WaitForLockers(tag, pg_sys::ExclusiveLock as i32, false) };
}

/// The writers of `rel` that hold it while idle in their transaction, as "pid N (role R), idle
/// in transaction since T", for `eventtime.pipelines` and `explain`. Read as the catalog's
/// owner, who sees every session.
pub fn idle_holders(rel: pg_sys::Oid) -> Vec<String> {
    crate::pg::security::as_catalog_owner(|| {
        Spi::connect(|client| {
            client
                .select(
                    "SELECT pg_catalog.format('pid %s (role %s), idle in transaction since %s', a.pid, a.usename, a.state_change) \
                     FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid \
                     WHERE l.locktype OPERATOR(pg_catalog.=) 'relation' AND l.relation OPERATOR(pg_catalog.=) $1 \
                       AND l.database OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) \
                       AND l.granted AND l.mode OPERATOR(pg_catalog.=) 'RowExclusiveLock' \
                       AND a.state LIKE 'idle in transaction%' AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() \
                     ORDER BY a.pid",
                    None,
                    &[rel.into()],
                )
                .expect("lock read")
                .map(|r| r.get::<String>(1).expect("holder").expect("holder"))
                .collect()
        })
    })
}
