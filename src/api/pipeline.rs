//! `eventtime.create_pipeline` and `eventtime.drop_pipeline`.
//!
//! Creating a pipeline validates every argument against the source table before anything is
//! written, then creates, in one transaction: the catalog row, the pipeline's internal tables,
//! its trigger function and statement trigger on the source table, and its four views.

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::PgRelation;

use crate::core::aggregates::{
    AggExpr, AggFunc, AggSpec, AvgKind, GenericAgg, Kept, KeptValues, ResolvedAgg, SerialFns,
};
use crate::core::ident::{quote_ident, quote_literal};
use crate::core::model::{Column, Offsets, PipelineDef};
use crate::core::sqlgen::{
    FEED_SUFFIX, INTERNAL_PREFIX, INTERNAL_SCHEMA, RESERVED_COLUMNS, ROW_NUMBER_COLUMN,
    SYSTEM_COLUMNS, VIEW_SUFFIXES, WINDOW_END_COLUMN, WINDOW_START_COLUMN,
};
use crate::core::time::{fixed_micros, MICROS_PER_DAY};
use crate::core::window::{self, Period, Span, WindowSpec, Zone};
use crate::pg::aggparse;
use crate::pg::catalog;
use crate::pg::error::{invalid, required, EtError};
use crate::pg::members;
use crate::pg::security::{self, as_catalog_owner, as_owner};
use crate::pg::zone::{self, PgZone};

/// PostgreSQL's longest name, in bytes.
const NAME_MAX: usize = 63;

pub struct SourceColumn {
    pub name: String,
    /// `format_type(atttypid, atttypmod)`: the declared type.
    pub declared: String,
    /// `atttypid::regtype`: the type without modifiers.
    pub base: String,
    pub type_oid: pg_sys::Oid,
    /// The column's collation, quoted and schema-qualified, when it is not its type's.
    pub collation: Option<String>,
}

pub fn source_columns(rel: pg_sys::Oid) -> Vec<SourceColumn> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.atttypid::regtype::text, a.atttypid, \
                        (SELECT format('%I.%I', n.nspname, c.collname) FROM pg_collation c JOIN pg_namespace n ON n.oid = c.collnamespace \
                         WHERE c.oid = a.attcollation AND a.attcollation <> t.typcollation) \
                 FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
                 WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                None,
                &[rel.into()],
            )
            .expect("pg_attribute read")
            .map(|r| SourceColumn {
                name: r.get(1).unwrap().unwrap(),
                declared: r.get(2).unwrap().unwrap(),
                base: r.get(3).unwrap().unwrap(),
                type_oid: r.get(4).unwrap().unwrap(),
                collation: r.get(5).unwrap(),
            })
            .collect()
    })
}

/// A unique index of table `rel` that makes the event id `event_id` unique in each key (of the
/// `keys` columns), which the pipeline can take as its ledger (`PipelineDef::id_index`), or None.
/// Its columns are the event id alone, or the event id and key columns with `NULLS NOT DISTINCT`
/// (as the ledger compares keys), each with its type's default operator class and its column's
/// collation; it is valid, immediate (not deferrable: a deferred check would let a duplicate
/// reach the trigger), without predicate or expression. The narrowest such index is taken.
pub(crate) fn unique_id_index(
    rel: pg_sys::Oid,
    event_id: &str,
    keys: &[String],
) -> Option<pg_sys::Oid> {
    Spi::get_one_with_args::<pg_sys::Oid>(
        "SELECT (SELECT i.indexrelid FROM pg_catalog.pg_index i \
         WHERE i.indrelid = $1 AND i.indisunique AND i.indimmediate AND i.indisvalid AND i.indislive \
           AND i.indpred IS NULL AND i.indexprs IS NULL \
           AND EXISTS (SELECT FROM unnest(i.indkey::int2[]) WITH ORDINALITY u(att, n) \
                       JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.att \
                       WHERE u.n <= i.indnkeyatts AND a.attname::text = $2) \
           AND NOT EXISTS (SELECT FROM unnest(i.indkey::int2[], i.indclass::oid[], i.indcollation::oid[]) WITH ORDINALITY u(att, cls, coll, n) \
                           JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.att \
                           LEFT JOIN pg_catalog.pg_opclass o ON o.oid = u.cls \
                           WHERE u.n <= i.indnkeyatts \
                             AND (o.opcdefault IS NOT TRUE OR u.coll IS DISTINCT FROM a.attcollation \
                                  OR NOT (a.attname::text = $2 OR (a.attname::text = ANY($3) AND (i.indnullsnotdistinct OR i.indisprimary))))) \
         ORDER BY i.indnkeyatts, i.indexrelid LIMIT 1)",
        &[rel.into(), event_id.into(), keys.to_vec().into()],
    )
    .expect("pg_index read")
}

fn find<'a>(cols: &'a [SourceColumn], table: &str, name: &str, role: &str) -> &'a SourceColumn {
    cols.iter().find(|c| c.name == name).unwrap_or_else(|| {
        EtError::UndefinedColumn {
            table: table.to_string(),
            column: name.to_string(),
            hint: Some(format!(
                "The {role} must name a column of the source table, exactly as it is spelled there (case matters)."
            )),
        }
        .raise()
    })
}

/// Keys and event ids go into unique btree indexes (grouping, dedup): their type needs a btree
/// ordering, as for GROUP BY.
fn require_ordering(table: &str, c: &SourceColumn, role: &str) {
    require_opclass(table, c, role, pg_sys::BTREE_AM_OID);
}

/// Session keys are hashed (`hash_record`, as in the key lookup and the key locks): their type
/// needs a default hash opclass.
fn require_hashing(table: &str, c: &SourceColumn) {
    require_opclass(table, c, "key", pg_sys::HASH_AM_OID);
}

/// The equality operator of the key type's default btree operator class (which
/// [`require_ordering`] checked), as `OPERATOR(schema.=)`: the operator of the unique indexes on
/// the key, whatever schema it lives in (`citext`'s is in the schema of the extension).
fn key_equality(c: &SourceColumn) -> String {
    // SAFETY: a catalog lookup by type oid; the type has a default btree opclass.
    let opclass = unsafe { pg_sys::GetDefaultOpClass(c.type_oid, pg_sys::BTREE_AM_OID) };
    as_catalog_owner(|| {
        Spi::get_one_with_args::<String>(
            "SELECT format('OPERATOR(%I.%s)', n.nspname, o.oprname) \
             FROM pg_opclass c JOIN pg_amop a ON a.amopfamily = c.opcfamily AND a.amopmethod = c.opcmethod \
               AND a.amoplefttype = c.opcintype AND a.amoprighttype = c.opcintype AND a.amopstrategy = 3 \
             JOIN pg_operator o ON o.oid = a.amopopr JOIN pg_namespace n ON n.oid = o.oprnamespace \
             WHERE c.oid = $1",
            &[opclass.into()],
        )
    })
    .expect("opclass read")
    .expect("a default btree opclass has an equality operator")
}

fn require_opclass(table: &str, c: &SourceColumn, role: &str, am: pg_sys::Oid) {
    // SAFETY: a catalog lookup by type oid; it raises no error for a type without an opclass.
    let opclass = unsafe { pg_sys::GetDefaultOpClass(c.type_oid, am) };
    if opclass == pg_sys::InvalidOid {
        EtError::NotGroupable {
            table: table.to_string(),
            column: c.name.clone(),
            type_name: c.declared.clone(),
            role: role.to_string(),
            hash: am == pg_sys::HASH_AM_OID,
        }
        .raise()
    }
}

/// A duration argument as a fixed number of microseconds (days count as 24 hours).
fn duration(arg: &str, v: Interval, allow_zero: bool) -> i64 {
    let Some(us) = fixed_micros(v.months(), v.days(), v.micros()) else {
        invalid(
            format!("{arg} \"{v}\" is not a fixed duration"),
            Some("Months and years have no fixed length; give the duration in days, hours or smaller units, such as '30 days'."),
        )
        .raise()
    };
    if us < 0 || (us == 0 && !allow_zero) {
        let what = if allow_zero {
            "must not be negative"
        } else {
            "must be positive"
        };
        invalid(format!("{arg} \"{v}\" {what}"), None).raise()
    }
    us
}

/// A window length as `create_pipeline` takes it: a fixed duration (hours, minutes, seconds) or
/// a calendar period (whole days and weeks, or whole months and years), never both.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Length {
    Fixed(i64),
    Calendar(Period),
}

const MIXED_HINT: &str = "A window is a fixed duration in hours, minutes or seconds ('26 hours'), or a calendar period in days, weeks, months or years ('1 day', '1 month'), not both.";

fn length(arg: &str, v: Interval) -> Length {
    let (months, days, micros) = (v.months(), v.days(), v.micros());
    let fields = [months != 0, days != 0, micros != 0];
    match (months, days, micros) {
        (m, d, 0) if m > 120_000 || d > 3_652_425 => {
            invalid(format!("{arg} \"{v}\" is longer than 10,000 years"), None).raise()
        }
        (0, 0, us) if us > 0 => Length::Fixed(us),
        (m, 0, 0) if m > 0 => Length::Calendar(Period::Months(m)),
        (0, d, 0) if d > 0 => Length::Calendar(Period::Days(d)),
        _ if fields.iter().filter(|f| **f).count() > 1 => invalid(
            format!("{arg} \"{v}\" mixes calendar and clock fields"),
            Some(MIXED_HINT),
        )
        .raise(),
        _ => invalid(
            format!("{arg} \"{v}\" must be positive"),
            Some(if arg == "window_slide" {
                "Hopping windows slide by a positive step shorter than their size, such as '10 minutes' for '1 hour' windows; for tumbling windows, leave window_slide out."
            } else {
                "Give a positive duration, such as '1 hour', or a calendar period, such as '1 day' or '1 month'."
            }),
        )
        .raise(),
    }
}

