//! The landing rule of SPEC §2: where a row with event time `e` goes, for a window ending at
//! `end`, under watermark `w` and allowed lateness `l`.
//!
//! A watermark equal to the deadline refuses: the deadline is the first instant at which the
//! window's state is gone, as in Flink's `isWindowLate` (`end - 1 + lateness <= watermark`).

use super::time::{self, Micros};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landing {
    /// The row is not in this window (`e >= end`; rows before the start are the caller's case).
    OtherWindow,
    /// The window has not fired: the row joins its state and the main firing.
    Open,
    /// The window fired and is still within its grace: the row joins and a new version is written.
    LateFiring,
    /// The grace is over: the row goes to refused rows and nothing published changes.
    SideOutput,
}

impl Landing {
    pub fn as_str(self) -> &'static str {
        match self {
            Landing::OtherWindow => "other-window",
            Landing::Open => "open",
            Landing::LateFiring => "late-firing",
            Landing::SideOutput => "side-output",
        }
    }
}

/// Where a window is in its life under watermark `w` (`None` before the first advance).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    /// `w < end`: rows join the state and the main firing is still to come.
    Open,
    /// `end <= w < deadline`: version 1 is written; rows still join and write new versions.
    Fired,
    /// `w >= deadline`: the state is gone; rows go to refused rows.
    Purged,
}

impl WindowState {
    pub fn as_str(self) -> &'static str {
        match self {
            WindowState::Open => "open",
            WindowState::Fired => "fired",
            WindowState::Purged => "purged",
        }
    }
}

pub fn window_state(window_end: Micros, lateness: i64, watermark: Option<Micros>) -> WindowState {
    match watermark {
        Some(w) if w >= deadline(window_end, lateness) => WindowState::Purged,
        Some(w) if w >= window_end => WindowState::Fired,
        _ => WindowState::Open,
    }
}

/// The deadline of a window: the watermark at which its state is purged and rows are refused.
pub fn deadline(window_end: Micros, lateness: i64) -> Micros {
    time::add(window_end, lateness)
}

pub fn landing(event: Micros, window_end: Micros, watermark: Micros, lateness: i64) -> Landing {
    if event >= window_end {
        return Landing::OtherWindow;
    }
    if watermark < window_end {
        Landing::Open
    } else if watermark < deadline(window_end, lateness) {
        Landing::LateFiring
    } else {
        Landing::SideOutput
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::time::{INFINITY, MICROS_PER_DAY, NEG_INFINITY};

    const HOUR: i64 = 3_600_000_000;

    /// 2026-10-29 00:00 UTC as microseconds since 2000-01-01.
    fn oct(day: i64, hour: i64, minute: i64) -> Micros {
        // 2026-10-01 is day 9770 after 2000-01-01.
        (9770 + day - 1) * MICROS_PER_DAY + hour * HOUR + minute * 60_000_000
    }

    #[test]
    fn worked_example_of_the_spec() {
        let event = oct(29, 18, 2);
        let end = oct(30, 0, 0);
        let grace = 24 * HOUR;
        assert_eq!(landing(event, end, oct(29, 20, 0), grace), Landing::Open);
        assert_eq!(
            landing(event, end, oct(30, 12, 0), grace),
            Landing::LateFiring
        );
        // 2026-11-01 00:00 is October's day 32.
        assert_eq!(
            landing(event, end, oct(32, 0, 0), grace),
            Landing::SideOutput
        );
    }

    #[test]
    fn boundaries_are_half_open() {
        let end = oct(30, 0, 0);
        assert_eq!(landing(end, end, NEG_INFINITY, 0), Landing::OtherWindow);
        assert_eq!(landing(end - 1, end, end - 1, HOUR), Landing::Open);
        assert_eq!(landing(end - 1, end, end, HOUR), Landing::LateFiring);
        assert_eq!(
            landing(end - 1, end, end + HOUR - 1, HOUR),
            Landing::LateFiring
        );
        // A watermark equal to the deadline refuses.
        assert_eq!(landing(end - 1, end, end + HOUR, HOUR), Landing::SideOutput);
    }

    #[test]
    fn zero_lateness_refuses_at_the_window_end() {
        let end = oct(30, 0, 0);
        assert_eq!(landing(end - 1, end, end - 1, 0), Landing::Open);
        assert_eq!(landing(end - 1, end, end, 0), Landing::SideOutput);
    }

    #[test]
    fn infinite_watermark_refuses_everything() {
        let end = oct(30, 0, 0);
        assert_eq!(
            landing(end - 1, end, INFINITY, 7 * MICROS_PER_DAY),
            Landing::SideOutput
        );
    }

    #[test]
    fn deadline_saturates() {
        assert_eq!(deadline(INFINITY, HOUR), INFINITY);
        assert_eq!(deadline(crate::core::time::MAX_FINITE - 1, HOUR), INFINITY);
    }

    #[test]
    fn window_states_follow_the_landing_rule() {
        let end = oct(30, 0, 0);
        assert_eq!(window_state(end, HOUR, None), WindowState::Open);
        assert_eq!(window_state(end, HOUR, Some(end - 1)), WindowState::Open);
        assert_eq!(window_state(end, HOUR, Some(end)), WindowState::Fired);
        assert_eq!(
            window_state(end, HOUR, Some(end + HOUR)),
            WindowState::Purged
        );
        assert_eq!(window_state(end, 0, Some(end)), WindowState::Purged);
        // A row's landing and its window's state agree at every watermark.
        for w in [end - 1, end, end + HOUR - 1, end + HOUR] {
            let expected = match window_state(end, HOUR, Some(w)) {
                WindowState::Open => Landing::Open,
                WindowState::Fired => Landing::LateFiring,
                WindowState::Purged => Landing::SideOutput,
            };
            assert_eq!(landing(end - 1, end, w, HOUR), expected);
        }
    }

    #[test]
    fn names_are_the_contract() {
        let names: Vec<_> = [
            Landing::OtherWindow,
            Landing::Open,
            Landing::LateFiring,
            Landing::SideOutput,
        ]
        .iter()
        .map(|l| l.as_str())
        .collect();
        assert_eq!(
            names,
            ["other-window", "open", "late-firing", "side-output"]
        );
    }
}
