//! The windows of the pipeline under test, from SPEC §7 (not from the extension's code): fixed
//! `size` and `slide` (0 < slide <= size; slide = size is tumbling), aligned to the default origin
//! 1970-01-01 00:00 UTC. The windows are `[origin + k·slide, origin + k·slide + size)` for every
//! integer k, and a row belongs to every window containing its event time. Each (row, window)
//! pair lands on its own (SPEC §2 per pair): the checks expand every source row into its pairs.
//!
//! Times are microseconds since the Unix epoch, as in `workload`; the origin is therefore 0.

use crate::workload::{HOUR, LATENESS, MINUTE};

/// The window origin as SQL (SPEC §3: `window_origin` defaults to 1970-01-01 00:00 UTC).
pub const ORIGIN_SQL: &str = "timestamptz '1970-01-01 00:00+00'";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    pub size: i64,
    pub slide: i64,
    pub lateness: i64,
}

impl Windows {
    /// The pipeline `faults` of `workload::setup`: tumbling 1 hour windows, 2 hours lateness.
    pub const TUMBLING: Windows = Windows {
        size: HOUR,
        slide: HOUR,
        lateness: LATENESS,
    };

    /// `faults` with windows of the same size and lateness, sliding by `slide`.
    pub fn hopping(slide: i64) -> Windows {
        let w = Windows {
            slide,
            ..Windows::TUMBLING
        };
        assert!(
            0 < slide && slide < w.size,
            "a hopping window slides by more than 0 and less than its size"
        );
        w
    }

    pub fn is_tumbling(&self) -> bool {
        self.slide == self.size
    }

    /// The starts of the windows containing `ts`, oldest first: every `k·slide` with
    /// `k·slide <= ts < k·slide + size`.
    pub fn starts_of(&self, ts: i64) -> Vec<i64> {
        let last = ts.div_euclid(self.slide) * self.slide;
        let mut out = Vec::new();
        let mut s = last;
        while s + self.size > ts {
            out.push(s);
            s -= self.slide;
        }
        out.reverse();
        out
    }

    /// The number of windows containing `ts`: the (row, window) pairs of a row.
    pub fn count_of(&self, ts: i64) -> i64 {
        self.starts_of(ts).len() as i64
    }

    /// The greatest number of windows a row can belong to: ⌈size / slide⌉.
    pub fn max_per_row(&self) -> i64 {
        (self.size + self.slide - 1) / self.slide
    }

    /// `size` as an SQL interval.
    pub fn size_sql(&self) -> String {
        interval_sql(self.size)
    }

    /// `slide` as an SQL interval.
    pub fn slide_sql(&self) -> String {
        interval_sql(self.slide)
    }

    /// `size + lateness` (window start to deadline) as an SQL interval.
    pub fn to_deadline_sql(&self) -> String {
        interval_sql(self.size + self.lateness)
    }

    /// `lateness` as an SQL interval.
    pub fn lateness_sql(&self) -> String {
        interval_sql(self.lateness)
    }

    /// An SQL subquery, for `CROSS JOIN LATERAL (…) alias`, with one row per window containing
    /// the timestamptz `ts`, its start in column `ws`: the latest window start at or before `ts`
    /// (`date_bin` by the slide from the origin) and the ones before it by whole slides, as long
    /// as the window still reaches beyond `ts`.
    pub fn starts_sql(&self, ts: &str) -> String {
        let (slide, size) = (self.slide_sql(), self.size_sql());
        format!(
            "SELECT date_bin({slide}, {ts}, {ORIGIN_SQL}) - j * {slide} AS ws
             FROM generate_series(0, {last}) j
             WHERE date_bin({slide}, {ts}, {ORIGIN_SQL}) - j * {slide} + {size} > {ts}",
            last = self.max_per_row() - 1
        )
    }