/// 1970-01-01 00:00 UTC, the default origin of fixed windows.
const UNIX_EPOCH: i64 = -946_684_800_000_000;

/// Names of UTC itself in the time zone database: local days there are fixed 24-hour days.
const UTC_NAMES: &[&str] = &[
    "UTC",
    "Etc/UTC",
    "UCT",
    "Etc/UCT",
    "Universal",
    "Etc/Universal",
    "Zulu",
    "Etc/Zulu",
    "GMT",
    "Etc/GMT",
    "GMT0",
    "Etc/GMT0",
    "GMT+0",
    "Etc/GMT+0",
    "GMT-0",
    "Etc/GMT-0",
    "Greenwich",
    "Etc/Greenwich",
];

fn require_windows_per_row(count: i64, size: Interval, slide: Interval) {
    if count > window::MAX_WINDOWS_PER_ROW {
        invalid(
            format!(
                "window_size \"{size}\" sliding by \"{slide}\" puts each row in {count} windows"
            ),
            Some(&format!(
                "A row may belong to at most {} windows: give a longer window_slide.",
                window::MAX_WINDOWS_PER_ROW
            )),
        )
        .raise()
    }
}

/// The window of `create_pipeline`'s arguments, the origin in force, and the time zone of a
/// calendar size.
///
/// Local days in UTC are fixed days, so a size (and slide) in days or weeks in UTC is the fixed
/// variant with the same bounds (`core::window`'s tests show they agree), on the ingest path of
/// fixed windows.
fn window_spec(
    size: Interval,
    slide: Option<Interval>,
    origin: Option<TimestampWithTimeZone>,
    time_zone: Option<&str>,
) -> (WindowSpec, i64, Option<String>) {
    let origin: Option<i64> = origin.map(|o| {
        if !o.is_finite() {
            invalid("window_origin must be finite", None).raise()
        }
        o.into_inner()
    });
    let size_len = length("window_size", size);
    let slide_len = slide.map(|s| (s, length("window_slide", s)));
    let too_long = |s: Interval| -> ! {
        invalid(
            format!("window_slide \"{s}\" must be shorter than window_size \"{size}\""),
            Some("Hopping windows slide by less than their size; for tumbling windows, leave window_slide out."),
        )
        .raise()
    };
    let other_kind = |s: Interval| -> ! {
        invalid(
            format!("window_slide \"{s}\" and window_size \"{size}\" are not of the same kind"),
            Some("Give both as fixed durations (hours, minutes, seconds), both in days and weeks, or both in months and years."),
        )
        .raise()
    };
    match size_len {
        Length::Fixed(size_us) => {
            if let Some(zone) = time_zone {
                invalid(
                    format!("time_zone \"{zone}\" is given, but window_size \"{size}\" is a fixed duration"),
                    Some("Fixed durations are the same in every zone and are aligned to window_origin in absolute time. For local days, weeks, months or years, give window_size in those units; otherwise leave time_zone out."),
                )
                .raise()
            }
            let origin = origin.unwrap_or(UNIX_EPOCH);
            let spec = match slide_len {
                None => WindowSpec::Tumbling {
                    size: size_us,
                    origin,
                },
                Some((s, Length::Fixed(slide_us))) if slide_us < size_us => {
                    require_windows_per_row(window::windows_per_row(size_us, slide_us), size, s);
                    WindowSpec::Hopping {
                        size: size_us,
                        slide: slide_us,
                        origin,
                    }
                }
                Some((s, Length::Fixed(_))) => too_long(s),
                Some((s, Length::Calendar(_))) => other_kind(s),
            };
            (spec, origin, None)
        }
        Length::Calendar(size_p) => {
            let given = time_zone.unwrap_or("UTC");
            let Some(zone_name) = zone::canonical(given) else {
                invalid(
                    format!("time zone \"{given}\" is not in the time zone database"),
                    Some("Give a name from pg_timezone_names, such as 'Europe/Berlin'. Abbreviations such as 'CET' are not zones: their meaning depends on the session, and they have no summer time. Names that stand for the host's settings (localtime, posixrules) or for no zone (Factory) are not accepted either."),
                )
                .raise()
            };
            let zone_name = zone_name.as_str();
            let slide_p = match slide_len {
                None => size_p,
                Some((s, Length::Calendar(p))) => {
                    if std::mem::discriminant(&p) != std::mem::discriminant(&size_p) {
                        other_kind(s)
                    }
                    if p.count() >= size_p.count() {
                        too_long(s)
                    }
                    require_windows_per_row(
                        window::windows_per_row(size_p.count(), p.count()),
                        size,
                        s,
                    );
                    p
                }
                Some((s, Length::Fixed(_))) => other_kind(s),
            };
            let zone = PgZone::new(zone_name);
            // Whole weeks count from a Monday (ISO weeks), other days from 1 January 1970, months
            // from January 1970: in wall-clock time of the zone.
            let local_origin = match origin {
                Some(o) => zone.local(o),
                None => match slide_p {
                    Period::Days(d) if d % 7 == 0 => window::local_time(1970, 1, 5, 0, 0),
                    _ => window::local_time(1970, 1, 1, 0, 0),
                },
            };
            let origin = zone.instant(local_origin);
            let spec = match (size_p, slide_p) {
                (Period::Days(n), Period::Days(s)) if UTC_NAMES.contains(&zone_name) => {
                    let (n, s) = (n as i64 * MICROS_PER_DAY, s as i64 * MICROS_PER_DAY);
                    if n == s {
                        WindowSpec::Tumbling { size: n, origin }
                    } else {
                        WindowSpec::Hopping {
                            size: n,
                            slide: s,
                            origin,
                        }
                    }
                }
                _ => WindowSpec::Calendar {
                    size: size_p,
                    slide: slide_p,
                    origin: local_origin,
                    time_zone: zone_name.to_string(),
                },
            };
            (spec, origin, Some(zone_name.to_string()))
        }
    }
}

/// The cumulate window of `create_pipeline`'s arguments (SPEC §7): periods of `size` cut by
/// `step`, the origin in force, and the time zone of a calendar size. The step is a fixed
/// duration, or whole days or months, shorter than the shortest period; a size in days in UTC is
/// a fixed duration, as for the other kinds.
fn cumulate_spec(
    size: Interval,
    step: Interval,
    slide_given: bool,
    origin: Option<TimestampWithTimeZone>,
    time_zone: Option<&str>,
) -> (WindowSpec, i64, Option<String>) {
    if slide_given {
        invalid(
            "window_slide is given together with cumulate_step",
            Some("Cumulate windows grow by cumulate_step from the start of each window_size period; hopping windows slide by window_slide. Give one of them."),
        )
        .raise()
    }
    let origin: Option<i64> = origin.map(|o| {
        if !o.is_finite() {
            invalid("window_origin must be finite", None).raise()
        }
        o.into_inner()
    });
    let span = |l: Length| match l {
        Length::Fixed(us) => Span::Us(us),
        Length::Calendar(Period::Days(d)) => Span::Days(d),
        Length::Calendar(Period::Months(m)) => Span::Months(m),
    };
    let size_len = length("window_size", size);
    let step_len = length("cumulate_step", step);
    let (mut size_s, mut step_s) = (span(size_len), span(step_len));
    let zone_name = match size_s {
        Span::Us(_) => {
            if let Some(zone) = time_zone {
                invalid(
                    format!("time_zone \"{zone}\" is given, but window_size \"{size}\" is a fixed duration"),
                    Some("Fixed durations are the same in every zone and are aligned to window_origin in absolute time. For local days, weeks, months or years, give window_size in those units; otherwise leave time_zone out."),
                )
                .raise()
            }
            if !matches!(step_s, Span::Us(_)) {
                invalid(
                    format!("cumulate_step \"{step}\" is a calendar period, but window_size \"{size}\" is a fixed duration"),
                    Some("Give cumulate_step as a fixed duration (hours, minutes, seconds) for a window_size in those units."),
                )
                .raise()
            }
            None
        }
        _ => {
            let given = time_zone.unwrap_or("UTC");
            let Some(zone_name) = zone::canonical(given) else {
                invalid(
                    format!("time zone \"{given}\" is not in the time zone database"),
                    Some("Give a name from pg_timezone_names, such as 'Europe/Berlin'."),
                )
                .raise()
            };
            Some(zone_name)
        }
    };
    let utc = zone_name.as_deref().is_some_and(|z| UTC_NAMES.contains(&z));
    // Local days in UTC are fixed days; whole weeks count from a Monday, as for the other kinds.
    let mut default_origin = UNIX_EPOCH;
    if utc {
        if let Span::Days(d) = size_s {
            if d % 7 == 0 {
                default_origin = UNIX_EPOCH + 4 * MICROS_PER_DAY;
            }
            size_s = Span::Us(d as i64 * MICROS_PER_DAY);
            if let Span::Days(s) = step_s {
                step_s = Span::Us(s as i64 * MICROS_PER_DAY);
            }
        }
    }
    if step_s.longest() >= size_s.shortest() {
        invalid(
            format!("cumulate_step \"{step}\" must be shorter than window_size \"{size}\""),
            Some("Cumulate windows grow by cumulate_step within each window_size period: give a step shorter than the period, such as '1 hour' for '1 day'."),
        )
        .raise()
    }
    let count = window::cumulate_windows_per_row(size_s, step_s);
    if count > window::MAX_WINDOWS_PER_ROW {
        invalid(
            format!("window_size \"{size}\" by cumulate_step \"{step}\" puts each row in up to {count} windows"),
            Some(&format!(
                "A row may belong to at most {} windows: give a longer cumulate_step.",
                window::MAX_WINDOWS_PER_ROW
            )),
        )
        .raise()
    }
    match size_s {
        // A fixed size, or days in UTC made fixed: the latter shows its zone, as for the other
        // kinds.
        Span::Us(_) => {
            let origin = origin.unwrap_or(default_origin);
            (
                WindowSpec::Cumulate {
                    size: size_s,
                    step: step_s,
                    origin,
                    time_zone: None,
                },
                origin,
                zone_name,
            )
        }
        _ => {
            let zone_name = zone_name.expect("a calendar size has a zone");
            let zone = PgZone::new(&zone_name);
            let local_origin = match origin {
                Some(o) => zone.local(o),
                None => match size_s {
                    Span::Days(d) if d % 7 == 0 => window::local_time(1970, 1, 5, 0, 0),
                    _ => window::local_time(1970, 1, 1, 0, 0),
                },
            };
            (
                WindowSpec::Cumulate {
                    size: size_s,
                    step: step_s,
                    origin: local_origin,
                    time_zone: Some(zone_name.clone()),
                },
                zone.instant(local_origin),
                Some(zone_name),
            )
        }
    }
}

