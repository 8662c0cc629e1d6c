//! Beyond the horizon (SPEC §8): `eventtime.restate` folds refused rows into a new version of
//! kind `restatement`, by an explicit call only; `eventtime.lateness` and
//! `eventtime.suggest_lateness` read the lateness account from history and refused rows;
//! `eventtime.changes` feeds the committed versions to a consumer, exactly once, in commit order.
//!
//! **The cursor of `changes`.** Versions are written by transactions that commit in any order, so
//! neither `fired_at` nor a sequence tells what a reader has seen. Each version keeps the id of
//! the transaction that wrote it (`_et_xid`) and its order of writing (`_et_seq`). A cursor is two
//! snapshots `(A, B)` and a sequence number `s`: the reader has seen every version visible in `A`,
//! and the versions visible in `B` but not in `A` up to `s`. The next call takes a snapshot `N`
//! and returns the rest of `B`'s versions, then those visible in `N` and not in `B`. A transaction
//! that was running when `B` was taken is invisible in `B` whenever it commits, so its versions
//! come in the first call after its commit: every version once, each call's versions after the
//! previous call's. Within one call, the versions of transactions that committed between two
//! calls come in the order they were written.

use pgrx::datum::{AnyNumeric, Interval, Range, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::JsonB;

use super::pipeline::source_columns;
use super::watermark::require_read_committed;
use crate::core::aggregates::AggFunc;
use crate::core::ident::quote_ident;
use crate::pg::announce;
use crate::pg::catalog::{self, Pipeline};
use crate::pg::error::{invalid, required, EtError};
use crate::pg::security;

/// The pipeline `name`, for a role that may read the views `views` (suffixes) of it: what the
/// function shows is what they show.
/// The lateness account counts a window's rows from the row counts of its versions and the
/// arrival lateness of a row from its window's end. A session's rows move between sessions as
/// they merge, and a late row's own window is not the session it joined: neither holds.
fn refuse_sessions(p: &Pipeline, function: &str) {
    if p.def.window.is_session() {
        EtError::NotSupported {
            message: format!(
                "{function} does not apply to pipeline \"{}\", which has session windows",
                p.def.name
            ),
            hint: format!(
                "The rows a session pipeline refused, with their own windows and the watermark that refused each, are in {}.",
                p.def.view("_refused")
            ),
        }
        .raise()
    }
}

fn readable(name: &str, function: &str, views: &[&str]) -> Pipeline {
    let p = catalog::load(name);
    let caller = security::caller();
    let missing = views.iter().find(|v| {
        !crate::pg::spi::read_one::<bool>(
            "SELECT pg_catalog.pg_has_role($1, $2, 'USAGE') \
                 OR coalesce(pg_catalog.has_table_privilege($1, pg_catalog.to_regclass($3), 'SELECT'), false)",
            &[caller.into(), p.owner.into(), p.def.view(v).as_str().into()],
        )
        .expect("privilege check")
        .unwrap_or(false)
    });
    if missing.is_some() && !p.readable() {
        // Neither the owner nor the views of a pipeline the caller may not read are named.
        EtError::PermissionDenied {
            message: format!("permission denied for pipeline \"{name}\""),
            hint: format!(
                "{function} reads the pipeline's views: its owner can GRANT SELECT on them."
            ),
        }
        .raise()
    }
    if let Some(v) = missing {
        EtError::PermissionDenied {
            message: format!("permission denied for pipeline \"{name}\""),
            hint: format!(
                "{function} reads the pipeline's view {}: its owner, {}, can GRANT SELECT ON {} TO {}.",
                p.def.view(v),
                security::role_name(p.owner),
                p.def.view(v),
                security::role_name(caller)
            ),
        }
        .raise()
    }
    p
}

fn require_source(p: &Pipeline) {
    if !p.source_exists {
        EtError::SourceGone {
            pipeline: p.def.name.clone(),
        }
        .raise()
    }
}

fn require_range(from: TimestampWithTimeZone, to: TimestampWithTimeZone, function: &str) {
    if to <= from {
        invalid(
            format!("window_to {to} is not later than window_from {from}"),
            Some(&format!(
                "{function} takes the windows starting at or after window_from and before window_to."
            )),
        )
        .raise()
    }
}

fn tstz(t: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(t).expect("a valid timestamptz")
}

/// `AND` conditions on the refused rows aliased `r` for the key object `key`, and the text values
/// they compare with, as parameters from `$first` on.
fn key_filter(
    p: &Pipeline,
    key: &serde_json::Value,
    first: usize,
) -> (String, Vec<Option<String>>) {
    let name = &p.def.name;
    let Some(object) = key.as_object() else {
        invalid(
            format!("key {key} is not a JSON object"),
            Some("Pass the key as an object of key column values, such as '{\"store\": \"berlin\"}', or NULL for every key."),
        )
        .raise()
    };
    let mut sql = String::new();
    let mut values = Vec::new();
    for (column, value) in object {
        let Some(k) = p.def.keys.iter().find(|k| &k.name == column) else {
            EtError::UnknownKeyColumn {
                pipeline: name.clone(),
                column: column.clone(),
                keys: p.def.keys.iter().map(|k| k.name.clone()).collect(),
            }
            .raise()
        };
        // The value is read back into the key's type as `changes()` and `lateness()` wrote it
        // (`to_jsonb`): through the history's row type, so that an array, a composite or a
        // number arrives as itself, and a string through the type's input function.
        values.push(Some(serde_json::json!({ column: value }).to_string()));
        sql += &format!(
            " AND pg_catalog.record_eq(ROW(r.{col}), ROW((pg_catalog.jsonb_populate_record(NULL::{history}, ${n}::pg_catalog.jsonb)).{col}))",
            col = quote_ident(&k.name),
            history = p.def.table("history"),
            n = first + values.len() - 1,
        );
    }
    (sql, values)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn restate(
    pipeline: Option<&str>,
    window_from: Option<TimestampWithTimeZone>,
    window_to: default!(Option<TimestampWithTimeZone>, "NULL"),
    key: default!(Option<JsonB>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(key, JsonB),
        name!(window_start, TimestampWithTimeZone),
        name!(window_end, TimestampWithTimeZone),
        name!(version, i32),
        name!(rows_folded, i64),
    ),
> {
    const F: &str = "eventtime.restate";
    let name = required(pipeline, F, "pipeline");
    let from = required(window_from, F, "window_from");
    let p = catalog::load(name);
    p.require_owner("restate it");
    if p.def.window.is_session() {
        EtError::NotSupported {
            message: format!("pipeline \"{name}\" has session windows, which cannot be restated"),
            hint: "A refused row of a session pipeline missed its own window [event_time, event_time + session_gap), not one session: no session is the one to fold it into. A longer allowed_lateness keeps such rows.".into(),
        }
        .raise()
    }
    require_read_committed(name, F);
    if let Some(to) = window_to {
        require_range(from, to, F);
    }
    require_source(&p);
    let (filter, values) = match &key {
        Some(k) => key_filter(&p, &k.0, 4),
        None => (String::new(), Vec::new()),
    };
    let watermark = catalog::watermark(p.id);
    let sql = p.def.restate_statement(&filter);
    let rows: Vec<(
        JsonB,
        TimestampWithTimeZone,
        TimestampWithTimeZone,
        i32,
        i64,
    )> = p.as_owner(|| {
        Spi::connect_mut(|client| {
            // Restatements of one pipeline take turns, and each reads, in a snapshot of its
            // own taken after the lock, what the previous one folded.
            client
                .update(
                    &format!("LOCK TABLE {} IN EXCLUSIVE MODE", p.def.table("folds")),
                    None,
                    &[],
                )
                .expect("lock");
            let mut args: Vec<pgrx::datum::DatumWithOid> =
                vec![from.into(), window_to.into(), watermark.map(tstz).into()];
            args.extend(values.into_iter().map(|v| v.into()));
            client
                .update(&sql, None, &args)
                .expect("restate")
                .map(|r| {
                    (
                        r.get::<JsonB>(1).expect("key").expect("key"),
                        r.get(2).expect("start").expect("start"),
                        r.get(3).expect("end").expect("end"),
                        r.get(4).expect("version").expect("version"),
                        r.get(5).expect("rows").expect("rows"),
                    )
                })
                .collect()
        })
    });
    announce::announce(
        name,
        announce::Versions {
            restatement: rows.len() as i64,
            ..Default::default()
        },
        watermark,
    );
    TableIterator::new(rows)
}

type LatenessRow = (
    JsonB,
    TimestampWithTimeZone,
    TimestampWithTimeZone,
    i64,
    i64,
    i64,
    Option<f64>,
    Option<AnyNumeric>,
    Option<f64>,
    Option<Interval>,
    Option<Interval>,
    Option<Interval>,
    Option<Interval>,
);

// pgrx reads the column names from the `name!` types of the signature, so they cannot go into a
// type alias.
#[allow(clippy::type_complexity)]
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn lateness(
    pipeline: Option<&str>,
    window_from: Option<TimestampWithTimeZone>,
    window_to: Option<TimestampWithTimeZone>,
    value: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(key, JsonB),
        name!(window_start, TimestampWithTimeZone),
        name!(window_end, TimestampWithTimeZone),
        name!(on_time, i64),
        name!(late, i64),
        name!(refused, i64),
        name!(refused_share, Option<f64>),
        name!(refused_value, Option<AnyNumeric>),
        name!(refused_value_share, Option<f64>),
        name!(lateness_p50, Option<Interval>),
        name!(lateness_p90, Option<Interval>),
        name!(lateness_p99, Option<Interval>),
        name!(lateness_max, Option<Interval>),
    ),
> {
    const F: &str = "eventtime.lateness";
    let name = required(pipeline, F, "pipeline");
    let from = required(window_from, F, "window_from");
    let to = required(window_to, F, "window_to");
    let p = readable(name, F, &["_history", "_refused"]);
    refuse_sessions(&p, F);
    require_range(from, to, F);
    let value = value.map(|column| {
        require_source(&p);
        let cols = source_columns(p.source_oid);
        let Some(c) = cols.iter().find(|c| c.name == column) else {
            EtError::UndefinedColumn {
                table: p.def.source.clone(),
                column: column.to_string(),
                hint: Some("value names a numeric column of the source table, exactly as it is spelled there (case matters).".into()),
            }
            .raise()
        };
        let may_read = crate::pg::spi::read_one::<bool>(
            "SELECT pg_catalog.has_column_privilege($1, $2, $3, 'SELECT')",
            &[security::caller().into(), p.source_oid.into(), column.into()],
        )
        .unwrap_or(Some(true))
        .unwrap_or(true);
        if !may_read {
            EtError::PermissionDenied {
                message: format!("permission denied for column \"{column}\" of {}", p.def.source),
                hint: format!(
                    "value weighs the refused rows by a column of the source table, which the caller needs SELECT on: GRANT SELECT ({}) ON {} TO {}.",
                    quote_ident(column),
                    p.def.source,
                    security::role_name(security::caller())
                ),
            }
            .raise()
        }
        const NUMERIC: &[&str] = &["smallint", "integer", "bigint", "numeric", "real", "double precision"];
        if !NUMERIC.contains(&c.base.as_str()) {
            EtError::WrongColumnType {
                table: p.def.source.clone(),
                column: column.to_string(),
                found: c.declared.clone(),
                expected: "a numeric type".into(),
                hint: Some("value weighs refused rows by a column such as an amount: give a column of an integer, numeric or floating-point type.".into()),
            }
            .raise()
        }
        // The window's accepted value comes from a sum or avg of the column, if the pipeline
        // keeps one.
        let acc = p.def.aggs.iter().position(|a| {
            matches!(a.spec.func, AggFunc::Sum | AggFunc::Avg) && a.spec.arg.as_deref() == Some(column)
        });
        (column.to_string(), acc)
    });
    let sql = p
        .def
        .lateness_statement(value.as_ref().map(|(c, i)| (c.as_str(), *i)));
    let watermark = catalog::watermark(p.id);
    let rows: Vec<LatenessRow> = p.as_owner(|| {
        Spi::connect(|client| {
            client
                .select(
                    &sql,
                    None,
                    &[from.into(), to.into(), watermark.map(tstz).into()],
                )
                .expect("lateness")
                .map(|r| {
                    (
                        r.get::<JsonB>(1).expect("key").expect("key"),
                        r.get(2).expect("start").expect("start"),
                        r.get(3).expect("end").expect("end"),
                        r.get(4).expect("on_time").expect("on_time"),
                        r.get(5).expect("late").expect("late"),
                        r.get(6).expect("refused").expect("refused"),
                        r.get(7).expect("share"),
                        r.get(8).expect("value"),
                        r.get(9).expect("value share"),
                        r.get(10).expect("p50"),
                        r.get(11).expect("p90"),
                        r.get(12).expect("p99"),
                        r.get(13).expect("max"),
                    )
                })
                .collect()
        })
    });
    TableIterator::new(rows)
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn suggest_lateness(
    pipeline: Option<&str>,
    coverage: default!(Option<f64>, "0.999"),
    since: default!(Option<TimestampWithTimeZone>, "NULL"),
) -> Option<Interval> {
    const F: &str = "eventtime.suggest_lateness";
    let name = required(pipeline, F, "pipeline");
    let coverage = required(coverage, F, "coverage");
    if !(coverage > 0.0 && coverage <= 1.0) {
        invalid(
            format!("coverage {coverage} is not in (0, 1]"),
            Some("coverage is the share of the rows that arrived after their window closed that the suggested lateness would have accepted, such as 0.99."),
        )
        .raise()
    }
    let p = readable(name, F, &["_history", "_refused"]);
    refuse_sessions(&p, F);
    let sql = p.def.suggest_lateness_statement();
    p.as_owner(|| {
        crate::pg::spi::read_one::<Interval>(&sql, &[coverage.into(), since.into()])
            .expect("suggest_lateness")
    })
}

/// A cursor of `changes`: `v1;<pipeline id>;<snapshot A>;<snapshot B>;<sequence>`, a snapshot
/// empty for none.
struct Cursor {
    a: Option<String>,
    b: Option<String>,
    seq: i64,
}

impl Cursor {
    fn parse(text: &str, p: &Pipeline) -> Cursor {
        let bad = || -> ! {
            invalid(
                format!("cursor \"{text}\" is not a cursor of pipeline \"{}\"", p.def.name),
                Some("Pass NULL to read from the first version, or the cursor column of a row eventtime.changes returned for this pipeline."),
            )
            .raise()
        };
        let parts: Vec<&str> = text.split(';').collect();
        let [version, id, a, b, seq] = parts.as_slice() else {
            bad()
        };
        let snapshot = |s: &str| -> Option<String> {
            if s.is_empty() {
                None
            } else if s
                .chars()
                .all(|c| c.is_ascii_digit() || c == ':' || c == ',')
            {
                Some(s.to_string())
            } else {
                bad()
            }
        };
        if *version != "v1" || id.parse::<i32>().ok() != Some(p.id) {
            bad()
        }
        Cursor {
            a: snapshot(a),
            b: snapshot(b),
            seq: seq.parse().unwrap_or_else(|_| bad()),
        }
    }

    fn text(id: i32, a: Option<&str>, b: Option<&str>, seq: i64) -> String {
        format!("v1;{id};{};{};{seq}", a.unwrap_or(""), b.unwrap_or(""))
    }
}

type ChangeRow = (
    JsonB,
    TimestampWithTimeZone,
    TimestampWithTimeZone,
    i32,
    String,
    JsonB,
    bool,
    TimestampWithTimeZone,
    TimestampWithTimeZone,
    Option<Range<TimestampWithTimeZone>>,
    String,
);

#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn changes(
    pipeline: Option<&str>,
    cursor: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(key, JsonB),
        name!(window_start, TimestampWithTimeZone),
        name!(window_end, TimestampWithTimeZone),
        name!(version, i32),
        name!(kind, String),
        name!(aggregates, JsonB),
        name!(sealed, bool),
        name!(watermark, TimestampWithTimeZone),
        name!(fired_at, TimestampWithTimeZone),
        name!(merged_into, Option<Range<TimestampWithTimeZone>>),
        name!(cursor, String),
    ),
> {
    const F: &str = "eventtime.changes";
    let name = required(pipeline, F, "pipeline");
    // A transaction that wrote is not in the snapshots it takes: its own versions would look
    // committed to the cursor, and be lost if it rolled back. (Checked first: reading the
    // catalog below locks its row, which gives the transaction an id.)
    // SAFETY: reads the current transaction's id, a backend global.
    if unsafe { pg_sys::GetTopTransactionIdIfAny() } != pg_sys::InvalidTransactionId {
        EtError::WroteInTransaction {
            function: F,
            pipeline: name.to_string(),
        }
        .raise()
    }
    let p = readable(name, F, &["_history"]);
    let c = match cursor {
        Some(text) => Cursor::parse(text, &p),
        None => Cursor {
            a: None,
            b: None,
            seq: 0,
        },
    };
    let sql = p.def.changes_statement();
    let rows: Vec<ChangeRow> = p.as_owner(|| {
        Spi::connect(|client| {
            // The snapshot the cursor moves to, taken before the statement that reads the
            // versions: that statement's snapshot is the same or later, so it sees every version
            // this one does (what it sees beyond comes with the next call).
            let now: String = client
                .select("SELECT pg_catalog.pg_current_snapshot()::text", None, &[])
                .expect("snapshot")
                .first()
                .get(1)
                .expect("snapshot")
                .expect("snapshot");
            client
                .select(
                    &sql,
                    None,
                    &[
                        c.a.clone().into(),
                        c.b.clone().into(),
                        c.seq.into(),
                        now.into(),
                    ],
                )
                .expect("changes")
                .map(|r| {
                    let a: Option<String> = r.get(10).expect("a");
                    let b: Option<String> = r.get(11).expect("b");
                    let seq: i64 = r.get(12).expect("seq").expect("seq");
                    (
                        r.get::<JsonB>(1).expect("key").expect("key"),
                        r.get(2).expect("start").expect("start"),
                        r.get(3).expect("end").expect("end"),
                        r.get(4).expect("version").expect("version"),
                        r.get(5).expect("kind").expect("kind"),
                        r.get::<JsonB>(6).expect("aggregates").expect("aggregates"),
                        r.get(7).expect("sealed").expect("sealed"),
                        r.get(8).expect("watermark").expect("watermark"),
                        r.get(9).expect("fired_at").expect("fired_at"),
                        r.get(13).expect("merged_into"),
                        Cursor::text(p.id, a.as_deref(), b.as_deref(), seq),
                    )
                })
                .collect()
        })
    });
    TableIterator::new(rows)
}