    /// SQL that is true when the timestamptz `ws` is not the start of a window containing the
    /// timestamptz `ts`.
    pub fn not_a_window_of_sql(&self, ws: &str, ts: &str) -> String {
        format!(
            "(date_bin({slide}, {ws}, {ORIGIN_SQL}) <> {ws} OR {ws} > {ts} OR {ws} + {size} <= {ts})",
            slide = self.slide_sql(),
            size = self.size_sql()
        )
    }

    /// The window arguments of `create_pipeline` beyond the tumbling pipeline's (`PIPELINE_ARGS`):
    /// none, or `window_slide`.
    pub fn extra_pipeline_args(&self) -> String {
        if self.is_tumbling() {
            String::new()
        } else {
            format!(",\n    window_slide     => {}", self.slide_sql())
        }
    }

    /// For messages: `1 hour tumbling` or `1 hour sliding by 20 minutes`.
    pub fn describe(&self) -> String {
        if self.is_tumbling() {
            format!("{} tumbling", unit_text(self.size))
        } else {
            format!(
                "{} sliding by {}",
                unit_text(self.size),
                unit_text(self.slide)
            )
        }
    }
}

fn unit_text(us: i64) -> String {
    let (n, unit) = if us % HOUR == 0 {
        (us / HOUR, "hour")
    } else if us % MINUTE == 0 {
        (us / MINUTE, "minute")
    } else if us % 1_000_000 == 0 {
        (us / 1_000_000, "second")
    } else {
        (us, "microsecond")
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// A positive duration in microseconds as an SQL interval literal, in its largest whole unit.
pub fn interval_sql(us: i64) -> String {
    format!("interval '{}'", unit_text(us))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::T0;

    #[test]
    fn tumbling_is_one_window_per_row() {
        let w = Windows::TUMBLING;
        assert_eq!(w.starts_of(T0), vec![T0]);
        assert_eq!(w.starts_of(T0 + HOUR - 1), vec![T0]);
        assert_eq!(w.starts_of(T0 + HOUR), vec![T0 + HOUR]);
        assert_eq!(w.starts_of(T0 - 1), vec![T0 - HOUR]);
        assert_eq!(w.max_per_row(), 1);
        assert_eq!(w.extra_pipeline_args(), "");
        assert_eq!(w.size_sql(), "interval '1 hour'");
        assert_eq!(w.to_deadline_sql(), "interval '3 hours'");
    }

    #[test]
    fn hopping_by_a_third_is_three_windows_per_row() {
        let w = Windows::hopping(20 * MINUTE);
        let m = MINUTE;
        assert_eq!(w.starts_of(T0), vec![T0 - 40 * m, T0 - 20 * m, T0]);
        assert_eq!(
            w.starts_of(T0 + 20 * m - 1),
            vec![T0 - 40 * m, T0 - 20 * m, T0]
        );
        assert_eq!(w.starts_of(T0 + 20 * m), vec![T0 - 20 * m, T0, T0 + 20 * m]);
        assert_eq!(w.starts_of(T0 + 59 * m), vec![T0, T0 + 20 * m, T0 + 40 * m]);
        for ts in [T0, T0 + 1, T0 + 7 * m + 3, -1, 0, 1] {
            let starts = w.starts_of(ts);
            assert_eq!(starts.len(), 3);
            for s in starts {
                assert!(s <= ts && ts < s + w.size && s.rem_euclid(w.slide) == 0);
            }
        }
        assert_eq!(w.max_per_row(), 3);
        assert_eq!(w.slide_sql(), "interval '20 minutes'");
        assert_eq!(w.describe(), "1 hour sliding by 20 minutes");
    }

    #[test]
    fn a_slide_that_does_not_divide_the_size() {
        let w = Windows::hopping(25 * MINUTE);
        let m = MINUTE;
        // Windows start every 25 minutes from the origin and last 60: a row is in two or three.
        assert_eq!(w.starts_of(50 * m), vec![0, 25 * m, 50 * m]);
        assert_eq!(w.starts_of(24 * m), vec![-25 * m, 0]);
        assert_eq!(w.starts_of(60 * m), vec![25 * m, 50 * m]);
        assert_eq!(w.max_per_row(), 3);
    }
}
