//! `eventtime.advance_watermark`: moves a pipeline's watermark forward, fires every window that
//! ends at or before it and purges every window whose deadline it has reached.
//!
//! Locks, in the order taken:
//! 1. `EXCLUSIVE` on the pipeline's state table. Ingest statements hold `ROW EXCLUSIVE` on it from
//!    their start to their commit, so the advance waits for every running ingest transaction, and
//!    ingest statements that start later queue behind the advance. Readers of the views are not
//!    blocked.
//! 2. The pipeline's catalog row, `FOR UPDATE`. Ingest reads the watermark `FOR SHARE`, so a
//!    statement whose snapshot predates a committed advance still classifies against the new
//!    watermark.
//! After the locks every statement takes a fresh snapshot (READ COMMITTED), so it sees every
//! ingest transaction that committed while the advance waited: no committed row can be missed by
//! the firing of its window.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::pg::catalog;
use crate::pg::error::EtError;

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn advance_watermark(
    pipeline: Option<&str>,
    watermark: Option<TimestampWithTimeZone>,
) -> TableIterator<
    'static,
    (name!(windows_fired, i64), name!(windows_purged, i64), name!(watermark, Option<TimestampWithTimeZone>)),
> {
    const F: &str = "eventtime.advance_watermark";
    let name = pipeline.unwrap_or_else(|| EtError::NullArgument { function: F, argument: "pipeline" }.raise());
    let new = watermark.unwrap_or_else(|| EtError::NullArgument { function: F, argument: "watermark" }.raise());
    let p = catalog::load(name);
    // SAFETY: XactIsoLevel is a plain global of the backend, read on the backend's own thread.
    let iso = unsafe { pg_sys::XactIsoLevel };
    if iso != pg_sys::XACT_READ_COMMITTED as i32 {
        EtError::WrongIsolation { function: F, pipeline: name.to_string() }.raise()
    }
    let (fired, purged, now) = Spi::connect_mut(|client| {
        client
            .update(format!("LOCK TABLE {} IN EXCLUSIVE MODE", p.def.table("state")).as_str(), None, &[])
            .expect("state lock");
        let current = client
            .update("SELECT watermark FROM _eventtime.pipeline WHERE id = $1 FOR UPDATE", None, &[p.id.into()])
            .expect("catalog lock")
            .first()
            .get::<TimestampWithTimeZone>(1)
            .expect("watermark");
        if let Some(cur) = current {
            if new <= cur {
                pgrx::notice!(
                    "watermark {new} is not ahead of the watermark {cur} of pipeline \"{name}\": nothing changed"
                );
                return (0, 0, Some(cur));
            }
        }
        client
            .update("UPDATE _eventtime.pipeline SET watermark = $2 WHERE id = $1", None, &[p.id.into(), new.into()])
            .expect("watermark update");
        // Fire first, from the state as it is; then purge what reached its deadline.
        let fired = client
            .update(p.def.fire_statement().as_str(), None, &[new.into(), current.into()])
            .expect("fire")
            .first()
            .get::<i64>(1)
            .expect("fired")
            .unwrap_or(0);
        let purged = client
            .update(p.def.purge_statement().as_str(), None, &[new.into()])
            .expect("purge")
            .first()
            .get::<i64>(1)
            .expect("purged")
            .unwrap_or(0);
        (fired, purged, Some(new))
    });
    TableIterator::once((fired, purged, now))
}