/// The session window of `create_pipeline`'s arguments: a positive fixed gap, and none of the
/// arguments of the other kinds.
fn session_spec(
    gap: Interval,
    slide: Option<Interval>,
    origin: Option<TimestampWithTimeZone>,
    time_zone: Option<&str>,
) -> WindowSpec {
    for (arg, given) in [
        ("window_slide", slide.is_some()),
        ("window_origin", origin.is_some()),
        ("time_zone", time_zone.is_some()),
    ] {
        if given {
            invalid(
                format!("{arg} is given together with session_gap"),
                Some(&format!("Sessions are not aligned to a grid or a calendar: each row opens the window [event_time, event_time + session_gap), and overlapping windows of a key merge. Leave {arg} out.")),
            )
            .raise()
        }
    }
    if fixed_micros(gap.months(), gap.days(), gap.micros()).is_some_and(|us| us <= 0) {
        invalid(
            format!("session_gap \"{gap}\" must be positive"),
            Some("A session ends when a key has no row for session_gap: give a positive duration, such as '30 minutes'."),
        )
        .raise()
    }
    let us = duration("session_gap", gap, false);
    if us > MAX_SESSION_GAP {
        invalid(
            format!("session_gap \"{gap}\" is longer than 10,000 years"),
            None,
        )
        .raise()
    }
    WindowSpec::Session { gap: us }
}

/// The longest session gap: 10,000 years of 365.2425 days.
const MAX_SESSION_GAP: i64 = 3_652_425 * MICROS_PER_DAY;

/// Whether PostgreSQL has the built-in aggregate `func` for an argument of type `t`.
/// The accumulator kind of `func` over base type `base_oid`: only `avg` has one.
fn avg_kind_of(func: AggFunc, base_oid: pg_sys::Oid) -> Option<AvgKind> {
    (func == AggFunc::Avg)
        .then(|| AvgKind::for_input(&type_name(base_oid)))
        .flatten()
}

/// A type's name, as `regtype` shows it.
fn type_name(t: pg_sys::Oid) -> String {
    Spi::get_one_with_args::<String>("SELECT $1::regtype::text", &[t.into()])
        .expect("type name")
        .unwrap_or_default()
}

/// Whether role `owner` may execute function `f`.
fn may_execute(owner: pg_sys::Oid, f: pg_sys::Oid) -> bool {
    Spi::get_one_with_args::<bool>(
        "SELECT has_function_privilege($1, $2, 'EXECUTE')",
        &[owner.into(), f.into()],
    )
    .expect("privilege read")
    .unwrap_or(false)
}

/// The functions of aggregate `agg` (an oid of `pg_aggregate`), called as `spec` says, in a
/// pipeline of `owner`; refused with 0A000 when a pipeline cannot keep its state (see
/// [`GenericAgg`]), and with 42501 when `owner` may not execute one of its functions.
fn generic_of(
    agg: pg_sys::Oid,
    spec: &AggSpec,
    owner: pg_sys::Oid,
    value: (Option<pg_sys::Oid>, Option<pg_sys::Oid>),
) -> GenericAgg {
    let row = Spi::connect(|client| {
        let r = client
            .select(
                        "SELECT a.aggfnoid::regprocedure::text, a.aggkind::text, a.aggcombinefn::oid, \
                        t.typtype::text, format_type(a.aggtranstype, NULL), \
                        format('%I.%I', tn.nspname, tp.proname), tp.proisstrict, \
                        CASE WHEN cp.oid IS NOT NULL THEN format('%I.%I', cn.nspname, cp.proname) END, cp.proisstrict, \
                        CASE WHEN a.aggfinalfn <> 0 THEN format('%I.%I', fn.nspname, fp.proname) END, a.aggfinalextra, \
                        format_type(p.proargtypes[0], NULL), at.typtype::text, a.agginitval, \
                        a.aggtranstype = 'double precision[]'::regtype AND tn.nspname = 'pg_catalog' \
                        AND tp.proname IN ('float8_accum', 'float4_accum', 'float8_regr_accum'), \
                        a.aggtransfn::oid, a.aggfinalfn::oid, \
                        ARRAY(SELECT format_type(u.t, NULL) FROM unnest(p.proargtypes) WITH ORDINALITY u(t, o) ORDER BY u.o), \
                        EXISTS (SELECT FROM unnest(p.proargtypes) u(t) JOIN pg_type ut ON ut.oid = u.t WHERE ut.typtype = 'p'), \
                        (SELECT format('%I.%I', n.nspname, f.proname) FROM pg_proc f JOIN pg_namespace n ON n.oid = f.pronamespace WHERE f.oid = a.aggserialfn), \
                        (SELECT format('%I.%I', n.nspname, f.proname) FROM pg_proc f JOIN pg_namespace n ON n.oid = f.pronamespace WHERE f.oid = a.aggdeserialfn), \
                        CASE a.aggfinalmodify WHEN 's' THEN 'SHAREABLE' WHEN 'w' THEN 'READ_WRITE' ELSE 'READ_ONLY' END, \
                        a.aggserialfn::oid, a.aggdeserialfn::oid \
                        FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid \
                        JOIN pg_type t ON t.oid = a.aggtranstype JOIN pg_type at ON at.oid = p.proargtypes[0] \
                        JOIN pg_proc tp ON tp.oid = a.aggtransfn JOIN pg_namespace tn ON tn.oid = tp.pronamespace \
                        LEFT JOIN pg_proc cp ON cp.oid = a.aggcombinefn LEFT JOIN pg_namespace cn ON cn.oid = cp.pronamespace \
                        LEFT JOIN pg_proc fp ON fp.oid = a.aggfinalfn LEFT JOIN pg_namespace fn ON fn.oid = fp.pronamespace \
                        WHERE a.aggfnoid = $1",
                None,
                &[agg.into()],
            )
            .expect("pg_aggregate read")
            .first();
        let text = |i: usize| r.get::<String>(i).expect("text column");
        let flag = |i: usize| r.get::<bool>(i).expect("bool column").unwrap_or(false);
        let oid = |i: usize| {
            r.get::<pg_sys::Oid>(i)
                .expect("oid column")
                .unwrap_or(pg_sys::InvalidOid)
        };
        (
            text(1).unwrap_or_default(),
            text(2).unwrap_or_default(),
            oid(3),
            text(4).unwrap_or_default(),
            (
                text(5).unwrap_or_default(),
                text(6).unwrap_or_default(),
                flag(7),
            ),
            (text(8), flag(9), text(10), flag(11)),
            (text(12).unwrap_or_default(), text(13).unwrap_or_default()),
            text(14),
            flag(15),
            [oid(16), oid(3), oid(17)],
            (
                r.get::<Vec<String>>(18)
                    .expect("text[] column")
                    .unwrap_or_default(),
                flag(19),
            ),
            (
                text(20),
                text(21),
                text(22).unwrap_or_default(),
                [oid(23), oid(24)],
            ),
        )
    });
    let (
        aggregate,
        kind,
        combine,
        state_kind,
        trans,
        comb,
        arg,
        initcond,
        bounded,
        functions,
        args,
        serial,
    ) = row;
    let (arg_types, polymorphic_arg) = args;
    let (state_type, transfn, trans_strict) = trans;
    let (combinefn, combine_strict, finalfn, final_extra) = comb;
    let (arg_type, arg_kind) = arg;
    let alias = &spec.alias;
    let refuse = |why: &str, hint: &str| -> ! { not_in_pipeline(&aggregate, alias, why, hint) };
    if kind == "h" {
        refuse(
            "it is a hypothetical-set aggregate",
            "A window of a pipeline publishes aggregates of its rows: compute the rank of a hypothetical value from the published versions instead.",
        );
    }
    if let Some(k) = &spec.kept {
        let (elem, collation) = value;
        let elem = elem.expect("an aggregate of kept values has an analysed argument");
        // SAFETY: catalog lookups of the type the analysis gave the argument.
        if unsafe { pg_sys::get_element_type(pg_sys::getBaseType(elem)) } != pg_sys::InvalidOid {
            refuse(
                "its argument is an array, which a pipeline does not keep the values of",
                "Aggregate the elements (a key column for each) or a scalar computed from the array.",
            );
        }
        let skip_nulls = ignores_nulls(agg, &kind, trans_strict);
        if k.filtered && !skip_nulls {
            refuse(
                "it does not ignore NULLs, and a FILTER is kept as a NULL of the argument",
                "Filter the rows with a CASE in another aggregate, or drop the FILTER.",
            );
        }
        if !may_execute(owner, agg) {
            EtError::PermissionDenied {
                message: format!(
                    "role {} may not execute aggregate {aggregate} of \"{alias}\"",
                    security::role_name(owner),
                ),
                hint: "The pipeline runs the aggregate as the source table's owner: grant it EXECUTE on it.".into(),
            }
            .raise()
        }
        let (call, collate) = Spi::connect(|client| {
            let r = client
                .select(
                    "SELECT format('%I.%I', n.nspname, p.proname), \
                     (SELECT format(' COLLATE %I.%I', cn.nspname, c.collname) FROM pg_collation c \
                      JOIN pg_namespace cn ON cn.oid = c.collnamespace WHERE c.oid = $2 AND c.oid <> 100) \
                     FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = $1",
                    None,
                    &[agg.into(), collation.unwrap_or(pg_sys::InvalidOid).into()],
                )
                .expect("pg_proc read")
                .first();
            (
                r.get::<String>(1).expect("text").unwrap_or_default(),
                r.get::<String>(2).expect("text").unwrap_or_default(),
            )
        });
        let elem_type = type_name(elem);
        return GenericAgg {
            aggregate,
            transfn: String::new(),
            combinefn: String::new(),
            finalfn: None,
            final_extra: false,
            arg_type: elem_type.clone(),
            arg_types: Vec::new(),
            state_type: format!("{elem_type}[]"),
            initcond: None,
            bounded: false,
            helper: String::new(),
            values: Some(KeptValues {
                call,
                elem_type,
                skip_nulls,
                collate,
            }),
            serial: None,
        };
    }
    if kind != "n" {
        refuse(
            "it is an ordered-set aggregate",
            "A window's state is combined from partials in no particular order.",
        );
    }
    if state_type == "internal" {
        return serial_of(
            agg,
            spec,
            owner,
            (aggregate, transfn, trans_strict),
            (combine, combinefn, finalfn, final_extra),
            (arg_type, arg_types, polymorphic_arg),
            serial,
            functions,
        );
    }
    if combine == pg_sys::InvalidOid {
        refuse(
            "it has no combine function",
            "A window's state is merged from partial states, as PostgreSQL's parallel aggregation does: give the aggregate a COMBINEFUNC, or use one that has one.",
        );
    }
    if state_kind == "p" || arg_kind == "p" || polymorphic_arg {
        refuse(
            "its argument or transition type is polymorphic",
            "Use an aggregate whose argument and transition types are ordinary types.",
        );
    }
    if !trans_strict || !combine_strict {
        refuse(
            "its transition or combine function is not strict",
            "A pipeline passes FILTER as a NULL argument and merges NULL states as strict functions do: declare them STRICT.",
        );
    }
    require_execute(owner, functions, &aggregate, alias);
    let multi = arg_types.len() > 1;
    if multi && initcond.is_none() {
        // PostgreSQL refuses a strict transition function of two or more arguments without
        // one; kept for what a catalog could still hold.
        refuse(
            "it has two or more arguments and no initial condition",
            "Give the aggregate an INITCOND.",
        );
    }
    GenericAgg {
        aggregate,
        transfn,
        combinefn: combinefn.unwrap_or_default(),
        finalfn,
        final_extra,
        arg_type: if multi { state_type.clone() } else { arg_type },
        arg_types: if multi { arg_types } else { Vec::new() },
        state_type,
        initcond,
        bounded,
        helper: String::new(),
        values: None,
        serial: None,
    }
}

