//! `eventtime.landing`: the landing rule of SPEC §2 as a pure SQL function.

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;

use crate::core::landing;
use crate::core::time::fixed_micros;
use crate::pg::error::invalid;

#[pg_extern(immutable, strict, parallel_safe)]
fn landing(
    event_time: TimestampWithTimeZone,
    window_end: TimestampWithTimeZone,
    watermark: TimestampWithTimeZone,
    allowed_lateness: default!(Interval, "'0'"),
) -> &'static str {
    let lateness = match fixed_micros(allowed_lateness.months(), allowed_lateness.days(), allowed_lateness.micros()) {
        Some(l) if l >= 0 => l,
        Some(_) => invalid(format!("allowed_lateness \"{allowed_lateness}\" must not be negative"), None).raise(),
        None => invalid(
            format!("allowed_lateness \"{allowed_lateness}\" is not a fixed duration"),
            Some("Months and years have no fixed length; give the duration in days, hours or smaller units."),
        )
        .raise(),
    };
    landing::landing(
        event_time.into_inner(),
        window_end.into_inner(),
        watermark.into_inner(),
        lateness,
    )
    .as_str()
}
