//! Window assignment. A pipeline's windows are described by a [`WindowSpec`]; the spec says
//! which windows an event time belongs to. Tumbling windows give exactly one window per row;
//! the type is an enum so that hopping windows (several windows per row) and calendar windows
//! (bounds computed in a time zone) are new variants, not a new pipeline.

use super::time::{self, Micros};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: Micros,
    pub end: Micros,
}

/// Stored in the catalog's definition as `{"kind": "tumbling", "size_us": ..., "origin_us": ...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum WindowSpec {
    /// Windows `[origin + k·size, origin + (k+1)·size)` for every integer `k`.
    Tumbling {
        #[serde(rename = "size_us")]
        size: i64,
        #[serde(rename = "origin_us")]
        origin: Micros,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignError {
    /// The event time is infinite: it belongs to no window.
    Infinite,
    /// The window holding the event time would end outside PostgreSQL's timestamp range.
    OutOfRange,
}

impl WindowSpec {
    pub fn size(&self) -> i64 {
        match *self {
            WindowSpec::Tumbling { size, .. } => size,
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
        // i128: `event - origin` spans more than i64 when both sit near opposite ends.
        let offset = event as i128 - origin as i128;
        let k = offset.div_euclid(size as i128);
        let start = origin as i128 + k * size as i128;
        let end = start + size as i128;
        if start < time::MIN_FINITE as i128 || end > time::MAX_FINITE as i128 {
            return Err(AssignError::OutOfRange);
        }
        Ok(Window {
            start: start as i64,
            end: end as i64,
        })
    }

    /// Every window that holds `event`, in order of start.
    pub fn windows(&self, event: Micros) -> Result<Vec<Window>, AssignError> {
        match *self {
            WindowSpec::Tumbling { size, origin } => {
                Ok(vec![Self::tumbling_window(size, origin, event)?])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::time::{INFINITY, MICROS_PER_DAY, NEG_INFINITY};

    const UNIX_EPOCH: Micros = -946_684_800_000_000;
    const HOUR: i64 = 3_600_000_000;

    fn daily() -> WindowSpec {
        WindowSpec::Tumbling {
            size: MICROS_PER_DAY,
            origin: UNIX_EPOCH,
        }
    }

    #[test]
    fn a_row_belongs_to_the_day_that_holds_it() {
        // 2026-10-29 18:02 UTC.
        let event = (9770 + 28) * MICROS_PER_DAY + 18 * HOUR + 2 * 60_000_000;
        let w = daily().windows(event).unwrap();
        assert_eq!(
            w,
            vec![Window {
                start: (9770 + 28) * MICROS_PER_DAY,
                end: (9770 + 29) * MICROS_PER_DAY
            }]
        );
    }

    #[test]
    fn the_start_belongs_to_the_window_and_the_end_to_the_next() {
        let start = 9770 * MICROS_PER_DAY;
        assert_eq!(daily().windows(start).unwrap()[0].start, start);
        assert_eq!(daily().windows(start - 1).unwrap()[0].end, start);
    }

    #[test]
    fn times_before_the_origin_round_down() {
        let spec = WindowSpec::Tumbling {
            size: 10,
            origin: 5,
        };
        assert_eq!(spec.windows(4).unwrap()[0], Window { start: -5, end: 5 });
        assert_eq!(spec.windows(-5).unwrap()[0], Window { start: -5, end: 5 });
        assert_eq!(
            spec.windows(-6).unwrap()[0],
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
            origin: UNIX_EPOCH + 6 * HOUR,
        };
        let w = spec.windows(9770 * MICROS_PER_DAY).unwrap()[0];
        assert_eq!(w.start, 9769 * MICROS_PER_DAY + 6 * HOUR);
    }

    #[test]
    fn infinite_and_out_of_range_event_times_have_no_window() {
        assert_eq!(daily().windows(INFINITY), Err(AssignError::Infinite));
        assert_eq!(daily().windows(NEG_INFINITY), Err(AssignError::Infinite));
        assert_eq!(
            daily().windows(time::MAX_FINITE),
            Err(AssignError::OutOfRange)
        );
    }
}