/// The 0A000 refusal of aggregate `aggregate` (as `regprocedure` shows it), named `alias`.
fn not_in_pipeline(aggregate: &str, alias: &str, why: &str, hint: &str) -> ! {
    EtError::NotSupported {
        message: format!(
            "aggregate {aggregate} of \"{alias}\" is not supported in a pipeline: {why}"
        ),
        hint: hint.to_string(),
    }
    .raise()
}

/// Whether aggregate `agg` (of kind `kind`) ignores NULL arguments: those of a strict
/// transition function, and of PostgreSQL's own all but those that collect their values
/// ([`Kept::COLLECTING`]); of the ordered-set ones, percentile_cont, percentile_disc and mode.
fn ignores_nulls(agg: pg_sys::Oid, kind: &str, trans_strict: bool) -> bool {
    let collecting: Vec<String> = Kept::COLLECTING.iter().map(|n| n.to_string()).collect();
    let builtin = Spi::get_one_with_args::<bool>(
        "SELECT p.pronamespace = 'pg_catalog'::regnamespace AND CASE WHEN $2 = 'o' \
         THEN p.proname IN ('percentile_cont', 'percentile_disc', 'mode') \
         ELSE p.proname <> ALL($3) END \
         FROM pg_proc p WHERE p.oid = $1",
        &[agg.into(), kind.into(), collecting.into()],
    )
    .expect("pg_proc read")
    .unwrap_or(false);
    builtin || (kind == "n" && trans_strict)
}

/// The [`GenericAgg`] of an aggregate whose transition state is `internal` (see
/// [`SerialFns`]), or its refusal.
#[allow(clippy::too_many_arguments)]
fn serial_of(
    agg: pg_sys::Oid,
    spec: &AggSpec,
    owner: pg_sys::Oid,
    (aggregate, transfn, trans_strict): (String, String, bool),
    (combine, combinefn, finalfn, final_extra): (pg_sys::Oid, Option<String>, Option<String>, bool),
    (arg_type, arg_types, polymorphic_arg): (String, Vec<String>, bool),
    (serialfn, deserialfn, final_modify, serial_oids): (
        Option<String>,
        Option<String>,
        String,
        [pg_sys::Oid; 2],
    ),
    functions: [pg_sys::Oid; 3],
) -> GenericAgg {
    let alias = &spec.alias;
    let refuse = |why: &str, hint: &str| -> ! { not_in_pipeline(&aggregate, alias, why, hint) };
    if polymorphic_arg {
        refuse(
            "its argument type is polymorphic",
            "Use an aggregate whose argument types are ordinary types.",
        );
    }
    if combine == pg_sys::InvalidOid {
        refuse(
            "its transition state is internal and it has no combine function",
            "A window's state is merged from partial states, as PostgreSQL's parallel aggregation does: use an aggregate with a COMBINEFUNC (string_agg and array_agg have one from PostgreSQL 16 on).",
        );
    }
    let (Some(serialfn), Some(deserialfn)) = (serialfn, deserialfn) else {
        refuse(
            "its transition state is internal and it has no serialization functions",
            "A window keeps an internal state in its serialized form: give the aggregate a SERIALFUNC and a DESERIALFUNC.",
        )
    };
    let Some(finalfn) = finalfn.filter(|_| !final_extra) else {
        refuse(
            "its final function takes extra arguments",
            "Use an aggregate whose final function takes the transition state alone.",
        )
    };
    if spec.expr.as_ref().is_some_and(|e| e.filtered) && !ignores_nulls(agg, "n", trans_strict) {
        refuse(
            "it does not ignore NULLs, and a FILTER is passed to it as a NULL of the argument",
            "Drop the FILTER, or filter the rows with a CASE in an aggregate that ignores NULLs.",
        );
    }
    require_execute(
        owner,
        functions.into_iter().chain(serial_oids).chain([agg]),
        &aggregate,
        alias,
    );
    GenericAgg {
        aggregate,
        transfn,
        combinefn: combinefn.unwrap_or_default(),
        finalfn: Some(finalfn),
        final_extra: false,
        arg_type,
        // Two or more: their row's type is named with the helpers (see `SerialFns`).
        arg_types: if arg_types.len() > 1 {
            arg_types
        } else {
            Vec::new()
        },
        state_type: "bytea".into(),
        initcond: None,
        bounded: false,
        helper: String::new(),
        values: None,
        serial: Some(SerialFns {
            serialfn,
            deserialfn,
            final_modify,
            what: String::new(),
        }),
    }
}

/// Refuses with 42501 the first of `functions` (an aggregate's, `InvalidOid` where it has
/// none) that `owner` may not execute.
fn require_execute(
    owner: pg_sys::Oid,
    functions: impl IntoIterator<Item = pg_sys::Oid>,
    aggregate: &str,
    alias: &str,
) {
    for f in functions.into_iter().filter(|f| *f != pg_sys::InvalidOid) {
        if !may_execute(owner, f) {
            EtError::PermissionDenied {
                message: format!(
                    "role {} may not execute {}, which aggregate {aggregate} of \"{alias}\" calls",
                    security::role_name(owner),
                    Spi::get_one_with_args::<String>("SELECT $1::regprocedure::text", &[f.into()])
                        .expect("function name")
                        .unwrap_or_default()
                ),
                hint: "The pipeline runs the aggregate's functions as the source table's owner: grant it EXECUTE on them.".into(),
            }
            .raise()
        }
    }
}

fn aggregate_exists(func: AggFunc, t: pg_sys::Oid) -> bool {
    Spi::get_one_with_args::<bool>(
        "SELECT EXISTS (SELECT 1 FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid JOIN pg_type t ON t.oid = $2 \
         WHERE p.proname = $1 AND p.pronamespace = 'pg_catalog'::regnamespace AND p.pronargs = 1 \
           AND (p.proargtypes[0] = t.oid \
                OR (p.proargtypes[0] = 'anyarray'::regtype AND t.typcategory = 'A') \
                OR (p.proargtypes[0] = 'anyenum'::regtype AND t.typtype = 'e') \
                OR EXISTS (SELECT 1 FROM pg_cast c WHERE c.castsource = t.oid AND c.casttarget = p.proargtypes[0] \
                           AND c.castcontext = 'i')))",
        &[func.name().into(), t.into()],
    )
    .expect("pg_aggregate read")
    .unwrap_or(false)
}

