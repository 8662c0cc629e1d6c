//! The bound on a backend's part of a window's sum.
//!
//! An open window keeps one state row per backend that wrote it (its slot, see
//! [`backend_slot`]); the firing adds the rows up. A sum that overflows only when the rows are
//! added would make every firing of the pipeline fail, and nothing at ingest could tell, since no
//! writer reads another's row. So every sum a state row keeps stays within the type's limit
//! divided by [`SLOT_SHARE`] times `MaxBackends`: however many backends wrote the window, their
//! rows add up to at most a quarter of the limit, and the late rows and restatements added to
//! that stay in range too. A statement that would take its row beyond the bound fails with 22003
//! (`EtError::AccumulatorOverflow`), in the statement that caused it.
//!
//! The bound is far from what real data reaches (with `max_connections = 100`, about ±1.9·10^16
//! for `bigint` and `money`'s cents, 600 years for each field of an `interval`, ±10^131060 for
//! `numeric`; for the moments of `stddev` and its kinds over floats, see [`MOMENT_MAX`]); it refuses
//! infinite intervals, which PostgreSQL cannot add to an infinity of the
//! other sign. Infinities and NaN of `numeric`, `real` and `double precision` pass: PostgreSQL adds
//! them without error.

use pgrx::datum::{AnyElement, FromDatum};
use pgrx::pg_sys;

/// What divides a type's limit, beside `MaxBackends`: room for the late rows and restatements
/// added to the rows' total, and for a restart with a larger `max_connections`.
pub const SLOT_SHARE: i64 = 4;

/// The largest base-10000 weight a checked `numeric` may have: values below 10^131060, whose sum
/// over fewer than 10^8 slots stays below numeric's limit of 10^131072.
const NUMERIC_MAX_WEIGHT: i32 = 32764;

/// The bounds on the moments PostgreSQL's float aggregates keep (`stddev`, `variance` and their
/// kinds over `double precision` or `real`: the count N, the sum Sx and the sum of squared
/// deviations Sxx). Their combine function adds N1·N2/N·(Sx1/N1 − Sx2/N2)² to the sums of squares,
/// at most min(N1, N2)·(2·10^140)² ≈ 4.4·10^292 per combine for states within these bounds; the
/// at most 2^20 combines of a window's state rows, late rows and restatements stay below
/// 10^299, far from double precision's 1.8·10^308, where the combine fails.
const MOMENT_MAX: f64 = 1e140;
const MOMENT_MAX_COUNT: f64 = 1_099_511_627_776.0;

/// This backend's slot: unique among the live backends of the server, and at most
/// `MaxBackends`, so that two writers never share a state row.
pub fn backend_slot() -> i32 {
    #[cfg(any(feature = "pg15", feature = "pg16"))]
    {
        // SAFETY: set once at backend start, read in the backend's own thread.
        unsafe { pg_sys::MyBackendId }
    }
    #[cfg(not(any(feature = "pg15", feature = "pg16")))]
    {
        // SAFETY: as above; process numbers start at 0.
        unsafe { pg_sys::MyProcNumber + 1 }
    }
}

fn max_backends() -> i64 {
    // SAFETY: set by the postmaster before any backend starts, never changed after.
    i64::from(unsafe { pg_sys::MaxBackends }).max(1)
}

/// The bound on an integer field whose type's limit is `max`.
fn bound(max: i64) -> i64 {
    max / (SLOT_SHARE * max_backends())
}

/// Why `value` is beyond the bound: the type's name and the bound as the detail states it, or
/// `None` when it is within (or of a type with no bound).
pub fn beyond_bound(value: AnyElement) -> Option<(&'static str, String)> {
    let datum = value.datum();
    match value.oid() {
        pg_sys::INT8OID | pg_sys::MONEYOID => {
            let v = datum.value() as i64;
            let b = bound(i64::MAX);
            let money = value.oid() == pg_sys::MONEYOID;
            (v.unsigned_abs() > b as u64).then(|| {
                if money {
                    ("money", format!("±{}.{:02}", b / 100, b % 100))
                } else {
                    ("bigint", format!("±{b}"))
                }
            })
        }
        pg_sys::FLOAT8OID => {
            let v = f64::from_bits(datum.value() as u64);
            let b = f64::MAX / (SLOT_SHARE * max_backends()) as f64;
            (v.is_finite() && v.abs() > b).then(|| ("double precision", format!("±{b:.1e}")))
        }
        pg_sys::FLOAT4OID => {
            let v = f32::from_bits(datum.value() as u32);
            let b = f32::MAX / (SLOT_SHARE * max_backends()) as f32;
            (v.is_finite() && v.abs() > b).then(|| ("real", format!("±{b:.1e}")))
        }
        pg_sys::INTERVALOID => {
            // SAFETY: an interval datum points to a pg_sys::Interval.
            let i = unsafe { &*(datum.cast_mut_ptr::<pg_sys::Interval>()) };
            let months = bound(i64::from(i32::MAX));
            let micros = bound(i64::MAX);
            let beyond = i64::from(i.month).abs() > months
                || i64::from(i.day).abs() > months
                || i.time.unsigned_abs() > micros as u64;
            beyond.then(|| {
                (
                    "interval",
                    format!("±{months} months, ±{months} days and ±{micros} microseconds"),
                )
            })
        }
        pg_sys::NUMERICOID => (numeric_weight(datum) > NUMERIC_MAX_WEIGHT)
            .then(|| ("numeric", format!("±10^{}", 4 * (NUMERIC_MAX_WEIGHT + 1)))),
        pg_sys::FLOAT8ARRAYOID => {
            // SAFETY: a double precision[] datum, read as such.
            let moments =
                unsafe { Vec::<Option<f64>>::from_datum(datum, false) }.unwrap_or_default();
            let count = moments.first().copied().flatten().unwrap_or(0.0);
            let beyond = count > MOMENT_MAX_COUNT
                || moments
                    .iter()
                    .skip(1)
                    .flatten()
                    .any(|m| m.is_finite() && m.abs() > MOMENT_MAX);
            beyond.then(|| {
                (
                    "moments (double precision[])",
                    format!("2^40 rows and ±{MOMENT_MAX:.0e}"),
                )
            })
        }
        _ => None,
    }
}

/// The base-10000 weight of a `numeric` datum (its value is below 10000^(weight + 1)); 0 for
/// NaN and the infinities. Read from the header, whose layout is the on-disk format: a `u16`
/// that for the short form holds the weight in its low 7 bits (sign in 0x40), and for the long
/// form is followed by the weight as an `i16`; 0xC000 set marks the special values.
fn numeric_weight(datum: pg_sys::Datum) -> i32 {
    // SAFETY: the datum is a numeric varlena; detoasting gives readable memory with at least its
    // header, and the header's two bytes (and for the long form the weight's two) are present in
    // every numeric but the long-form zero, which has its weight too.
    unsafe {
        let v = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
        let len = pgrx::varlena::varsize_any_exhdr(v);
        let data = pgrx::varlena::vardata_any(v) as *const u8;
        if len < 2 {
            return 0;
        }
        let header = u16::from_ne_bytes([*data, *data.add(1)]);
        if header & 0xC000 == 0xC000 {
            0
        } else if header & 0x8000 != 0 {
            let w = i32::from(header & 0x3F);
            if header & 0x40 != 0 {
                w - 64
            } else {
                w
            }
        } else if len >= 4 {
            i32::from(i16::from_ne_bytes([*data.add(2), *data.add(3)]))
        } else {
            0
        }
    }
}
