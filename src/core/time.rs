//! Timestamps as PostgreSQL stores them: microseconds since 2000-01-01 00:00 UTC, with
//! `i64::MIN` and `i64::MAX` standing for `-infinity` and `infinity`.

pub type Micros = i64;

pub const NEG_INFINITY: Micros = i64::MIN;
pub const INFINITY: Micros = i64::MAX;

/// The last finite instant PostgreSQL accepts (294276-12-31 23:59:59.999999 UTC).
pub const MAX_FINITE: Micros = 9_223_371_331_200_000_000 - 1;
/// The first finite instant PostgreSQL accepts (4714-11-24 00:00 UTC BC).
pub const MIN_FINITE: Micros = -211_813_488_000_000_000;

pub const MICROS_PER_DAY: i64 = 86_400_000_000;

pub fn is_finite(t: Micros) -> bool {
    t != NEG_INFINITY && t != INFINITY
}

/// A duration given as PostgreSQL's interval fields, turned into a fixed number of
/// microseconds. Days count as 24 hours: windows and lateness are durations, not calendar
/// spans. Months have no fixed length, so an interval with months is not a duration.
pub fn fixed_micros(months: i32, days: i32, micros: i64) -> Option<i64> {
    if months != 0 {
        return None;
    }
    (days as i64)
        .checked_mul(MICROS_PER_DAY)?
        .checked_add(micros)
}

/// `t + d`, saturating at the infinities (an infinite instant stays where it is).
pub fn add(t: Micros, d: i64) -> Micros {
    if !is_finite(t) {
        return t;
    }
    match t.checked_add(d) {
        Some(v) if v > MAX_FINITE => INFINITY,
        Some(v) if v < MIN_FINITE => NEG_INFINITY,
        Some(v) => v,
        None if d > 0 => INFINITY,
        None => NEG_INFINITY,
    }
}
