//! Window assignment. A pipeline's windows are described by a [`WindowSpec`]; the spec says
//! which windows an event time belongs to, and nothing else does: the ingest statements call the
//! assignment functions built on [`WindowSpec::windows`] (`_eventtime.tumble_start`,
//! `_eventtime.hop`, `_eventtime.calendar`), `explain()` calls it directly, and every other
//! statement reads the `window_end` the assignment gave.
//!
//! Three variants:
//!
//! - **Tumbling**, a fixed duration: `[origin + k·size, origin + (k+1)·size)` in absolute time.
//! - **Hopping**, fixed durations: `[origin + k·slide, origin + k·slide + size)`; a row belongs
//!   to every window that holds it (`size / slide` of them when the slide divides the size).
//! - **Calendar**, a period of whole local days or whole months in a time zone, tumbling (slide
//!   equal to size) or hopping: window `k` is `[origin + k·slide, origin + k·slide + size)` in
//!   wall-clock time, each bound turned into an instant in the zone. A local day is 23 or 25
//!   hours on the days the clocks change; months are added as PostgreSQL adds them (the day of
//!   the month clamped to the month's last day).
//!
//! - **Cumulate** (Apache Flink's `CUMULATE`): a period (a fixed duration, or local days or months
//!   in a time zone) cut by a step: the windows `[p, p + step)`, `[p, p + 2·step)` ... `[p, q)`
//!   of the period `[p, q)`, all with the period's start; the last one ends at the period's end.
//!   Steps of a calendar period are counted on the wall clock from the period's start, so a
//!   local day by the hour has a window ending at each local hour: 23 windows on the day the
//!   clocks skip an hour, 24 on the day they repeat one (one step then lasts two hours).
//!
//! A row is in window `[start, end)` when `start <= t < end` in absolute time. The windows of one
//! spec are ordered: starts and ends both grow with `k` (for cumulate windows, the ends).

use serde::{Deserialize, Serialize};

use super::time::{self, Micros, MICROS_PER_DAY};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: Micros,
    pub end: Micros,
}

/// A calendar period: whole local days (a week is 7) or whole months (a year is 12).
/// Stored as `{"days": n}` or `{"months": n}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    Days(i32),
    Months(i32),
}

impl Period {
    pub fn count(self) -> i64 {
        match self {
            Period::Days(n) | Period::Months(n) => n as i64,
        }
    }

    /// Wall-clock time `l` moved by `n` of this period's units (days or months).
    fn add(self, l: Micros, n: i64) -> Option<Micros> {
        match self {
            Period::Days(_) => n.checked_mul(MICROS_PER_DAY)?.checked_add(l),
            Period::Months(_) => add_months(l, n),
        }
    }

    /// How many units of this period lie between wall-clock times `from` and `l`, rounded down,
    /// give or take one (months are counted by their number, not by their length).
    fn units_between(self, from: Micros, l: Micros) -> i64 {
        match self {
            Period::Days(_) => (l as i128 - from as i128).div_euclid(MICROS_PER_DAY as i128) as i64,
            Period::Months(_) => month_index(l) - month_index(from),
        }
    }
}

/// The period or step of a cumulate spec: a fixed duration, or whole local days or months.
/// Stored as `{"us": n}`, `{"days": n}` or `{"months": n}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Span {
    Us(i64),
    Days(i32),
    Months(i32),
}

impl Span {
    /// `us N`, `days N` or `months N`: how the ingest statements pass a span to
    /// `_eventtime.cumulate`.
    pub fn text(self) -> String {
        match self {
            Span::Us(n) => format!("us {n}"),
            Span::Days(n) => format!("days {n}"),
            Span::Months(n) => format!("months {n}"),
        }
    }

    /// The span of [`Span::text`].
    pub fn parse(s: &str) -> Option<Span> {
        let (unit, n) = s.split_once(' ')?;
        match unit {
            "us" => n.parse().ok().map(Span::Us),
            "days" => n.parse().ok().map(Span::Days),
            "months" => n.parse().ok().map(Span::Months),
            _ => None,
        }
    }

    /// Wall-clock time `l` moved by `n` of this span.
    fn add(self, l: Micros, n: i64) -> Option<Micros> {
        match self {
            Span::Us(us) => n.checked_mul(us)?.checked_add(l),
            Span::Days(d) => Period::Days(d).add(l, n.checked_mul(d as i64)?),
            Span::Months(m) => Period::Months(m).add(l, n.checked_mul(m as i64)?),
        }
    }

    /// The longest this span can be, in microseconds (a local day of 25 hours, a month of 31 days).
    pub fn longest(self) -> i128 {
        match self {
            Span::Us(us) => us as i128,
            Span::Days(d) => d as i128 * 25 * 3_600_000_000,
            Span::Months(m) => m as i128 * 31 * MICROS_PER_DAY as i128,
        }
    }

    /// The shortest this span can be, in microseconds (a local day of 23 hours, a month of 28 days).
    pub fn shortest(self) -> i128 {
        match self {
            Span::Us(us) => us as i128,
            Span::Days(d) => d as i128 * 23 * 3_600_000_000,
            Span::Months(m) => m as i128 * 28 * MICROS_PER_DAY as i128,
        }
    }
}

/// How many windows of a cumulate spec one instant can belong to, at most: the steps of its
/// longest period.
pub fn cumulate_windows_per_row(size: Span, step: Span) -> i64 {
    let (longest, shortest) = (size.longest(), step.shortest().max(1));
    (longest / shortest + i128::from(longest % shortest != 0) + 1).min(i64::MAX as i128) as i64
}