#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn create_pipeline(
    name: Option<&str>,
    source: Option<PgRelation>,
    event_time: Option<&str>,
    window_size: default!(Option<Interval>, "NULL"),
    key: default!(Option<Vec<Option<String>>>, "'{}'"),
    event_id: default!(Option<&str>, "NULL"),
    allowed_lateness: default!(Option<Interval>, "'0'"),
    aggregates: default!(Option<&str>, "'count(*) AS events'"),
    window_origin: default!(Option<TimestampWithTimeZone>, "NULL"),
    watermark_lag: default!(Option<Interval>, "NULL"),
    idle_timeout: default!(Option<Interval>, "NULL"),
    clock_lag: default!(Option<Interval>, "NULL"),
    max_ahead: default!(Option<Interval>, "'1 day'"),
    window_slide: default!(Option<Interval>, "NULL"),
    time_zone: default!(Option<&str>, "NULL"),
    session_gap: default!(Option<Interval>, "NULL"),
    offset_column: default!(Option<&str>, "NULL"),
    source_column: default!(Option<&str>, "NULL"),
    cumulate_step: default!(Option<Interval>, "NULL"),
    late_firing: default!(Option<Interval>, "NULL"),
) {
    const F: &str = "eventtime.create_pipeline";
    let name = required(name, F, "name");
    let source = required(source, F, "source");
    let event_time = required(event_time, F, "event_time");
    let key = required(key, F, "key");
    let allowed_lateness = required(allowed_lateness, F, "allowed_lateness");
    let aggregates_text = required(aggregates, F, "aggregates");

    // The name.
    if name.is_empty() {
        invalid("pipeline name must not be empty", None).raise()
    }
    let longest_suffix = VIEW_SUFFIXES
        .iter()
        .chain([&FEED_SUFFIX])
        .map(|s| s.len())
        .max()
        .unwrap();
    if name.len() + longest_suffix > NAME_MAX {
        EtError::NameTooLong {
            name: name.to_string(),
            limit: NAME_MAX - longest_suffix,
        }
        .raise()
    }
    // The source table, and who owns it: the pipeline will belong to that role.
    let source_oid = source.oid();
    let (relkind, source_sql, view_schema, owner, owner_may_create) = Spi::connect(|client| {
        let t = client
            .select(
                "SELECT c.relkind::text, format('%I.%I', n.nspname, c.relname), n.nspname::text, c.relowner, \
                        has_schema_privilege(c.relowner, n.oid, 'CREATE') \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1",
                None,
                &[source_oid.into()],
            )
            .expect("pg_class read")
            .first();
        (
            t.get::<String>(1).unwrap().unwrap(),
            t.get::<String>(2).unwrap().unwrap(),
            t.get::<String>(3).unwrap().unwrap(),
            t.get::<pg_sys::Oid>(4).unwrap().unwrap(),
            t.get::<bool>(5).unwrap().unwrap(),
        )
    });
    drop(source);
    if relkind != "r" && relkind != "p" {
        EtError::WrongObjectType {
            name: source_sql.clone(),
        }
        .raise()
    }
    members::refuse_partition(&source_sql, source_oid, name);
    if !security::has_privileges_of(security::caller(), owner) {
        EtError::NotTableOwner {
            table: source_sql.clone(),
            owner: security::role_name(owner),
        }
        .raise()
    }
    if !owner_may_create {
        let owner_name = security::role_name(owner);
        EtError::PermissionDenied {
            message: format!(
                "role {owner_name} cannot create the views of pipeline \"{name}\" in schema {}",
                quote_ident(&view_schema)
            ),
            hint: format!(
                "The views of a pipeline go beside its source table, and belong to the table's owner: GRANT CREATE ON SCHEMA {} TO {owner_name}.",
                quote_ident(&view_schema)
            ),
        }
        .raise()
    }
    let exists = as_catalog_owner(|| {
        Spi::get_one_with_args::<bool>(
            "SELECT EXISTS (SELECT 1 FROM _eventtime.pipeline WHERE name = $1)",
            &[name.into()],
        )
        .expect("catalog read")
        .unwrap_or(false)
    });
    if exists {
        EtError::DuplicatePipeline {
            name: name.to_string(),
        }
        .raise()
    }
    let cols = source_columns(source_oid);
    for added in [WINDOW_START_COLUMN, WINDOW_END_COLUMN, ROW_NUMBER_COLUMN] {
        if cols.iter().any(|c| c.name == added) {
            EtError::DuplicateColumn {
                name: added.to_string(),
                detail: format!("The ingest statement adds a column \"{added}\" beside the columns of {source_sql}."),
            }
            .raise()
        }
    }

    // Columns.
    let et = find(&cols, &source_sql, event_time, "event_time");
    if et.base != "timestamp with time zone" {
        EtError::WrongColumnType {
            table: source_sql.clone(),
            column: event_time.to_string(),
            found: et.declared.clone(),
            expected: "timestamp with time zone".into(),
            hint: Some("Event times must be timestamptz, so that every window is an instant range whatever the session time zone; convert the column with ALTER TABLE ... TYPE timestamptz USING ... AT TIME ZONE '...'.".into()),
        }
        .raise()
    }
    let mut keys = Vec::new();
    for k in &key {
        let Some(k) = k else {
            invalid("key must not contain NULL", Some("Pass the grouping columns as an array of column names, such as ARRAY['store'].")).raise()
        };
        let c = find(&cols, &source_sql, k, "key");
        require_ordering(&source_sql, c, "key");
        if session_gap.is_some() {
            require_hashing(&source_sql, c);
        }
        if keys.iter().any(|s: &Column| &s.name == k) {
            EtError::DuplicateColumn {
                name: k.clone(),
                detail: "The column appears twice in key.".into(),
            }
            .raise()
        }
        keys.push(Column {
            name: c.name.clone(),
            type_name: c.declared.clone(),
            collation: c.collation.clone(),
            eq_op: Some(key_equality(c)),
        });
    }
    let event_id_col = event_id.map(|e| {
        let c = find(&cols, &source_sql, e, "event_id");
        require_ordering(&source_sql, c, "event_id");
        Column {
            name: c.name.clone(),
            type_name: c.declared.clone(),
            collation: c.collation.clone(),
            eq_op: None,
        }
    });

    // Offsets (SPEC §12): an integer column, and the column naming the source, if any.
    let offsets = match (offset_column, source_column) {
        (None, None) => None,
        (None, Some(s)) => invalid(
            format!("source_column \"{s}\" is given without offset_column"),
            Some("source_column names the log each row's offset belongs to; give the offset column too, as offset_column => 'off'."),
        )
        .raise(),
        (Some(o), s) => {
            let c = find(&cols, &source_sql, o, "offset_column");
            if ![pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&c.type_oid) {
                EtError::WrongColumnType {
                    table: source_sql.clone(),
                    column: o.to_string(),
                    found: c.declared.clone(),
                    expected: "bigint".into(),
                    hint: Some("An offset is the position of a row's record in its log (a Kafka offset, a line number): a smallint, integer or bigint column.".into()),
                }
                .raise()
            }
            let source_column = s.map(|s| find(&cols, &source_sql, s, "source_column").name.clone());
            if source_column.as_deref() == Some(c.name.as_str()) {
                invalid(
                    format!("offset_column and source_column are both \"{o}\""),
                    Some("source_column names the log a row comes from, offset_column its position there: two columns."),
                )
                .raise()
            }
            Some(Offsets {
                column: c.name.clone(),
                source_column,
            })
        }
    };

    // Window and lateness.
    let (window, origin_us, zone) = match (window_size, session_gap) {
        (Some(size), None) if cumulate_step.is_some() => {
            let step = cumulate_step.expect("given");
            let (w, o, z) =
                cumulate_spec(size, step, window_slide.is_some(), window_origin, time_zone);
            (w, Some(o), z)
        }
        (None, Some(_)) if cumulate_step.is_some() => invalid(
            "cumulate_step is given together with session_gap",
            Some("Cumulate windows cut a window_size period by cumulate_step; sessions have no period. Give window_size with cumulate_step, or session_gap alone."),
        )
        .raise(),
        (Some(size), None) => {
            let (w, o, z) = window_spec(size, window_slide, window_origin, time_zone);
            (w, Some(o), z)
        }
        (None, Some(gap)) => (
            session_spec(gap, window_slide, window_origin, time_zone),
            None,
            None,
        ),
        (Some(size), Some(gap)) => invalid(
            format!("window_size \"{size}\" and session_gap \"{gap}\" are both given"),
            Some("A pipeline has one kind of window: window_size for tumbling and hopping windows, or session_gap for sessions."),
        )
        .raise(),
        (None, None) => invalid(
            "eventtime.create_pipeline needs window_size or session_gap",
            Some("Give window_size for tumbling or hopping windows ('1 day'), or session_gap for sessions ('30 minutes')."),
        )
        .raise(),
    };
    let lateness_us = duration("allowed_lateness", allowed_lateness, true);
    let watermark_lag_us = watermark_lag.map(|v| duration("watermark_lag", v, true));
    let idle_timeout_us = idle_timeout.map(|v| duration("idle_timeout", v, false));
    let clock_lag_us = clock_lag.map(|v| duration("clock_lag", v, true));
    let max_ahead_us = max_ahead.map(|v| duration("max_ahead", v, true));
    let late_firing_us = late_firing.map(|v| duration("late_firing", v, false));

    // Aggregates, read by PostgreSQL's parser.
    let mut parsed = aggparse::parse(aggregates_text, &source_sql);
    let specs = parsed.specs.clone();
    let mut taken: Vec<String> = keys.iter().map(|k| k.name.clone()).collect();
    let reserved = |name: &str| {
        RESERVED_COLUMNS.contains(&name)
            || SYSTEM_COLUMNS.contains(&name)
            || name.starts_with(INTERNAL_PREFIX)
    };
    let reserved_detail = format!(
        "The views of a pipeline add the columns {}; names starting with \"{INTERNAL_PREFIX}\" are reserved too, and PostgreSQL reserves the system column names {} in every table.",
        RESERVED_COLUMNS.join(", "),
        SYSTEM_COLUMNS.join(", ")
    );
    for k in &keys {
        if reserved(&k.name) {
            EtError::ReservedColumn {
                name: k.name.clone(),
                pipeline: name.to_string(),
                what: "key column",
                detail: reserved_detail.clone(),
            }
            .raise()
        }
    }
    for s in &specs {
        if reserved(&s.alias) {
            EtError::ReservedColumn {
                name: s.alias.clone(),
                pipeline: name.to_string(),
                what: "aggregate",
                detail: reserved_detail.clone(),
            }
            .raise()
        }
        if taken.contains(&s.alias) {
            EtError::DuplicateColumn {
                name: s.alias.clone(),
                detail: "Aggregate names must differ from each other and from the key columns."
                    .into(),
            }
            .raise()
        }
        taken.push(s.alias.clone());
    }
    // The plain columns first, by the pipeline's own errors; then the whole list by PostgreSQL's
    // parse analysis, which resolves the expressions and FILTERs.
    let mut avg_kinds = Vec::new();
    for s in &specs {
        let kind = match &s.arg {
            None => None,
            Some(a) => {
                let c = find(&cols, &source_sql, a, "aggregate argument");
                // Aggregates of a domain are those of its base type.
                // SAFETY: a catalog lookup by type oid; the oid comes from pg_attribute.
                let base_oid = unsafe { pg_sys::getBaseType(c.type_oid) };
                let kind = avg_kind_of(s.func, base_oid);
                let ok = match s.func {
                    // Resolved by the analysis, with PostgreSQL's own errors.
                    AggFunc::Count | AggFunc::Generic => true,
                    AggFunc::Avg => kind.is_some(),
                    _ => aggregate_exists(s.func, base_oid),
                };
                if !ok {
                    EtError::UndefinedAggregate {
                        function: s.func.name().into(),
                        column: a.clone(),
                        type_name: c.declared.clone(),
                    }
                    .raise()
                }
                kind
            }
        };
        avg_kinds.push(kind);
    }
    let analysed = parsed.analyze(source_oid);
    let specs = parsed.specs;
    for (i, s) in specs.iter().enumerate() {
        if let (Some(t), Some(e)) = (analysed.expr_types[i], &s.expr) {
            // SAFETY: a catalog lookup of the type the analysis gave the expression.
            let base_oid = unsafe { pg_sys::getBaseType(t) };
            avg_kinds[i] = avg_kind_of(s.func, base_oid);
            if s.func == AggFunc::Avg && avg_kinds[i].is_none() {
                EtError::UndefinedAggregate {
                    function: s.func.name().into(),
                    column: e.sql.clone(),
                    type_name: type_name(t),
                }
                .raise()
            }
        }
    }
    let probes: Vec<String> = specs
        .iter()
        .map(|s| {
            let expr = match (&s.expr, &s.arg) {
                (Some(e), _) if s.kept.is_some() => {
                    s.kept
                        .as_ref()
                        .expect("kept")
                        .call(s.call_name(), &e.sql, "")
                }
                (Some(e), _) if !e.args.is_empty() => {
                    format!("{}({})", s.call_name(), e.args.join(", "))
                }
                (Some(e), _) => format!("{}({})", s.call_name(), e.sql),
                (None, Some(a)) => format!("{}({})", s.call_name(), quote_ident(a)),
                (None, None) => "count(*)".to_string(),
            };
            format!("pg_typeof({expr})::text")
        })
        .collect();
    let result_types: Vec<String> = as_owner(owner, || {
        Spi::connect(|client| {
            let row = client
                .select(
                    &format!(
                        "SELECT {} FROM {source_sql} AS {} WHERE false",
                        probes.join(", "),
                        AggExpr::ROW
                    ),
                    None,
                    &[],
                )
                .expect("aggregate type probe")
                .first();
            (1..=specs.len())
                .map(|i| row.get::<String>(i).unwrap().unwrap())
                .collect()
        })
    });
    let generics: Vec<Option<GenericAgg>> = specs
        .iter()
        .zip(&analysed.functions)
        .enumerate()
        .map(|(i, (s, f))| {
            (s.func == AggFunc::Generic).then(|| {
                let value = (analysed.expr_types[i], analysed.expr_collations[i]);
                generic_of(*f, s, owner, value)
            })
        })
        .collect();
    let resolved: Vec<ResolvedAgg> = specs
        .into_iter()
        .zip(result_types)
        .zip(avg_kinds)
        .zip(generics)
        .map(|(((mut spec, result_type), avg_kind), generic)| {
            // Two or more arguments: the ingest statements read each row's transition state.
            if let (Some(e), Some(g)) = (spec.expr.as_mut(), &generic) {
                // (For an internal state, a row of them, made once the helpers are named.)
                if !e.args.is_empty() && g.serial.is_none() {
                    e.sql = g.row_state(&e.args);
                }
            }
            let acc_type = match (spec.func, avg_kind, &generic) {
                (_, _, Some(g)) => g.state_type.clone(),
                (AggFunc::Count, _, _) => "bigint".to_string(),
                (_, Some(AvgKind::Numeric), _) => "numeric".to_string(),
                (_, Some(AvgKind::Float), _) => "double precision".to_string(),
                (_, Some(AvgKind::Interval), _) => "interval".to_string(),
                _ => result_type.clone(),
            };
            ResolvedAgg {
                spec,
                result_type,
                acc_type,
                avg_kind,
                generic,
            }
        })
        .collect();

    let late_deltas = !window.is_session();
    let refused_doc_once = window.multi();
    let key_names_of_source: Vec<String> = keys.iter().map(|k| k.name.clone()).collect();
    // A unique index of the source covers its partitions, not the tables that inherit from it:
    // with such tables, the pipeline keeps a ledger of its own.
    // The lock CREATE TRIGGER takes, taken first: no index of the source is dropped between
    // the look-up and the dependency on it.
    // SAFETY: the relation exists (its oid was just resolved); the lock lasts until commit.
    unsafe {
        pg_sys::LockRelationOid(
            source_oid,
            pg_sys::ShareRowExclusiveLock as pg_sys::LOCKMODE,
        )
    };
    let inherited = members::tables_below(source_oid)
        .iter()
        .any(|(t, _)| !members::is_partition(*t));
    let id_index = event_id_col
        .as_ref()
        .filter(|_| !inherited)
        .and_then(|e| unique_id_index(source_oid, &e.name, &key_names_of_source));
    let mut def = PipelineDef {
        id: 0,
        name: name.to_string(),
        source: source_sql.clone(),
        view_schema: view_schema.clone(),
        event_time: event_time.to_string(),
        keys,
        event_id: event_id_col,
        window,
        lateness: lateness_us,
        aggs: resolved,
        watermark_lag: watermark_lag_us,
        idle_timeout: idle_timeout_us,
        clock_lag: clock_lag_us,
        max_ahead: max_ahead_us,
        late_deltas,
        late_row_flag: late_deltas,
        refused_doc_once,
        state_slots: late_deltas,
        offsets,
        id_index: id_index.is_some(),
        late_firing: late_firing_us,
    };
    let definition = serde_json::to_string(&def).expect("definition serializes");
    let key_names: Vec<String> = def.keys.iter().map(|k| k.name.clone()).collect();
    let id = as_catalog_owner(|| {
        Spi::get_one_with_args::<i32>(
        "WITH i AS (INSERT INTO _eventtime.pipeline (name, source, view_schema, event_time, key_columns, event_id, window_size, \
         window_origin, allowed_lateness, aggregates, definition, watermark_lag, idle_timeout, owner, clock_lag, max_ahead, \
         window_kind, window_slide, time_zone, session_gap) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13, $14::oid::regrole, $15, $16, $17, $18, $19, $20) \
         ON CONFLICT (name) DO NOTHING RETURNING id) SELECT (SELECT id FROM i)",
        &[
            name.into(),
            source_oid.into(),
            view_schema.as_str().into(),
            event_time.into(),
            key_names.into(),
            event_id.into(),
            window_size.into(),
            origin_us
                .map(|o| TimestampWithTimeZone::try_from(o).expect("origin in range"))
                .into(),
            allowed_lateness.into(),
            aggregates_text.into(),
            definition.as_str().into(),
            watermark_lag.into(),
            idle_timeout.into(),
            owner.into(),
            clock_lag.into(),
            max_ahead.into(),
            def.window.kind_name().into(),
            window_slide.or(cumulate_step).into(),
            zone.into(),
            session_gap.into(),
        ],
    )
    .expect("catalog insert")
    })
    // A concurrent create_pipeline of the same name committed first.
    .unwrap_or_else(|| {
        EtError::DuplicatePipeline {
            name: name.to_string(),
        }
        .raise()
    });

    // The internal tables and the trigger function go into schema _eventtime, where only the
    // catalog owner creates objects; they are handed to the table's owner before anything runs
    // them. The trigger and the views are the owner's own DDL, made as the owner.
    def.id = id;
    if def.aggs.iter().any(|a| a.generic.is_some()) {
        // The helper objects of the aggregates are named from the pipeline's id.
        for (i, a) in def.aggs.iter_mut().enumerate() {
            if let Some(g) = a.generic.as_mut() {
                g.helper = format!("{INTERNAL_SCHEMA}.p{id}_a{i}");
                if let Some(f) = g.serial.as_mut() {
                    f.what = format!(
                        "aggregate \"{}\" of pipeline \"{}\"",
                        a.spec.alias, def.name
                    );
                    // Two or more arguments: the ingest statements give them as one row of
                    // the helper's composite type (see `SerialFns`).
                    if !g.arg_types.is_empty() {
                        g.arg_type = format!("{}_args", g.helper);
                        let e = a.spec.expr.as_mut().expect("arguments are an expression");
                        e.sql = format!("ROW({})::{}", e.args.join(", "), g.arg_type);
                    }
                }
            }
        }
        let definition = serde_json::to_string(&def).expect("definition serializes");
        as_catalog_owner(|| {
            Spi::run_with_args(
                "UPDATE _eventtime.pipeline SET definition = $1::jsonb WHERE id = $2",
                &[definition.as_str().into(), id.into()],
            )
            .expect("catalog update")
        });
    }
    let mut internal = def.create_tables();
    internal.extend(def.aggs.iter().flat_map(|a| a.helper_ddl()));
    internal.push(def.create_trigger_function());
    internal.extend(def.create_front_function());
    internal.extend(def.hand_over(&security::role_name(owner)));
    let mut ddl = vec![def.create_trigger()];
    ddl.extend(def.create_views());
    ddl.extend(def.create_feed_function());
    ddl.push(format!(
        "COMMENT ON TRIGGER {} ON {} IS {}",
        def.trigger_name(),
        source_sql,
        quote_literal(&format!(
            "pg_eventtime: routes inserted rows into pipeline {name}"
        ))
    ));
    ddl.extend(def.view_comments(VIEW_SUFFIXES));
    let run = |stmts: &[String]| {
        Spi::connect_mut(|client| {
            for stmt in stmts {
                client
                    .update(stmt.as_str(), None, &[])
                    .expect("pipeline DDL");
            }
        })
    };
    as_catalog_owner(|| run(&internal));
    as_owner(owner, || run(&ddl));
    // The partitions and inheritance children of the source, at any depth, get the trigger too.
    members::sync(&catalog::load(name));

    hold_feed(&def);

    // The trigger's SQL names these columns: make PostgreSQL refuse to drop them or change their
    // type while the pipeline exists, as it does for columns a view uses. (Renames are refused by
    // the event trigger of `check_columns`.)
    let used = def.used_columns();
    let trigger_oid = Spi::get_one_with_args::<pg_sys::Oid>(
        "SELECT oid FROM pg_trigger WHERE tgrelid = $1 AND tgname = $2",
        &[source_oid.into(), format!("eventtime_ingest_p{id}").into()],
    )
    .expect("trigger read")
    .expect("the trigger was just created");
    let attnums: Vec<i16> = Spi::get_one_with_args::<Vec<i16>>(
        "SELECT array_agg(DISTINCT attnum) FROM pg_attribute WHERE attrelid = $1 AND attname = ANY($2)",
        &[source_oid.into(), used.iter().map(|u| u.to_string()).collect::<Vec<_>>().into()],
    )
    .expect("attribute read")
    .unwrap_or_default();
    let depender = pg_sys::ObjectAddress {
        classId: pg_sys::TriggerRelationId,
        objectId: trigger_oid,
        objectSubId: 0,
    };
    // The source's unique index on the event id is the pipeline's ledger: dropping it is
    // refused as dropping a used column is.
    let referenced = attnums
        .into_iter()
        .map(|attnum| (source_oid, attnum as i32))
        .chain(id_index.map(|index| (index, 0)));
    // And on what the aggregates' expressions use, as a view's rule does.
    analysed.record_dependencies(&depender);
    // And on the aggregates' helper objects, which depend on the aggregates' functions: a DROP
    // ... CASCADE of one of those reaches the trigger, and is refused by the event trigger.
    for (_, signature) in def
        .aggs
        .iter()
        .flat_map(|a| a.helpers())
        .filter(|(kind, _)| *kind != "TYPE")
    {
        let helper = as_catalog_owner(|| {
            Spi::get_one_with_args::<pg_sys::Oid>(
                "SELECT to_regprocedure($1)::oid",
                &[signature.as_str().into()],
            )
            .expect("helper lookup")
            .expect("the helper was just created")
        });
        let referenced = pg_sys::ObjectAddress {
            classId: pg_sys::ProcedureRelationId,
            objectId: helper,
            objectSubId: 0,
        };
        // SAFETY: as below.
        unsafe {
            pg_sys::recordDependencyOn(
                &depender,
                &referenced,
                pg_sys::DependencyType::DEPENDENCY_NORMAL,
            )
        };
    }
    for (object, sub) in referenced {
        let referenced = pg_sys::ObjectAddress {
            classId: pg_sys::RelationRelationId,
            objectId: object,
            objectSubId: sub,
        };
        // SAFETY: both addresses name objects that exist in this transaction; recordDependencyOn
        // only inserts a pg_depend row.
        unsafe {
            pg_sys::recordDependencyOn(
                &depender,
                &referenced,
                pg_sys::DependencyType::DEPENDENCY_NORMAL,
            )
        };
    }
}

