//! Time zones as PostgreSQL knows them: the [`Zone`] of calendar windows, computed by
//! PostgreSQL's own `AT TIME ZONE` (`timestamptz_zone` and `timestamp_zone`), so that a pipeline's
//! windows follow the server's time zone database and never the session's `TimeZone`.

use pgrx::prelude::*;
use pgrx::{direct_function_call, IntoDatum};

use crate::core::time::Micros;
use crate::core::window::{AssignError, Window, WindowSpec, Zone};

/// A zone by name, as `AT TIME ZONE` takes it.
pub struct PgZone {
    name: pg_sys::Datum,
}

impl PgZone {
    pub fn new(name: &str) -> PgZone {
        PgZone {
            name: name.into_datum().expect("zone name"),
        }
    }
}

impl Zone for PgZone {
    fn local(&self, t: Micros) -> Micros {
        // SAFETY: both functions are PostgreSQL's own, called with a text datum and a timestamp.
        unsafe {
            direct_function_call::<i64>(
                pg_sys::timestamptz_zone,
                &[Some(self.name), Some(pg_sys::Datum::from(t))],
            )
        }
        .expect("AT TIME ZONE returns a timestamp")
    }

    fn instant(&self, l: Micros) -> Micros {
        // SAFETY: as above.
        unsafe {
            direct_function_call::<i64>(
                pg_sys::timestamp_zone,
                &[Some(self.name), Some(pg_sys::Datum::from(l))],
            )
        }
        .expect("AT TIME ZONE returns a timestamptz")
    }
}

/// The windows of `spec` that hold `event`, in the spec's time zone.
pub fn windows(spec: &WindowSpec, event: Micros) -> Result<Vec<Window>, AssignError> {
    match spec.time_zone() {
        Some(name) => spec.windows(event, &PgZone::new(name)),
        None => spec.windows(event, &crate::core::window::Utc),
    }
}

/// Whether PostgreSQL knows the time zone `name` (a full name or an abbreviation).
pub fn known(name: &str) -> bool {
    Spi::get_one_with_args::<bool>(
        "SELECT EXISTS (SELECT FROM pg_catalog.pg_timezone_names WHERE name = $1) \
             OR EXISTS (SELECT FROM pg_catalog.pg_timezone_abbrevs WHERE abbrev = $1)",
        &[name.into()],
    )
    .expect("pg_timezone_names read")
    .unwrap_or(false)
}