/// How wall-clock time relates to absolute time in one time zone. In PostgreSQL it is the zone's
/// own rules (`pg::zone`); the tests here use zones with the rules written out.
pub trait Zone {
    /// The wall-clock time of instant `t`, as microseconds since 2000-01-01 00:00 local.
    fn local(&self, t: Micros) -> Micros;
    /// The instant of wall-clock time `l`. Times the clocks skip or repeat resolve as the zone's
    /// implementation resolves them (PostgreSQL's `AT TIME ZONE`).
    fn instant(&self, l: Micros) -> Micros;
}

/// Coordinated universal time: wall-clock time is absolute time.
pub struct Utc;

impl Zone for Utc {
    fn local(&self, t: Micros) -> Micros {
        t
    }
    fn instant(&self, l: Micros) -> Micros {
        l
    }
}

/// Stored in the catalog's definition as `{"kind": "tumbling", "size_us": ..., "origin_us": ...}`,
/// `{"kind": "hopping", "size_us": ..., "slide_us": ..., "origin_us": ...}` or
/// `{"kind": "calendar", "size": {"days": 1}, "slide": {"days": 1}, "origin_local_us": ...,
/// "time_zone": "Europe/Berlin"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum WindowSpec {
    /// Windows `[origin + k·size, origin + (k+1)·size)` for every integer `k`.
    Tumbling {
        #[serde(rename = "size_us")]
        size: i64,
        #[serde(rename = "origin_us")]
        origin: Micros,
    },
    /// Windows `[origin + k·slide, origin + k·slide + size)`, `0 < slide < size`.
    Hopping {
        #[serde(rename = "size_us")]
        size: i64,
        #[serde(rename = "slide_us")]
        slide: i64,
        #[serde(rename = "origin_us")]
        origin: Micros,
    },
    /// Windows `[origin + k·slide, origin + k·slide + size)` in wall-clock time of `time_zone`;
    /// `slide` equals `size` for tumbling periods. Size and slide are both days or both months.
    Calendar {
        size: Period,
        slide: Period,
        /// The origin as wall-clock time in the zone.
        #[serde(rename = "origin_local_us")]
        origin: Micros,
        time_zone: String,
    },
    /// Cumulate windows: each period of `size` from `origin` (absolute time for a fixed size,
    /// wall-clock time in `time_zone` for days or months) is cut into the windows that start
    /// with it and end a whole number of `step`s later, the last at the period's end.
    Cumulate {
        size: Span,
        step: Span,
        #[serde(rename = "origin_us")]
        origin: Micros,
        /// NULL for a fixed size.
        time_zone: Option<String>,
    },
    /// Session windows: each row's own window is `[t, t + gap)`; the windows of one key that
    /// overlap strictly merge into sessions, which the ingest statement computes from the
    /// pipeline's state (see `core::sqlgen::sessions`). [`WindowSpec::windows`] gives a row's own
    /// window, the one its landing is judged on.
    Session {
        #[serde(rename = "gap_us")]
        gap: i64,
    },
}

/// The most windows one row may belong to (`size / slide`, rounded up): a hopping pipeline with
/// more is refused at creation, and the assignment functions refuse to compute more.
pub const MAX_WINDOWS_PER_ROW: i64 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignError {
    /// The event time is infinite: it belongs to no window.
    Infinite,
    /// A window holding the event time would lie outside PostgreSQL's timestamp range.
    OutOfRange,
    /// Size and slide are not a window spec (not positive, slide longer than size, more than
    /// [`MAX_WINDOWS_PER_ROW`] windows per row).
    BadSpec,
}

/// How many windows of `size` sliding by `slide` can hold one instant, at most.
pub fn windows_per_row(size: i64, slide: i64) -> i64 {
    size / slide + i64::from(size % slide != 0)
}

/// Calendar windows are not computed for event times this close to the ends of the timestamp
/// range (10 years plus the window's size): zones are not defined that far.
const CALENDAR_MARGIN: i64 = 3660 * MICROS_PER_DAY;

