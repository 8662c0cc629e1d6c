//! Which windows an event time belongs to, written from SPEC §3 and §7 alone: tumbling and
//! hopping windows of fixed durations, calendar periods of whole months in UTC, and cumulate
//! windows of fixed steps.
//!
//! Every kind is one grid: window `k` is `[origin + k·slide, origin + k·slide + size)`, tumbling
//! being the slide equal to the size. A fixed size adds microseconds; a calendar size adds
//! months to the wall-clock date, the day of the month clamped to the month's last day as
//! PostgreSQL's interval arithmetic does. Calendar days are not a kind of their own here: in UTC,
//! the only zone the test uses, a day is 24 hours, so `'7 days'` every `'1 day'` is the fixed
//! grid of 24-hour steps from the origin, and a config says it is calendar only for what
//! `eventtime.pipelines` shows.
//!
//! Cumulate windows are another shape: periods `[p, p + size)` on the grid of `size` from the
//! origin, and in each the windows `[p, p + step)`, `[p, p + 2·step)` ... `[p, p + size)`, which
//! share their start. A window is identified by its start and end, so everything here speaks of
//! `(start, end)`; `end(start)` is the end of the longest window starting there.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime};

use crate::values::DAY;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowSpec {
    /// Fixed durations in microseconds; `slide == size` is tumbling.
    Fixed { size: i64, slide: i64, origin: i64 },
    /// Whole months in UTC; `slide == size` is tumbling. The origin is an instant whose day of
    /// the month is at most 28, so that no window bound is ever clamped and a window's end is
    /// both `origin + (k·slide + size) months` and its start plus `size` months.
    Months { size: i64, slide: i64, origin: i64 },
    /// Cumulate windows of fixed durations in microseconds: `step` divides `size`.
    Cumulate { size: i64, step: i64, origin: i64 },
}

impl WindowSpec {
    pub fn tumbling(size: i64, origin: i64) -> WindowSpec {
        WindowSpec::hopping(size, size, origin)
    }

    pub fn hopping(size: i64, slide: i64, origin: i64) -> WindowSpec {
        assert!(0 < slide && slide <= size, "0 < slide <= size");
        WindowSpec::Fixed {
            size,
            slide,
            origin,
        }
    }

    pub fn months(size: i64, slide: i64, origin: i64) -> WindowSpec {
        assert!(0 < slide && slide <= size, "0 < slide <= size");
        let day = utc_datetime(origin).day();
        assert!(
            day <= 28,
            "a calendar origin on day {day} would make the test care about clamping"
        );
        WindowSpec::Months {
            size,
            slide,
            origin,
        }
    }

    pub fn cumulate(size: i64, step: i64, origin: i64) -> WindowSpec {
        assert!(
            0 < step && step < size && size % step == 0,
            "0 < step < size, a multiple of it"
        );
        WindowSpec::Cumulate { size, step, origin }
    }

    /// What `eventtime.pipelines.window_kind` says.
    pub fn kind(&self) -> &'static str {
        match *self {
            WindowSpec::Fixed { size, slide, .. } | WindowSpec::Months { size, slide, .. } => {
                if slide != size {
                    "hopping"
                } else {
                    "tumbling"
                }
            }
            WindowSpec::Cumulate { .. } => "cumulate",
        }
    }

    /// The start of window `k` (of period `k`, for cumulate windows).
    fn start_k(&self, k: i64) -> i64 {
        match *self {
            WindowSpec::Fixed { slide, origin, .. } => origin + k * slide,
            WindowSpec::Months { slide, origin, .. } => add_months(origin, k * slide),
            WindowSpec::Cumulate { size, origin, .. } => origin + k * size,
        }
    }

    /// The greatest `k` whose window starts at or before `t`.
    fn last_k(&self, t: i64) -> i64 {
        match *self {
            WindowSpec::Fixed { slide, origin, .. } => (t - origin).div_euclid(slide),
            WindowSpec::Cumulate { size, origin, .. } => (t - origin).div_euclid(size),
            WindowSpec::Months { slide, origin, .. } => {
                // The month count is right or one too many (t earlier in its month than the
                // origin is in its own).
                let mut k = (month_index(t) - month_index(origin)).div_euclid(slide);
                while self.start_k(k) > t {
                    k -= 1;
                }
                while self.start_k(k + 1) <= t {
                    k += 1;
                }
                k
            }
        }
    }

    /// The end of the (longest) window that starts at `start`.
    pub fn end(&self, start: i64) -> i64 {
        match *self {
            WindowSpec::Fixed { size, .. } | WindowSpec::Cumulate { size, .. } => start + size,
            WindowSpec::Months { size, .. } => add_months(start, size),
        }
    }

    /// The ends of every window that starts at `start`, shortest first.
    pub fn ends(&self, start: i64) -> Vec<i64> {
        match *self {
            WindowSpec::Cumulate { size, step, .. } => {
                (1..=size / step).map(|i| start + i * step).collect()
            }
            _ => vec![self.end(start)],
        }
    }

    /// Every window `[start, end)` holding `t`, oldest first (shortest first among those that
    /// share a start).
    pub fn windows_of(&self, t: i64) -> Vec<(i64, i64)> {
        if let WindowSpec::Cumulate { .. } = *self {
            let start = self.start_k(self.last_k(t));
            let out: Vec<(i64, i64)> = self
                .ends(start)
                .into_iter()
                .filter(|&end| end > t)
                .map(|end| (start, end))
                .collect();
            assert!(!out.is_empty(), "every instant is in a window");
            return out;
        }
        let mut out = Vec::new();
        let mut k = self.last_k(t);
        loop {
            let start = self.start_k(k);
            let end = self.end(start);
            if end <= t {
                break;
            }
            debug_assert!(start <= t);
            out.push((start, end));
            k -= 1;
        }
        out.reverse();
        assert!(!out.is_empty(), "every instant is in a window");
        out
    }

    /// The start of the window `k` slides after the last one starting at or before `t`.
    pub fn nth_start(&self, t: i64, k: i64) -> i64 {
        self.start_k(self.last_k(t) + k)
    }

    /// The first window end after `t`.
    pub fn next_end(&self, t: i64) -> i64 {
        self.windows_of(t)
            .into_iter()
            .map(|(_, end)| end)
            .min()
            .unwrap()
    }

    /// How many window starts back from `t` a window holding `t` may start: how many slides
    /// make a window, rounded up; one for cumulate windows, whose periods do not overlap.
    pub fn overlap(&self) -> i64 {
        match *self {
            WindowSpec::Fixed { size, slide, .. } | WindowSpec::Months { size, slide, .. } => {
                (size + slide - 1) / slide
            }
            WindowSpec::Cumulate { .. } => 1,
        }
    }

    /// About how long a window lasts, for generating event times around it.
    pub fn span(&self) -> i64 {
        match *self {
            WindowSpec::Fixed { size, .. } | WindowSpec::Cumulate { size, .. } => size,
            WindowSpec::Months { size, .. } => size * 30 * DAY,
        }
    }
}

