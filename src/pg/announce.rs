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

/// Sends the notification of one statement of `pipeline` that wrote `main`, `late` and
/// `restatement` versions under `watermark`; nothing when it wrote none.
pub fn announce(pipeline: &str, main: i64, late: i64, restatement: i64, watermark: Option<i64>) {
    if main + late + restatement == 0 {
        return;
    }
    let seq = SEQ.with(|s| {
        s.set(s.get() + 1);
        s.get()
    });
    let payload = serde_json::json!({
        "pipeline": pipeline,
        "versions": {"main": main, "late": late, "restatement": restatement},
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

    /// The trigger function's announcement of the late versions its statement wrote.
    #[pg_extern(volatile, parallel_unsafe)]
    #[search_path(pg_catalog, pg_temp)]
    fn announce(
        pipeline: &str,
        main: i64,
        late: i64,
        restatement: i64,
        watermark: Option<TimestampWithTimeZone>,
    ) {
        super::announce(
            pipeline,
            main,
            late,
            restatement,
            watermark.map(|w| w.into_inner()),
        );
    }
}