impl WindowSpec {
    /// `tumbling`, `hopping`, `cumulate` or `session`, as the catalog's `window_kind` says.
    pub fn kind_name(&self) -> &'static str {
        if self.is_session() {
            "session"
        } else if matches!(self, WindowSpec::Cumulate { .. }) {
            "cumulate"
        } else if self.multi() {
            "hopping"
        } else {
            "tumbling"
        }
    }

    /// Whether windows are sessions, which depend on the rows before them.
    pub fn is_session(&self) -> bool {
        matches!(self, WindowSpec::Session { .. })
    }

    /// Whether a window is identified by its end as well as its start (and its key): sessions,
    /// which an extension at the end makes a new session with the same start, and cumulate
    /// windows, whose steps share their period's start. Every other kind has one window per
    /// start.
    pub fn end_identifies(&self) -> bool {
        matches!(
            self,
            WindowSpec::Session { .. } | WindowSpec::Cumulate { .. }
        )
    }

    /// Whether a row can belong to several windows.
    pub fn multi(&self) -> bool {
        match self {
            WindowSpec::Tumbling { .. } => false,
            WindowSpec::Hopping { .. } | WindowSpec::Cumulate { .. } => true,
            WindowSpec::Calendar { size, slide, .. } => size != slide,
            WindowSpec::Session { .. } => false,
        }
    }

    /// The zone a calendar spec computes in.
    pub fn time_zone(&self) -> Option<&str> {
        match self {
            WindowSpec::Calendar { time_zone, .. } => Some(time_zone),
            WindowSpec::Cumulate { time_zone, .. } => time_zone.as_deref(),
            _ => None,
        }
    }

    /// The window of a tumbling spec that holds `event`.
    pub fn tumbling_window(
        size: i64,
        origin: Micros,
        event: Micros,
    ) -> Result<Window, AssignError> {
        debug_assert!(size > 0);
        if !time::is_finite(event) {
            return Err(AssignError::Infinite);
        }
        let offset = event as i128 - origin as i128;
        let start = origin as i128 + offset.div_euclid(size as i128) * size as i128;
        let end = start + size as i128;
        if start < time::MIN_FINITE as i128 || end > time::MAX_FINITE as i128 {
            return Err(AssignError::OutOfRange);
        }
        Ok(Window {
            start: start as i64,
            end: end as i64,
        })
    }

    /// The windows `[origin + k·slide, origin + k·slide + size)` that hold `event`, in order.
    pub fn fixed_windows(
        size: i64,
        slide: i64,
        origin: Micros,
        event: Micros,
    ) -> Result<Vec<Window>, AssignError> {
        if size <= 0
            || slide <= 0
            || slide > size
            || windows_per_row(size, slide) > MAX_WINDOWS_PER_ROW
        {
            return Err(AssignError::BadSpec);
        }
        if !time::is_finite(event) {
            return Err(AssignError::Infinite);
        }
        // i128: `event - origin` spans more than i64 when both sit near opposite ends.
        let (size, slide) = (size as i128, slide as i128);
        let offset = event as i128 - origin as i128;
        let last = offset.div_euclid(slide);
        let first = (offset - size).div_euclid(slide) + 1;
        (first..=last)
            .map(|k| {
                let start = origin as i128 + k * slide;
                let end = start + size;
                if start < time::MIN_FINITE as i128 || end > time::MAX_FINITE as i128 {
                    return Err(AssignError::OutOfRange);
                }
                Ok(Window {
                    start: start as i64,
                    end: end as i64,
                })
            })
            .collect()
    }

    /// The windows of a calendar spec that hold `event`, computed in `zone`, in order.
    pub fn calendar_windows(
        size: Period,
        slide: Period,
        origin: Micros,
        zone: &dyn Zone,
        event: Micros,
    ) -> Result<Vec<Window>, AssignError> {
        let same_unit = matches!(
            (size, slide),
            (Period::Days(_), Period::Days(_)) | (Period::Months(_), Period::Months(_))
        );
        let (n, s) = (size.count(), slide.count());
        // Sizes of up to 10,000 years, as create_pipeline allows.
        if !same_unit
            || s <= 0
            || s > n
            || n > 3_660_000
            || windows_per_row(n, s) > MAX_WINDOWS_PER_ROW
        {
            return Err(AssignError::BadSpec);
        }
        if !time::is_finite(event) {
            return Err(AssignError::Infinite);
        }
        let span = match size {
            Period::Days(d) => (d as i64 + 2) * MICROS_PER_DAY,
            Period::Months(m) => (m as i64 + 1) * 31 * MICROS_PER_DAY,
        };
        if event < time::MIN_FINITE + CALENDAR_MARGIN + span
            || event > time::MAX_FINITE - CALENDAR_MARGIN - span
        {
            return Err(AssignError::OutOfRange);
        }
        let l = zone.local(event);
        // Window k starts `k·s` units after the origin and ends `k·s + n` after it. The units
        // counted on the wall clock place the windows holding `event` within one of the range
        // below; the exact test is on the instants.
        let pos = slide.units_between(origin, l);
        let last = pos.div_euclid(s) + 1;
        let first = (pos - n).div_euclid(s) - 1;
        let mut out = Vec::new();
        for k in first..=last {
            let (Some(start), Some(end)) = (slide.add(origin, k * s), slide.add(origin, k * s + n))
            else {
                return Err(AssignError::OutOfRange);
            };
            let (start, end) = (zone.instant(start), zone.instant(end));
            // A zone that skips a whole local day (Pacific/Apia, 30 December 2011) gives two
            // local starts one instant: a window is identified by its start, so the first is kept.
            if start <= event && event < end && out.last().is_none_or(|w: &Window| w.start != start)
            {
                out.push(Window { start, end });
            }
        }
        if out.is_empty() {
            // Only a zone whose clocks jump by more than a slide can leave an instant outside
            // every window.
            return Err(AssignError::OutOfRange);
        }
        Ok(out)
    }

    /// The windows of a cumulate spec that hold `event`, in order of end: those of the period
    /// holding it that end after it. `zone` is the spec's zone (UTC for a fixed size).
    pub fn cumulate_windows(
        size: Span,
        step: Span,
        origin: Micros,
        zone: &dyn Zone,
        event: Micros,
    ) -> Result<Vec<Window>, AssignError> {
        let positive = |s: Span| match s {
            Span::Us(us) => us > 0,
            Span::Days(d) => d > 0,
            Span::Months(m) => m > 0,
        };
        if !positive(size)
            || !positive(step)
            || step.longest() >= size.shortest()
            || size.longest() > 3_660_000 * MICROS_PER_DAY as i128
            || cumulate_windows_per_row(size, step) > MAX_WINDOWS_PER_ROW
        {
            return Err(AssignError::BadSpec);
        }
        if !time::is_finite(event) {
            return Err(AssignError::Infinite);
        }
        let margin = CALENDAR_MARGIN + size.longest().min(i64::MAX as i128) as i64 * 2;
        if event < time::MIN_FINITE.saturating_add(margin)
            || event > time::MAX_FINITE.saturating_sub(margin)
        {
            return Err(AssignError::OutOfRange);
        }
        // The period holding the event: local bounds from the origin, `k` found by units and
        // checked on the instants.
        let l = zone.local(event);
        let guess: i64 = match size {
            Span::Us(us) => (l as i128 - origin as i128).div_euclid(us as i128) as i64,
            Span::Days(d) => Period::Days(d)
                .units_between(origin, l)
                .div_euclid(d as i64),
            Span::Months(m) => Period::Months(m)
                .units_between(origin, l)
                .div_euclid(m as i64),
        };
        let mut period = None;
        for k in guess - 1..=guess + 1 {
            let (Some(ls), Some(le)) = (size.add(origin, k), size.add(origin, k + 1)) else {
                return Err(AssignError::OutOfRange);
            };
            let (s, e) = (zone.instant(ls), zone.instant(le));
            if s <= event && event < e {
                period = Some((ls, s, e));
                break;
            }
        }
        let Some((local_start, start, end)) = period else {
            return Err(AssignError::OutOfRange);
        };
        let mut out: Vec<Window> = Vec::new();
        let mut j = 1;
        loop {
            let Some(l_end) = step.add(local_start, j) else {
                return Err(AssignError::OutOfRange);
            };
            let e = zone.instant(l_end).min(end);
            // Wall-clock steps the clocks skip end where the next one does: one window.
            if e > event && e > start && out.last().is_none_or(|w| w.end < e) {
                out.push(Window { start, end: e });
            }
            if e >= end {
                break;
            }
            j += 1;
        }
        Ok(out)
    }

    /// Every window that holds `event`, in order of start. `zone` is the spec's time zone; only
    /// calendar specs use it.
    pub fn windows(&self, event: Micros, zone: &dyn Zone) -> Result<Vec<Window>, AssignError> {
        match *self {
            WindowSpec::Tumbling { size, origin } => {
                Ok(vec![Self::tumbling_window(size, origin, event)?])
            }
            WindowSpec::Hopping {
                size,
                slide,
                origin,
            } => Self::fixed_windows(size, slide, origin, event),
            WindowSpec::Calendar {
                size,
                slide,
                origin,
                ..
            } => Self::calendar_windows(size, slide, origin, zone, event),
            WindowSpec::Cumulate {
                size, step, origin, ..
            } => Self::cumulate_windows(size, step, origin, zone, event),
            WindowSpec::Session { gap } => {
                if event == time::INFINITY || event == time::NEG_INFINITY {
                    return Err(AssignError::Infinite);
                }
                let end = event.checked_add(gap).ok_or(AssignError::OutOfRange)?;
                if end > time::MAX_FINITE {
                    return Err(AssignError::OutOfRange);
                }
                Ok(vec![Window { start: event, end }])
            }
        }
    }
}

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d` (H. Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `(y, m, d)` that is `z` days after 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// Days from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
const PG_EPOCH_DAYS: i64 = 10_957;

fn days_in_month(y: i64, m: i64) -> i64 {
    days_from_civil(if m == 12 { y + 1 } else { y }, m % 12 + 1, 1) - days_from_civil(y, m, 1)
}

/// Year and month of wall-clock time `l` as one number of months.
fn month_index(l: Micros) -> i64 {
    let (y, m, _) = civil_from_days(l.div_euclid(MICROS_PER_DAY) + PG_EPOCH_DAYS);
    y * 12 + m - 1
}

/// Wall-clock time `l` plus `n` months, the day clamped to the month's last day, as PostgreSQL
/// adds an interval of months to a timestamp.
pub fn add_months(l: Micros, n: i64) -> Option<Micros> {
    let (days, tod) = (l.div_euclid(MICROS_PER_DAY), l.rem_euclid(MICROS_PER_DAY));
    let (y, m, d) = civil_from_days(days + PG_EPOCH_DAYS);
    let total = (y * 12 + m - 1).checked_add(n)?;
    let (y2, m2) = (total.div_euclid(12), total.rem_euclid(12) + 1);
    let d2 = d.min(days_in_month(y2, m2));
    (days_from_civil(y2, m2, d2) - PG_EPOCH_DAYS)
        .checked_mul(MICROS_PER_DAY)?
        .checked_add(tod)
}

/// Wall-clock (or UTC) time of a date and an hour, in PostgreSQL's microseconds.
pub fn local_time(y: i64, m: i64, d: i64, hour: i64, minute: i64) -> Micros {
    (days_from_civil(y, m, d) - PG_EPOCH_DAYS) * MICROS_PER_DAY
        + hour * 3_600_000_000
        + minute * 60_000_000
}

/// Zones with their rules written out, for the tests here and the in-database test that checks
/// them against PostgreSQL's own zones.
#[cfg(any(test, feature = "pg_test"))]
pub(crate) mod test_zones {
    use super::*;

    const HOUR: i64 = 3_600_000_000;
    const MINUTE: i64 = 60_000_000;

    /// A zone with a standard offset and, between two instants each year, a summer offset;
    /// the rules of the European Union and of the United States written out, as the tz
    /// database has them for 2026–2028.
    pub(crate) struct RuleZone {
        std: i64,
        dst: i64,
        rule: Rule,
    }

    #[derive(Clone, Copy)]
    enum Rule {
        /// No summer time.
        None,
        /// From the last Sunday of March to the last Sunday of October, at 01:00 UTC.
        Eu,
        /// From the second Sunday of March, 02:00 standard time, to the first Sunday of
        /// November, 02:00 summer time.
        Us,
    }

    /// The `nth` Sunday of a month (from the end when `nth` is negative), as days since 1970.
    fn sunday(y: i64, m: i64, nth: i64) -> i64 {
        // 1970-01-01 was a Thursday: (days + 4) mod 7 is the weekday, Sunday 0.
        let first = days_from_civil(y, m, 1);
        let first_sunday = first + (7 - (first + 4).rem_euclid(7)) % 7;
        if nth > 0 {
            first_sunday + 7 * (nth - 1)
        } else {
            let next = days_from_civil(y, m + 1, 1);
            let mut s = first_sunday;
            while s + 7 < next {
                s += 7;
            }
            s
        }
    }

    impl RuleZone {
        pub(crate) fn berlin() -> RuleZone {
            RuleZone {
                std: HOUR,
                dst: 2 * HOUR,
                rule: Rule::Eu,
            }
        }
        pub(crate) fn new_york() -> RuleZone {
            RuleZone {
                std: -5 * HOUR,
                dst: -4 * HOUR,
                rule: Rule::Us,
            }
        }
        pub(crate) fn kolkata() -> RuleZone {
            RuleZone {
                std: 5 * HOUR + 30 * MINUTE,
                dst: 5 * HOUR + 30 * MINUTE,
                rule: Rule::None,
            }
        }

        fn offset(&self, t: Micros) -> i64 {
            let (y, _, _) = civil_from_days(t.div_euclid(MICROS_PER_DAY) + PG_EPOCH_DAYS);
            let day = |d: i64| (d - PG_EPOCH_DAYS) * MICROS_PER_DAY;
            let (from, to) = match self.rule {
                Rule::None => return self.std,
                Rule::Eu => (day(sunday(y, 3, -1)) + HOUR, day(sunday(y, 10, -1)) + HOUR),
                Rule::Us => (
                    day(sunday(y, 3, 2)) + 2 * HOUR - self.std,
                    day(sunday(y, 11, 1)) + 2 * HOUR - self.dst,
                ),
            };
            if from <= t && t < to {
                self.dst
            } else {
                self.std
            }
        }
    }

    impl Zone for RuleZone {
        fn local(&self, t: Micros) -> Micros {
            t + self.offset(t)
        }
        fn instant(&self, l: Micros) -> Micros {
            [l - self.std, l - self.dst]
                .into_iter()
                .find(|&t| self.local(t) == l)
                .unwrap_or(l - self.std)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_zones::RuleZone;
    use super::*;
    use crate::core::time::{INFINITY, NEG_INFINITY};

    const HOUR: i64 = 3_600_000_000;
    const MINUTE: i64 = 60_000_000;

    fn at(y: i64, m: i64, d: i64, h: i64, min: i64) -> Micros {
        local_time(y, m, d, h, min)
    }

    fn daily() -> WindowSpec {
        WindowSpec::Tumbling {
            size: MICROS_PER_DAY,
            origin: at(1970, 1, 1, 0, 0),
        }
    }

    fn calendar(size: Period, slide: Period, origin: Micros, zone: &str) -> WindowSpec {
        WindowSpec::Calendar {
            size,
            slide,
            origin,
            time_zone: zone.into(),
        }
    }

    fn one(spec: &WindowSpec, zone: &dyn Zone, t: Micros) -> (Micros, Micros) {
        let w = spec.windows(t, zone).unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        (w[0].start, w[0].end)
    }

    #[test]
    fn a_row_belongs_to_the_day_that_holds_it() {
        let w = daily().windows(at(2026, 10, 29, 18, 2), &Utc).unwrap();
        assert_eq!(
            w,
            vec![Window {
                start: at(2026, 10, 29, 0, 0),
                end: at(2026, 10, 30, 0, 0)
            }]
        );
    }

    #[test]
    fn the_start_belongs_to_the_window_and_the_end_to_the_next() {
        let start = at(2026, 10, 29, 0, 0);
        assert_eq!(daily().windows(start, &Utc).unwrap()[0].start, start);
        assert_eq!(daily().windows(start - 1, &Utc).unwrap()[0].end, start);
    }

    #[test]
    fn times_before_the_origin_round_down() {
        let spec = WindowSpec::Tumbling {
            size: 10,
            origin: 5,
        };
        let w = |t| spec.windows(t, &Utc).unwrap()[0];
        assert_eq!(w(4), Window { start: -5, end: 5 });
        assert_eq!(w(-5), Window { start: -5, end: 5 });
        assert_eq!(
            w(-6),
            Window {
                start: -15,
                end: -5
            }
        );
    }

    #[test]
    fn origin_shifts_the_grid() {
        let spec = WindowSpec::Tumbling {
            size: MICROS_PER_DAY,
            origin: at(1970, 1, 1, 6, 0),
        };
        let w = spec.windows(at(2026, 10, 29, 0, 0), &Utc).unwrap()[0];
        assert_eq!(w.start, at(2026, 10, 28, 6, 0));
    }

    #[test]
    fn infinite_and_out_of_range_event_times_have_no_window() {
        let cal = calendar(Period::Days(1), Period::Days(1), 0, "UTC");
        for spec in [daily(), cal] {
            assert_eq!(spec.windows(INFINITY, &Utc), Err(AssignError::Infinite));
            assert_eq!(spec.windows(NEG_INFINITY, &Utc), Err(AssignError::Infinite));
            assert_eq!(
                spec.windows(time::MAX_FINITE, &Utc),
                Err(AssignError::OutOfRange)
            );
        }
    }

    #[test]
    fn a_hopping_row_is_in_every_window_that_holds_it() {
        let spec = WindowSpec::Hopping {
            size: 3 * HOUR,
            slide: HOUR,
            origin: 0,
        };
        let starts: Vec<Micros> = spec
            .windows(5 * HOUR + 30 * MINUTE, &Utc)
            .unwrap()
            .iter()
            .map(|w| w.start)
            .collect();
        assert_eq!(starts, [3 * HOUR, 4 * HOUR, 5 * HOUR]);
        // A row on a boundary starts the newest window and leaves the oldest.
        let w = spec.windows(6 * HOUR, &Utc).unwrap();
        assert_eq!((w[0].start, w[2].start), (4 * HOUR, 6 * HOUR));
        assert!(w.iter().all(|w| w.end - w.start == 3 * HOUR));
        // Before the origin as after it.
        let w = spec.windows(-30 * MINUTE, &Utc).unwrap();
        assert_eq!(
            w.iter().map(|w| w.start).collect::<Vec<_>>(),
            [-3 * HOUR, -2 * HOUR, -HOUR]
        );
        // A slide that does not divide the size: 2 or 3 windows.
        let spec = WindowSpec::Hopping {
            size: 5 * HOUR,
            slide: 2 * HOUR,
            origin: 0,
        };
        assert_eq!(spec.windows(0, &Utc).unwrap().len(), 3);
        assert_eq!(spec.windows(HOUR, &Utc).unwrap().len(), 2);
        assert_eq!(spec.windows(4 * HOUR + 1, &Utc).unwrap().len(), 3);
        assert_eq!(spec.windows(5 * HOUR + 30 * MINUTE, &Utc).unwrap().len(), 2);
    }

    #[test]
    fn a_local_day_is_23_or_25_hours_when_the_clocks_change() {
        let day = calendar(Period::Days(1), Period::Days(1), 0, "Europe/Berlin");
        let berlin = RuleZone::berlin();
        // 29 March 2026: 02:00 CET becomes 03:00 CEST.
        assert_eq!(
            one(&day, &berlin, at(2026, 3, 29, 12, 0)),
            (at(2026, 3, 28, 23, 0), at(2026, 3, 29, 22, 0))
        );
        // 25 October 2026: 03:00 CEST becomes 02:00 CET.
        assert_eq!(
            one(&day, &berlin, at(2026, 10, 25, 12, 0)),
            (at(2026, 10, 24, 22, 0), at(2026, 10, 25, 23, 0))
        );
        // The instant after local midnight in summer belongs to the new day.
        assert_eq!(
            one(&day, &berlin, at(2026, 7, 1, 22, 0)).0,
            at(2026, 7, 1, 22, 0)
        );
        assert_eq!(
            one(&day, &berlin, at(2026, 7, 1, 22, 0) - 1).1,
            at(2026, 7, 1, 22, 0)
        );

        let ny = RuleZone::new_york();
        // 8 March 2026: 02:00 EST becomes 03:00 EDT; 1 November 2026: 02:00 EDT becomes 01:00 EST.
        assert_eq!(
            one(&day, &ny, at(2026, 3, 8, 12, 0)),
            (at(2026, 3, 8, 5, 0), at(2026, 3, 9, 4, 0))
        );
        assert_eq!(
            one(&day, &ny, at(2026, 11, 1, 12, 0)),
            (at(2026, 11, 1, 4, 0), at(2026, 11, 2, 5, 0))
        );
        // Late evening in New York is the next day in UTC, and still today's window.
        assert_eq!(
            one(&day, &ny, at(2026, 11, 2, 4, 30)),
            (at(2026, 11, 1, 4, 0), at(2026, 11, 2, 5, 0))
        );
    }

    #[test]
    fn half_hour_zones_start_their_days_at_the_half_hour() {
        let day = calendar(Period::Days(1), Period::Days(1), 0, "Asia/Kolkata");
        assert_eq!(
            one(&day, &RuleZone::kolkata(), at(2026, 6, 1, 0, 0)),
            (at(2026, 5, 31, 18, 30), at(2026, 6, 1, 18, 30))
        );
    }

    #[test]
    fn weeks_are_iso_weeks_from_monday() {
        // The default origin of whole weeks: Monday 1970-01-05, local.
        let week = calendar(
            Period::Days(7),
            Period::Days(7),
            at(1970, 1, 5, 0, 0),
            "Europe/Berlin",
        );
        // Sunday 29 March 2026 is in the week of Monday 23 March, which is 167 hours long.
        assert_eq!(
            one(&week, &RuleZone::berlin(), at(2026, 3, 29, 12, 0)),
            (at(2026, 3, 22, 23, 0), at(2026, 3, 29, 22, 0))
        );
        assert_eq!(
            one(&week, &Utc, at(2026, 12, 1, 0, 0)),
            (at(2026, 11, 30, 0, 0), at(2026, 12, 7, 0, 0))
        );
    }

    #[test]
    fn months_quarters_and_years_end_where_the_calendar_says() {
        let month = calendar(Period::Months(1), Period::Months(1), 0, "UTC");
        assert_eq!(
            one(&month, &Utc, at(2028, 2, 29, 12, 0)),
            (at(2028, 2, 1, 0, 0), at(2028, 3, 1, 0, 0))
        );
        assert_eq!(
            one(&month, &Utc, at(2026, 2, 1, 0, 0) - 1),
            (at(2026, 1, 1, 0, 0), at(2026, 2, 1, 0, 0))
        );
        assert_eq!(
            one(&month, &Utc, at(2026, 2, 1, 0, 0)).0,
            at(2026, 2, 1, 0, 0)
        );
        // Before the origin (2000-01-01) as after it.
        assert_eq!(
            one(&month, &Utc, at(1999, 12, 31, 23, 59)),
            (at(1999, 12, 1, 0, 0), at(2000, 1, 1, 0, 0))
        );
        // A Berlin month starts at local midnight, in winter or in summer time.
        assert_eq!(
            one(&month, &RuleZone::berlin(), at(2026, 3, 31, 22, 30)),
            (at(2026, 3, 31, 22, 0), at(2026, 4, 30, 22, 0))
        );
        assert_eq!(
            one(&month, &RuleZone::berlin(), at(2026, 3, 31, 21, 30)),
            (at(2026, 2, 28, 23, 0), at(2026, 3, 31, 22, 0))
        );
        let quarter = calendar(Period::Months(3), Period::Months(3), 0, "UTC");
        assert_eq!(
            one(&quarter, &Utc, at(2026, 5, 15, 0, 0)),
            (at(2026, 4, 1, 0, 0), at(2026, 7, 1, 0, 0))
        );
        // A fiscal year from 1 April.
        let fiscal = calendar(
            Period::Months(12),
            Period::Months(12),
            at(2000, 4, 1, 0, 0),
            "UTC",
        );
        assert_eq!(
            one(&fiscal, &Utc, at(2026, 3, 31, 23, 0)),
            (at(2025, 4, 1, 0, 0), at(2026, 4, 1, 0, 0))
        );
        assert_eq!(
            one(&fiscal, &Utc, at(2026, 4, 1, 0, 0)),
            (at(2026, 4, 1, 0, 0), at(2027, 4, 1, 0, 0))
        );
    }

    #[test]
    fn an_origin_late_in_the_month_is_clamped_as_postgresql_adds_months() {
        let month = calendar(
            Period::Months(1),
            Period::Months(1),
            at(2000, 1, 31, 0, 0),
            "UTC",
        );
        // 2000-01-31 + 1 month = 2000-02-29, + 2 months = 2000-03-31.
        assert_eq!(
            one(&month, &Utc, at(2000, 3, 1, 0, 0)),
            (at(2000, 2, 29, 0, 0), at(2000, 3, 31, 0, 0))
        );
        assert_eq!(
            add_months(at(2001, 1, 31, 7, 0), 1),
            Some(at(2001, 2, 28, 7, 0))
        );
        assert_eq!(
            add_months(at(2001, 3, 31, 0, 0), -13),
            Some(at(2000, 2, 29, 0, 0))
        );
    }

    #[test]
    fn calendar_windows_hop_across_the_clock_change() {
        // Seven local days, every day: the window of 23 March to 30 March is 167 hours.
        let week = calendar(Period::Days(7), Period::Days(1), 0, "Europe/Berlin");
        let w = week
            .windows(at(2026, 3, 29, 12, 0), &RuleZone::berlin())
            .unwrap();
        assert_eq!(w.len(), 7);
        assert_eq!(
            (w[0].start, w[0].end),
            (at(2026, 3, 22, 23, 0), at(2026, 3, 29, 22, 0))
        );
        assert_eq!(
            (w[6].start, w[6].end),
            (at(2026, 3, 28, 23, 0), at(2026, 4, 4, 22, 0))
        );
        assert!(w
            .windows(2)
            .all(|p| p[0].start < p[1].start && p[0].end < p[1].end));
        // Three months every month.
        let rolling = calendar(Period::Months(3), Period::Months(1), 0, "UTC");
        let w = rolling.windows(at(2026, 5, 15, 0, 0), &Utc).unwrap();
        assert_eq!(
            w.iter().map(|w| w.start).collect::<Vec<_>>(),
            [
                at(2026, 3, 1, 0, 0),
                at(2026, 4, 1, 0, 0),
                at(2026, 5, 1, 0, 0)
            ]
        );
        assert_eq!(w[2].end, at(2026, 8, 1, 0, 0));
    }

    #[test]
    fn calendar_days_in_utc_are_the_fixed_days() {
        let cal = calendar(Period::Days(2), Period::Days(2), 0, "UTC");
        let fixed = WindowSpec::Tumbling {
            size: 2 * MICROS_PER_DAY,
            origin: 0,
        };
        for t in [
            at(1969, 12, 31, 23, 0),
            at(2026, 10, 29, 18, 2),
            at(2031, 1, 1, 0, 0),
        ] {
            assert_eq!(cal.windows(t, &Utc), fixed.windows(t, &Utc));
        }
    }

    #[test]
    fn the_civil_calendar_round_trips() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 1, 1), PG_EPOCH_DAYS);
        for z in [-800_000, -1, 0, 59, 10_957, 20_000, 2_000_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(days_in_month(2028, 2), 29);
        assert_eq!(days_in_month(2100, 2), 28);
        assert_eq!(days_in_month(2026, 12), 31);
    }

    #[test]
    fn no_spec_puts_a_row_in_more_than_a_thousand_windows() {
        assert_eq!(windows_per_row(3 * HOUR, HOUR), 3);
        assert_eq!(windows_per_row(5 * HOUR, 2 * HOUR), 3);
        assert_eq!(windows_per_row(i64::MAX, 1), i64::MAX);
        assert_eq!(
            WindowSpec::fixed_windows(MICROS_PER_DAY, 1, 0, 0),
            Err(AssignError::BadSpec)
        );
        assert_eq!(
            WindowSpec::fixed_windows(HOUR, 2 * HOUR, 0, 0),
            Err(AssignError::BadSpec)
        );
        assert_eq!(
            WindowSpec::calendar_windows(Period::Days(2_000_000_000), Period::Days(1), 0, &Utc, 0),
            Err(AssignError::BadSpec)
        );
        assert_eq!(
            WindowSpec::calendar_windows(Period::Months(3), Period::Days(1), 0, &Utc, 0),
            Err(AssignError::BadSpec)
        );
        assert_eq!(
            WindowSpec::fixed_windows(1000, 1, 0, 5).map(|w| w.len()),
            Ok(1000)
        );
    }

    #[test]
    fn specs_name_their_kind() {
        assert_eq!(daily().kind_name(), "tumbling");
        let cal = calendar(Period::Days(7), Period::Days(1), 0, "UTC");
        assert_eq!((cal.kind_name(), cal.multi()), ("hopping", true));
    }

    fn cumulate(size: Span, step: Span, origin: Micros, zone: Option<&str>) -> WindowSpec {
        WindowSpec::Cumulate {
            size,
            step,
            origin,
            time_zone: zone.map(Into::into),
        }
    }

    #[test]
    fn cumulate_windows_of_a_fixed_day_by_the_hour_end_at_each_later_hour() {
        let spec = cumulate(
            Span::Us(MICROS_PER_DAY),
            Span::Us(HOUR),
            at(1970, 1, 1, 0, 0),
            None,
        );
        let d = at(2026, 1, 1, 0, 0);
        for minute in (0..24 * 60).step_by(7) {
            let t = d + minute * MINUTE;
            let w = spec.windows(t, &Utc).unwrap();
            // Windows [d, d + j h) for every j whose end is after t: 24 - floor(hour) of them.
            assert_eq!(w.len() as i64, 24 - minute / 60, "at minute {minute}");
            for (i, win) in w.iter().enumerate() {
                assert_eq!(win.start, d);
                assert_eq!(win.end, d + (minute / 60 + 1 + i as i64) * HOUR);
                assert!(win.start <= t && t < win.end);
            }
        }
        // A row at a step's end is not in that step.
        let w = spec.windows(d + 14 * HOUR, &Utc).unwrap();
        assert_eq!(w.first().unwrap().end, d + 15 * HOUR);
        assert_eq!(w.last().unwrap().end, d + 24 * HOUR);
        assert!(spec.end_identifies() && spec.multi());
        assert_eq!(spec.kind_name(), "cumulate");
    }

    #[test]
    fn cumulate_steps_that_do_not_divide_the_period_end_the_last_window_at_its_end() {
        let spec = cumulate(Span::Us(10 * HOUR), Span::Us(4 * HOUR), 0, None);
        let w = spec.windows(HOUR, &Utc).unwrap();
        let ends: Vec<Micros> = w.iter().map(|w| w.end).collect();
        assert_eq!(ends, vec![4 * HOUR, 8 * HOUR, 10 * HOUR]);
        assert!(w.iter().all(|w| w.start == 0));
    }

    #[test]
    fn cumulate_local_days_by_the_hour_across_both_clock_changes() {
        let berlin = RuleZone::berlin();
        let spec = cumulate(
            Span::Days(1),
            Span::Us(HOUR),
            at(1970, 1, 1, 0, 0),
            Some("Europe/Berlin"),
        );
        // 29 March 2026: the clocks skip 02:00-03:00, a day of 23 hours and 23 windows.
        let w = spec.windows(at(2026, 3, 28, 23, 30), &berlin).unwrap();
        assert_eq!(w.len(), 23, "{w:?}");
        assert!(w.iter().all(|x| x.start == at(2026, 3, 28, 23, 0)));
        assert_eq!(w[0].end, at(2026, 3, 29, 0, 0));
        assert_eq!(w.last().unwrap().end, at(2026, 3, 29, 22, 0));
        assert!(w.windows(2).all(|p| p[0].end < p[1].end));
        // 25 October 2026: 02:00-03:00 comes twice, a day of 25 hours in 24 windows.
        let w = spec.windows(at(2026, 10, 24, 22, 30), &berlin).unwrap();
        assert_eq!(w.len(), 24, "{w:?}");
        assert!(w.iter().all(|x| x.start == at(2026, 10, 24, 22, 0)));
        assert_eq!(w.last().unwrap().end, at(2026, 10, 25, 23, 0));
        assert!(w.windows(2).all(|p| p[0].end < p[1].end));
        let longest = w.windows(2).map(|p| p[1].end - p[0].end).max().unwrap();
        assert_eq!(longest, 2 * HOUR);
    }

    #[test]
    fn cumulate_a_local_month_by_the_day() {
        let berlin = RuleZone::berlin();
        let spec = cumulate(
            Span::Months(1),
            Span::Days(1),
            at(1970, 1, 1, 0, 0),
            Some("Europe/Berlin"),
        );
        // 10 February 2026, 13:00 local: the windows ending on the local midnights of 11 February
        // to 1 March.
        let w = spec.windows(at(2026, 2, 10, 12, 0), &berlin).unwrap();
        assert_eq!(w.len(), 19, "{w:?}");
        assert!(w.iter().all(|x| x.start == at(2026, 1, 31, 23, 0)));
        assert_eq!(w[0].end, at(2026, 2, 10, 23, 0));
        assert_eq!(w.last().unwrap().end, at(2026, 2, 28, 23, 0));
    }

    #[test]
    fn cumulate_specs_that_are_not_windows_are_refused() {
        for (size, step) in [
            (Span::Us(HOUR), Span::Us(HOUR)),
            (Span::Us(HOUR), Span::Us(2 * HOUR)),
            (Span::Us(HOUR), Span::Us(0)),
            (Span::Days(1), Span::Days(1)),
            (Span::Months(1), Span::Days(28)),
            (Span::Us(1001 * HOUR), Span::Us(HOUR)),
        ] {
            assert_eq!(
                WindowSpec::cumulate_windows(size, step, 0, &Utc, 0),
                Err(AssignError::BadSpec),
                "{size:?} by {step:?}"
            );
        }
        let spec = cumulate(Span::Us(MICROS_PER_DAY), Span::Us(HOUR), 0, None);
        assert_eq!(spec.windows(INFINITY, &Utc), Err(AssignError::Infinite));
        assert_eq!(spec.windows(NEG_INFINITY, &Utc), Err(AssignError::Infinite));
    }

    #[test]
    fn cumulate_specs_round_trip_through_the_catalog_text() {
        for s in [Span::Us(HOUR), Span::Days(3), Span::Months(12)] {
            assert_eq!(Span::parse(&s.text()), Some(s));
        }
        let spec = cumulate(Span::Months(1), Span::Days(1), 0, Some("Europe/Berlin"));
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<WindowSpec>(&json).unwrap(), spec);
    }
}