/// The typed feed `<name>_changes` is a SQL function whose body PostgreSQL does not track: it is
/// made to depend on the pipeline's history table, so that whatever drops the history with
/// `CASCADE` (`DROP EXTENSION pg_eventtime CASCADE`, `DROP SCHEMA _eventtime CASCADE`) drops the
/// feed too, and leaves no function a later `create_pipeline` of the same name would collide with.
/// Nothing when the dependency is there already, or the feed or the history is gone.
fn hold_feed(def: &PipelineDef) {
    let (feed, history) = as_catalog_owner(|| {
        Spi::get_two_with_args::<pg_sys::Oid, pg_sys::Oid>(
            "SELECT to_regprocedure($1)::oid, to_regclass($2)::oid",
            &[
                format!("{}(text)", def.view(FEED_SUFFIX)).into(),
                def.table("history").into(),
            ],
        )
        .expect("feed lookup")
    });
    let (Some(feed), Some(history)) = (feed, history) else {
        return;
    };
    let held = Spi::get_one_with_args::<bool>(
        "SELECT EXISTS (SELECT FROM pg_depend WHERE classid = 'pg_proc'::regclass AND objid = $1 \
           AND refclassid = 'pg_class'::regclass AND refobjid = $2)",
        &[feed.into(), history.into()],
    )
    .expect("dependency read")
    .unwrap_or(false);
    if held {
        return;
    }
    let depender = pg_sys::ObjectAddress {
        classId: pg_sys::ProcedureRelationId,
        objectId: feed,
        objectSubId: 0,
    };
    let referenced = pg_sys::ObjectAddress {
        classId: pg_sys::RelationRelationId,
        objectId: history,
        objectSubId: 0,
    };
    // SAFETY: both addresses name objects that exist in this transaction; recordDependencyOn only
    // inserts a pg_depend row.
    unsafe {
        pg_sys::recordDependencyOn(
            &depender,
            &referenced,
            pg_sys::DependencyType::DEPENDENCY_NORMAL,
        )
    };
}