fn utc_datetime(t: i64) -> NaiveDateTime {
    DateTime::from_timestamp_micros(t)
        .expect("timestamp within chrono's range")
        .naive_utc()
}

/// Months since January of year 0.
fn month_index(t: i64) -> i64 {
    let d = utc_datetime(t);
    d.year() as i64 * 12 + d.month0() as i64
}

/// `t + n months`, as PostgreSQL computes `timestamptz + interval 'n months'` in UTC: the
/// month moves, the day is clamped to the new month's length, the time of day stays.
pub fn add_months(t: i64, n: i64) -> i64 {
    let d = utc_datetime(t);
    let m = d.year() as i64 * 12 + d.month0() as i64 + n;
    let (year, month) = (m.div_euclid(12) as i32, m.rem_euclid(12) as u32 + 1);
    let first = NaiveDate::from_ymd_opt(year, month, 1).expect("a month in range");
    let next = if month == 12 {
        NaiveDate::from_ymd_opt(year + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)
    }
    .expect("a month in range");
    let days_in_month = (next - first).num_days() as u32;
    let date = NaiveDate::from_ymd_opt(year, month, d.day().min(days_in_month)).unwrap();
    date.and_time(d.time()).and_utc().timestamp_micros()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{utc, HOUR};

    #[test]
    fn months_clamp_like_postgresql() {
        assert_eq!(
            add_months(utc("2026-01-31 10:00"), 1),
            utc("2026-02-28 10:00")
        );
        assert_eq!(
            add_months(utc("2024-01-31 00:00"), 1),
            utc("2024-02-29 00:00")
        );
        assert_eq!(
            add_months(utc("2026-03-15 06:00"), -14),
            utc("2025-01-15 06:00")
        );
        assert_eq!(
            add_months(utc("1970-01-01 00:00"), 12 * 56 + 11),
            utc("2026-12-01 00:00")
        );
        assert_eq!(add_months(utc("1969-12-01 00:00"), 1), 0);
    }

    #[test]
    fn tumbling_before_and_after_the_origin() {
        let w = WindowSpec::tumbling(DAY, utc("2026-01-01 06:00"));
        assert_eq!(
            w.windows_of(utc("2026-01-01 05:59")),
            [(utc("2025-12-31 06:00"), utc("2026-01-01 06:00"))]
        );
        assert_eq!(
            w.windows_of(utc("2026-01-01 06:00")),
            [(utc("2026-01-01 06:00"), utc("2026-01-02 06:00"))]
        );
        assert_eq!(w.overlap(), 1);
        assert_eq!(w.kind(), "tumbling");
    }

    #[test]
    fn hopping_fixed() {
        let w = WindowSpec::hopping(3 * HOUR, HOUR, 0);
        let t = utc("2026-03-01 10:30");
        assert_eq!(
            w.windows_of(t),
            [
                (utc("2026-03-01 08:00"), utc("2026-03-01 11:00")),
                (utc("2026-03-01 09:00"), utc("2026-03-01 12:00")),
                (utc("2026-03-01 10:00"), utc("2026-03-01 13:00")),
            ]
        );
        // On a boundary: the window ending there is not one of them, the one starting there is.
        assert_eq!(
            w.windows_of(utc("2026-03-01 11:00"))[0],
            (utc("2026-03-01 09:00"), utc("2026-03-01 12:00"))
        );
        assert_eq!(w.next_end(t), utc("2026-03-01 11:00"));
        assert_eq!(w.nth_start(t, 1), utc("2026-03-01 11:00"));
        // A slide that does not divide the size: two or three windows.
        let w = WindowSpec::hopping(2 * HOUR, 45 * crate::values::MINUTE, 0);
        assert_eq!(w.overlap(), 3);
        assert_eq!(w.windows_of(utc("2026-03-01 00:00")).len(), 3);
        assert_eq!(
            w.windows_of(utc("2026-03-01 00:50")),
            [
                (utc("2026-02-28 23:15"), utc("2026-03-01 01:15")),
                (utc("2026-03-01 00:00"), utc("2026-03-01 02:00")),
                (utc("2026-03-01 00:45"), utc("2026-03-01 02:45")),
            ]
        );
        assert_eq!(w.windows_of(utc("2026-03-01 01:20")).len(), 2);
    }

    #[test]
    fn calendar_months() {
        let m = WindowSpec::months(1, 1, 0);
        assert_eq!(
            m.windows_of(utc("2026-02-28 23:59")),
            [(utc("2026-02-01 00:00"), utc("2026-03-01 00:00"))]
        );
        assert_eq!(
            m.windows_of(utc("2024-02-29 12:00")),
            [(utc("2024-02-01 00:00"), utc("2024-03-01 00:00"))]
        );
        assert_eq!(m.next_end(utc("2026-12-01 00:00")), utc("2027-01-01 00:00"));
        let q = WindowSpec::months(3, 1, 0);
        assert_eq!(
            q.windows_of(utc("2026-03-01 00:00")),
            [
                (utc("2026-01-01 00:00"), utc("2026-04-01 00:00")),
                (utc("2026-02-01 00:00"), utc("2026-05-01 00:00")),
                (utc("2026-03-01 00:00"), utc("2026-06-01 00:00")),
            ]
        );
        assert_eq!(q.kind(), "hopping");
        // Quarters from January, and every second month from an origin on the 15th at 06:00.
        let q = WindowSpec::months(3, 3, 0);
        assert_eq!(
            q.windows_of(utc("2026-08-17 00:00")),
            [(utc("2026-07-01 00:00"), utc("2026-10-01 00:00"))]
        );
        let b = WindowSpec::months(2, 2, utc("2025-04-15 06:00"));
        assert_eq!(
            b.windows_of(utc("2025-04-15 05:59")),
            [(utc("2025-02-15 06:00"), utc("2025-04-15 06:00"))]
        );
        assert_eq!(
            b.windows_of(utc("2026-01-15 06:00")),
            [(utc("2025-12-15 06:00"), utc("2026-02-15 06:00"))]
        );
        assert_eq!(
            b.nth_start(utc("2026-01-15 06:00"), -1),
            utc("2025-10-15 06:00")
        );
    }

    /// SPEC §7: a day by four hours is six windows from midnight; a row is in every one that
    /// contains it, the step end itself in none that ends there.
    #[test]
    fn cumulate_fixed() {
        let c = WindowSpec::cumulate(DAY, 4 * HOUR, 0);
        let d = utc("2026-03-01 00:00");
        assert_eq!(c.windows_of(d).len(), 6);
        assert_eq!(
            c.windows_of(utc("2026-03-01 13:10")),
            [
                (d, utc("2026-03-01 16:00")),
                (d, utc("2026-03-01 20:00")),
                (d, utc("2026-03-02 00:00")),
            ]
        );
        assert_eq!(
            c.windows_of(utc("2026-03-01 20:00")),
            [(d, utc("2026-03-02 00:00"))]
        );
        assert_eq!(
            c.windows_of(utc("2026-03-01 23:59")),
            [(d, utc("2026-03-02 00:00"))]
        );
        assert_eq!(c.next_end(utc("2026-03-01 13:10")), utc("2026-03-01 16:00"));
        assert_eq!(c.next_end(utc("2026-03-01 20:00")), utc("2026-03-02 00:00"));
        assert_eq!(
            c.nth_start(utc("2026-03-01 13:10"), 1),
            utc("2026-03-02 00:00")
        );
        assert_eq!(c.ends(d).len(), 6);
        assert_eq!((c.overlap(), c.kind()), (1, "cumulate"));
        // Before the origin, on a shifted origin.
        let c = WindowSpec::cumulate(2 * HOUR, HOUR, utc("2026-01-01 00:30"));
        assert_eq!(
            c.windows_of(utc("2026-01-01 00:10")),
            [(utc("2025-12-31 22:30"), utc("2026-01-01 00:30"))]
        );
    }
}
