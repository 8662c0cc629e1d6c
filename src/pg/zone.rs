//! Time zones as PostgreSQL knows them: the [`Zone`] of calendar windows, computed with the
//! zone's rules from the server's time zone database, as `AT TIME ZONE` computes them, so that a
//! pipeline's windows never depend on the session's `TimeZone` or `timezone_abbreviations`.

use std::cell::RefCell;
use std::ffi::CString;

use pgrx::prelude::*;

use crate::core::time::Micros;
use crate::core::window::{AssignError, Window, WindowSpec, Zone};

thread_local! {
    /// The zone last looked up, by name. `pg_tzset` keeps every zone it loads for the backend's
    /// lifetime, so the pointer stays valid.
    static LAST: RefCell<Option<(String, *mut pg_sys::pg_tz)>> = const { RefCell::new(None) };
}

/// A zone of PostgreSQL's time zone database (`pg_tzset`), never a session abbreviation: the
/// conversions are the ones `AT TIME ZONE` makes once it has found the zone.
pub struct PgZone {
    tz: *mut pg_sys::pg_tz,
}

impl PgZone {
    /// The zone `name`; an error for a name the database does not have (a pipeline's zone was
    /// checked at creation, so only a changed time zone database gets there).
    /// `_eventtime.calendar` calls this once per row of an ingest statement: the zone of the
    /// last name asked for is kept, so a statement looks its zone up once.
    pub fn new(name: &str) -> PgZone {
        if let Some(tz) = LAST.with(|l| {
            l.borrow()
                .as_ref()
                .filter(|(n, _)| n == name)
                .map(|(_, tz)| *tz)
        }) {
            return PgZone { tz };
        }
        let c = CString::new(name).unwrap_or_default();
        // SAFETY: pg_tzset reads a NUL-terminated name and returns a zone cached for the
        // backend's lifetime, or NULL.
        let tz = unsafe { pg_sys::pg_tzset(c.as_ptr()) };
        if tz.is_null() {
            error!("time zone \"{name}\" is not in the time zone database");
        }
        LAST.with(|l| *l.borrow_mut() = Some((name.to_string(), tz)));
        PgZone { tz }
    }
}

fn out_of_range() -> ! {
    error!("timestamp out of range in a calendar window's bounds")
}

impl Zone for PgZone {
    fn local(&self, t: Micros) -> Micros {
        let (mut tm, mut fsec, mut offset, mut out) = (pg_sys::pg_tm::default(), 0, 0, 0);
        // SAFETY: plain out-parameters on the stack; the zone is valid (see `new`).
        unsafe {
            if pg_sys::timestamp2tm(
                t,
                &mut offset,
                &mut tm,
                &mut fsec,
                std::ptr::null_mut(),
                self.tz,
            ) != 0
                || pg_sys::tm2timestamp(&mut tm, fsec, std::ptr::null_mut(), &mut out) != 0
            {
                out_of_range()
            }
        }
        out
    }

    fn instant(&self, l: Micros) -> Micros {
        let (mut tm, mut fsec, mut out) = (pg_sys::pg_tm::default(), 0, 0);
        // SAFETY: as above. DetermineTimeZoneOffset resolves local times the clocks skip or
        // repeat as `timestamp AT TIME ZONE` does.
        unsafe {
            if pg_sys::timestamp2tm(
                l,
                std::ptr::null_mut(),
                &mut tm,
                &mut fsec,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            ) != 0
            {
                out_of_range()
            }
            let mut offset = pg_sys::DetermineTimeZoneOffset(&mut tm, self.tz);
            if pg_sys::tm2timestamp(&mut tm, fsec, &mut offset, &mut out) != 0 {
                out_of_range()
            }
        }
        out
    }
}

/// The windows of `spec` that hold `event`, in the spec's time zone.
pub fn windows(spec: &WindowSpec, event: Micros) -> Result<Vec<Window>, AssignError> {
    match spec.time_zone() {
        Some(name) => spec.windows(event, &PgZone::new(name)),
        None => spec.windows(event, &crate::core::window::Utc),
    }
}

/// The name of the time zone `name` in PostgreSQL's time zone database, spelled as the database
/// spells it (`europe/berlin` is `Europe/Berlin`); `None` for a name it does not have.
/// Abbreviations (`CET`, `EST`) are not zones: their meaning depends on the session's
/// `timezone_abbreviations`, and they have no rules for summer time. Nor are the files of a system
/// time zone database that stand for the host's settings (`localtime`, `posixrules`) or for none
/// (`Factory`): windows would follow the host, and change after a restore elsewhere.
pub fn canonical(name: &str) -> Option<String> {
    crate::pg::spi::read_one::<String>(
        "SELECT (SELECT name FROM pg_catalog.pg_timezone_names WHERE lower(name) = lower($1) \
                   AND lower(name) NOT IN ('localtime', 'posixrules', 'factory') ORDER BY name = $1 DESC, name LIMIT 1)",
        &[name.into()],
    )
    .expect("pg_timezone_names read")
}