#[pg_schema]
mod _eventtime {
    use super::*;

    /// What this version gives every pipeline and a pipeline made by an earlier one lacks, made for
    /// pipeline `pipeline_id` by the upgrade scripts of `sql/` (`ALTER EXTENSION pg_eventtime
    /// UPDATE`, run by a superuser): since 0.2.0, the views `_provisional` and `_current`, with
    /// their comments and read-only triggers, made as the pipeline's owner as `create_pipeline`
    /// makes them. Returns whether it made them; a pipeline that cannot have them (its name leaves no
    /// room for the suffix, or its state table is gone) keeps the rest, with a warning.
    #[pg_extern(volatile, parallel_unsafe)]
    #[search_path(pg_catalog, pg_temp)]
    fn upgrade_pipeline(pipeline_id: i32) -> bool {
        // SAFETY: reads the current user's superuser flag; no pointers involved.
        if !unsafe { pg_sys::superuser() } {
            EtError::PermissionDenied {
                message:
                    "_eventtime.upgrade_pipeline is run by the upgrade scripts of pg_eventtime"
                        .into(),
                hint: "Run ALTER EXTENSION pg_eventtime UPDATE as a superuser.".into(),
            }
            .raise()
        }
        let p = catalog::load_by_id(pipeline_id);
        hold_feed(&p.def);
        let exists = |name: String| {
            as_catalog_owner(|| {
                crate::pg::spi::read_one::<bool>(
                    "SELECT to_regclass($1) IS NOT NULL",
                    &[name.into()],
                )
                .expect("relation lookup")
                .unwrap_or(false)
            })
        };
        if p.def.name.len() + "_provisional".len() > NAME_MAX {
            pgrx::warning!(
                "pipeline \"{}\" gets no views _provisional and _current: its name is longer than {} bytes",
                p.def.name,
                NAME_MAX - "_provisional".len()
            );
            return false;
        }
        if !exists(p.def.table("state")) || !exists(p.def.view("_latest")) {
            pgrx::warning!(
                "pipeline \"{}\" gets no views _provisional and _current: its state table or its view _latest is gone",
                p.def.name
            );
            return false;
        }
        if exists(p.def.view("_provisional")) || exists(p.def.view("_current")) {
            return false;
        }
        let mut ddl = p.def.create_provisional_views();
        ddl.extend(p.def.view_comments(&["_provisional", "_current"]));
        // Objects made while ALTER EXTENSION runs a script become members of the extension;
        // a pipeline's views are their owner's, as create_pipeline makes them. PostgreSQL
        // resets these globals itself if the script fails.
        // SAFETY: backend-local globals, read and restored in this backend's one thread.
        let (creating, current) =
            unsafe { (pg_sys::creating_extension, pg_sys::CurrentExtensionObject) };
        unsafe {
            pg_sys::creating_extension = false;
            pg_sys::CurrentExtensionObject = pg_sys::InvalidOid;
        }
        p.as_owner(|| {
            Spi::connect_mut(|client| {
                for stmt in &ddl {
                    client
                        .update(stmt.as_str(), None, &[])
                        .expect("pipeline DDL");
                }
            })
        });
        // SAFETY: as above.
        unsafe {
            pg_sys::creating_extension = creating;
            pg_sys::CurrentExtensionObject = current;
        }
        true
    }

