//! `NOTIFY eventtime`: every statement that writes versions announces them once, with how many
//! of each kind and the watermark, delivered at commit (nothing on rollback), as PostgreSQL
//! delivers notifications. A notification wakes a consumer up; what was written is read with
//! `eventtime.changes`. Anyone may `NOTIFY` on any channel, so a consumer treats the payload as a
//! hint, never as data.

use std::cell::Cell;

use pgrx::prelude::*;

use crate::core::time;

pub const CHANNEL: &str = "eventtime";

thread_local! {
    /// Numbers the notifications of this session: PostgreSQL delivers two notifications with the
    /// same payload in one transaction once, and two statements may write the same counts.
    static SEQ: Cell<u64> = const { Cell::new(0) };
}

/// How many versions of each kind one statement wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Versions {
    pub main: i64,
    pub late: i64,
    /// Versions of sessions absorbed by a merged session.
    pub merged: i64,
    pub restatement: i64,
}

/// Sends the notification of one statement of `pipeline` that wrote `v` under `watermark`;
/// nothing when it wrote none.
pub fn announce(pipeline: &str, v: Versions, watermark: Option<i64>) {
    if v.main + v.late + v.merged + v.restatement == 0 {
        return;
    }
    let seq = SEQ.with(|s| {
        s.set(s.get() + 1);
        s.get()
    });
    let payload = serde_json::json!({
        "pipeline": pipeline,
        "versions": {"main": v.main, "late": v.late, "merged": v.merged, "restatement": v.restatement},
        "watermark": watermark.map(time::iso),
        "seq": seq,
    })
    .to_string();
    Spi::run_with_args(
        "SELECT pg_catalog.pg_notify($1, $2)",
        &[CHANNEL.into(), payload.as_str().into()],
    )
    .expect("pg_notify");
}

#[pg_schema]
mod _eventtime {
    use pgrx::datum::TimestampWithTimeZone;
    use pgrx::prelude::*;

    /// The trigger function's announcement of the late (and, for sessions, merged) versions its
    /// statement wrote.
    #[pg_extern(volatile, parallel_unsafe)]
    #[search_path(pg_catalog, pg_temp)]
    fn announce(
        pipeline: &str,
        main: i64,
        late: i64,
        restatement: i64,
        watermark: Option<TimestampWithTimeZone>,
        merged: default!(i64, 0),
    ) {
        super::announce(
            pipeline,
            super::Versions {
                main,
                late,
                merged,
                restatement,
            },
            watermark.map(|w| w.into_inner()),
        );
    }
}
