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

/// A fixed duration in words, in the largest unit that divides it exactly: "1 day", "36 hours",
/// "90 seconds", "1500 microseconds".
pub fn describe_duration(micros: i64) -> String {
    const UNITS: [(i64, &str); 5] = [
        (MICROS_PER_DAY, "day"),
        (3_600_000_000, "hour"),
        (60_000_000, "minute"),
        (1_000_000, "second"),
        (1, "microsecond"),
    ];
    let (size, unit) = UNITS
        .iter()
        .copied()
        .find(|(size, _)| micros % size == 0)
        .unwrap_or((1, "microsecond"));
    let n = micros / size;
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
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

/// `t` in ISO 8601, in UTC, with microseconds: `2026-10-30T00:00:00.000000Z`, `infinity`,
/// `-infinity`. The same whatever the session's `TimeZone` and `DateStyle`.
pub fn iso(t: Micros) -> String {
    match t {
        INFINITY => return "infinity".into(),
        NEG_INFINITY => return "-infinity".into(),
        _ => {}
    }
    let (days, tod) = (t.div_euclid(MICROS_PER_DAY), t.rem_euclid(MICROS_PER_DAY));
    let (y, m, d) = super::window::civil_from_days(days + 10_957);
    let (h, rest) = (tod / 3_600_000_000, tod % 3_600_000_000);
    let (min, rest) = (rest / 60_000_000, rest % 60_000_000);
    let (s, us) = (rest / 1_000_000, rest % 1_000_000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{us:06}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_print_in_iso_8601_utc() {
        assert_eq!(iso(0), "2000-01-01T00:00:00.000000Z");
        assert_eq!(
            iso(crate::core::window::local_time(2026, 10, 30, 0, 0) + 1),
            "2026-10-30T00:00:00.000001Z"
        );
        assert_eq!(iso(-1), "1999-12-31T23:59:59.999999Z");
        assert_eq!(iso(INFINITY), "infinity");
    }

    #[test]
    fn durations_are_described_in_their_largest_exact_unit() {
        assert_eq!(describe_duration(MICROS_PER_DAY), "1 day");
        assert_eq!(describe_duration(36 * 3_600_000_000), "36 hours");
        assert_eq!(describe_duration(90_000_000), "90 seconds");
        assert_eq!(describe_duration(1_500), "1500 microseconds");
        assert_eq!(describe_duration(0), "0 days");
    }
}