    /// Called by the event trigger `eventtime_table_change` after every `ALTER TABLE`, with the
    /// tables it changed. The trigger function of a pipeline names the source columns it uses;
    /// a rename of one would make every insert into the table fail, so the `ALTER TABLE` is
    /// refused, naming the pipeline. (Dropping such a column or changing its type is refused by
    /// PostgreSQL itself, through the dependencies `create_pipeline` records.)
    #[pg_extern(volatile, parallel_unsafe)]
    #[search_path(pg_catalog, pg_temp)]
    fn check_columns(tables: Option<Vec<Option<pg_sys::Oid>>>) {
        let tables: Vec<pg_sys::Oid> = tables.unwrap_or_default().into_iter().flatten().collect();
        if tables.is_empty() {
            return;
        }
        // A rename recurses into the tables below the one named: the pipelines of any of them
        // are concerned.
        let names = members::pipeline_names(
            "WITH RECURSIVE down(oid) AS (SELECT unnest($1::oid[]) \
                           UNION SELECT i.inhrelid FROM pg_inherits i JOIN down ON i.inhparent = down.oid) \
                         SELECT name FROM _eventtime.pipeline WHERE source::oid IN (SELECT oid FROM down) ORDER BY name",
            tables,
        );
        for name in names {
            let p = catalog::load(&name);
            let cols = source_columns(p.source_oid);
            if let Some(gone) = p
                .def
                .used_columns()
                .into_iter()
                .find(|u| !cols.iter().any(|c| c.name == *u))
            {
                EtError::ColumnInUse {
                    table: p.def.source.clone(),
                    column: gone.to_string(),
                    pipeline: name.clone(),
                }
                .raise()
            }
        }
    }

    /// Called by the event trigger `eventtime_object_change` after an `ALTER` of a function,
    /// operator, type, collation or schema, with the objects it changed (`classids[i]`,
    /// `objids[i]`). The aggregates' expressions are kept as text, with the names of what they call:
    /// after a rename or a move to another schema of something an expression of a pipeline uses
    /// (or of the schema of such a thing), every insert into its source would fail, so the `ALTER`
    /// is refused, naming the pipeline, as a rename of a used column is. Other changes (an owner, a
    /// comment, a setting) pass.
    #[pg_extern(volatile, parallel_unsafe)]
    #[search_path(pg_catalog, pg_temp)]
    fn check_names(
        classids: Option<Vec<Option<pg_sys::Oid>>>,
        objids: Option<Vec<Option<pg_sys::Oid>>>,
    ) {
        let classids: Vec<pg_sys::Oid> =
            classids.unwrap_or_default().into_iter().flatten().collect();
        let objids: Vec<pg_sys::Oid> = objids.unwrap_or_default().into_iter().flatten().collect();
        if objids.is_empty() {
            return;
        }
        let names: Vec<String> = as_catalog_owner(|| {
            Spi::connect(|client| {
                client
                    .select(
                        "SELECT DISTINCT p.name FROM _eventtime.pipeline p \
                         JOIN pg_trigger t ON t.tgrelid = p.source::oid AND t.tgname = 'eventtime_ingest_p' || p.id \
                         JOIN pg_depend d ON d.classid = 'pg_trigger'::regclass AND d.objid = t.oid \
                         JOIN unnest($1::oid[], $2::oid[]) AS c(classid, objid) \
                           ON (d.refclassid = c.classid AND d.refobjid = c.objid) \
                           OR (c.classid = 'pg_namespace'::regclass AND c.objid = CASE d.refclassid \
                                 WHEN 'pg_proc'::regclass THEN (SELECT pronamespace FROM pg_proc WHERE oid = d.refobjid) \
                                 WHEN 'pg_type'::regclass THEN (SELECT typnamespace FROM pg_type WHERE oid = d.refobjid) \
                                 WHEN 'pg_operator'::regclass THEN (SELECT oprnamespace FROM pg_operator WHERE oid = d.refobjid) \
                                 WHEN 'pg_collation'::regclass THEN (SELECT collnamespace FROM pg_collation WHERE oid = d.refobjid) \
                               END) \
                         ORDER BY p.name",
                        None,
                        &[classids.into(), objids.into()],
                    )
                    .expect("catalog read")
                    .map(|r| r.get::<String>(1).expect("name").expect("name"))
                    .collect()
            })
        });
        for name in names {
            let p = catalog::load(&name);
            let source = Spi::get_one_with_args::<String>(
                "SELECT $1::regclass::text",
                &[p.source_oid.into()],
            )
            .expect("source name")
            .unwrap_or_default();
            for a in &p.def.aggs {
                let Some(e) = &a.spec.expr else { continue };
                // The expression as the trigger reads it, resolved again (nothing runs).
                let sql = format!("SELECT ({}) FROM ONLY {source} AS {}", e.sql, AggExpr::ROW);
                // As the owner, whose rights on the schemas the trigger's statements use.
                let failed = PgTryBuilder::new(|| {
                    p.as_owner(|| {
                        Spi::connect(|client| client.prepare(sql.as_str(), &[]).map(|_| ()))
                            .err()
                            .map(|e| e.to_string())
                    })
                })
                .catch_others(|e| match e {
                    pgrx::pg_sys::panic::CaughtError::PostgresError(r)
                    | pgrx::pg_sys::panic::CaughtError::ErrorReport(r) => {
                        Some(r.message().to_string())
                    }
                    other => other.rethrow(),
                })
                .execute();
                if let Some(error) = failed {
                    EtError::NameInUse {
                        pipeline: name.clone(),
                        aggregate: a.spec.alias.clone(),
                        // As the user wrote it: the row's alias is the extension's own.
                        expression: e.sql.replace(&format!("{}.", AggExpr::ROW), ""),
                        error,
                    }
                    .raise()
                }
            }
        }
    }
}

/// The views of pipeline `p` that exist: those of its names that read its history, refused
/// rows or state, or its views `_latest` and `_provisional` (as `_current` does).
fn own_views(p: &catalog::Pipeline) -> Vec<String> {
    let names: Vec<String> = VIEW_SUFFIXES
        .iter()
        .map(|s| format!("{}{s}", p.def.name))
        .collect();
    as_catalog_owner(|| {
        Spi::connect(|client| {
            client
                .select(
                    "SELECT DISTINCT format('%I.%I', n.nspname, c.relname) \
                     FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid \
                     JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass \
                       AND d.refobjid IN (SELECT to_regclass(t) FROM unnest($1::text[]) t) AND c.relkind = 'v' \
                       AND n.nspname = $2 AND c.relname = ANY($3)",
                    None,
                    &[
                        vec![
                            p.def.table("history"),
                            p.def.table("refused"),
                            p.def.table("state"),
                            p.def.view("_latest"),
                            p.def.view("_provisional"),
                        ]
                        .into(),
                        p.def.view_schema.as_str().into(),
                        names.into(),
                    ],
                )
                .expect("view read")
                .map(|r| r.get::<String>(1).expect("view").expect("view"))
                .collect()
        })
    })
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn drop_pipeline(name: Option<&str>) {
    let name = required(name, "eventtime.drop_pipeline", "name");
    let p = catalog::load(name);
    p.require_owner("drop it");
    if p.source_exists {
        members::drop_below(p.id, p.source_oid);
    }
    let run = |stmts: Vec<String>| {
        Spi::connect_mut(|client| {
            for stmt in &stmts {
                client
                    .update(stmt.as_str(), None, &[])
                    .expect("drop pipeline");
            }
        })
    };
    // As the catalog's owner: the objects are named by the catalog (the internal ones in
    // _eventtime, where nobody else creates anything), and this works whoever owns them now,
    // even after their owner was dropped (DROP OWNED and DROP ROLE leave nothing an owner could
    // drop). Of the views, only those that read the pipeline's tables are its own.
    let views = own_views(&p);
    let stmts: Vec<String> = p
        .def
        .drop_objects(p.source_exists)
        .into_iter()
        .filter(|s| !s.starts_with("DROP VIEW"))
        .collect();
    // One statement for the views, which depend on one another (`_current`).
    let drop_views =
        (!views.is_empty()).then(|| format!("DROP VIEW IF EXISTS {}", views.join(", ")));
    as_catalog_owner(|| run(drop_views.into_iter().chain(stmts).collect()));
    as_catalog_owner(|| {
        run(vec![
            format!(
                "DELETE FROM _eventtime.duplicate_counts WHERE pipeline_id = {}",
                p.id
            ),
            format!("DELETE FROM _eventtime.source WHERE pipeline_id = {}", p.id),
            format!("DELETE FROM _eventtime.pipeline WHERE id = {}", p.id),
        ])
    });
}
