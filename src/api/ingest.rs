//! Ingest. Every `INSERT` or `COPY` into a source table fires the pipeline's statement trigger,
//! which runs one set-based statement over the statement's transition table (see
//! `core::sqlgen::PipelineDef::ingest_statement`). `eventtime.ingest` is the function form: it
//! inserts a JSON document into the source table, so it takes the same path, and returns the
//! counts the trigger left behind.

use std::cell::RefCell;
use std::collections::HashMap;

use pgrx::datum::{AnyElement, TimestampWithTimeZone};
use pgrx::prelude::*;

use crate::core::ident::quote_ident;
use crate::core::sqlgen::COLLECT_COUNTS;
use crate::core::time;
use crate::core::window::{Period, Span, Utc, WindowSpec};
use crate::pg::catalog;
use crate::pg::error::{invalid, required, EtError};
use crate::pg::jsonb::RawJsonb;
use crate::pg::overflow;
use crate::pg::security;
use crate::pg::zone::PgZone;

fn tstz(t: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(t).expect("window bounds are valid timestamptz values")
}

#[derive(Default, Clone, Copy)]
struct Counts {
    accepted: i64,
    late: i64,
    refused: i64,
    duplicates: i64,
}

thread_local! {
    /// Counts of the last ingest statement of each pipeline in this backend, written by the
    /// trigger function and read by `eventtime.ingest` right after its own INSERT.
    static LAST_COUNTS: RefCell<HashMap<i32, Counts>> = RefCell::new(HashMap::new());
}

#[pg_schema]
mod _eventtime {
    use super::*;

    /// The start of the tumbling window holding `event_time`, or NULL when it has none (a NULL or
    /// infinite event time, or one whose window is outside the timestamp range). The ingest
    /// statements write nothing for such a row, and the trigger function then raises
    /// [`raise_event_time_error`], which undoes the whole statement.
    #[pg_extern(immutable, parallel_safe)]
    fn tumble_start(
        event_time: Option<TimestampWithTimeZone>,
        size_us: i64,
        origin_us: i64,
    ) -> Option<TimestampWithTimeZone> {
        let micros: i64 = event_time?.into_inner();
        let w = WindowSpec::tumbling_window(size_us, origin_us, micros).ok()?;
        Some(TimestampWithTimeZone::try_from(w.start).expect("window start is a valid timestamptz"))
    }

    /// The hopping windows `[origin + k·slide, origin + k·slide + size)` holding `event_time`; no
    /// row when it has none (see [`tumble_start`]).
    #[pg_extern(immutable, parallel_safe)]
    fn hop(
        event_time: Option<TimestampWithTimeZone>,
        size_us: i64,
        slide_us: i64,
        origin_us: i64,
    ) -> TableIterator<
        'static,
        (
            name!(window_start, TimestampWithTimeZone),
            name!(window_end, TimestampWithTimeZone),
        ),
    > {
        let windows = event_time
            .and_then(|e| {
                WindowSpec::fixed_windows(size_us, slide_us, origin_us, e.into_inner()).ok()
            })
            .unwrap_or_default();
        TableIterator::new(windows.into_iter().map(|w| (tstz(w.start), tstz(w.end))))
    }

    /// The calendar windows holding `event_time`: `size` and `slide` whole months when `months`,
    /// whole days otherwise, from the wall-clock origin `origin_local_us` in `time_zone`; no row
    /// when it has none.
    #[pg_extern(immutable, parallel_safe)]
    fn calendar(
        event_time: Option<TimestampWithTimeZone>,
        size: i32,
        slide: i32,
        months: bool,
        origin_local_us: i64,
        time_zone: &str,
    ) -> TableIterator<
        'static,
        (
            name!(window_start, TimestampWithTimeZone),
            name!(window_end, TimestampWithTimeZone),
        ),
    > {
        let period = |n| {
            if months {
                Period::Months(n)
            } else {
                Period::Days(n)
            }
        };
        let windows = event_time
            .and_then(|e| {
                WindowSpec::calendar_windows(
                    period(size),
                    period(slide),
                    origin_local_us,
                    &PgZone::new(time_zone),
                    e.into_inner(),
                )
                .ok()
            })
            .unwrap_or_default();
        TableIterator::new(windows.into_iter().map(|w| (tstz(w.start), tstz(w.end))))
    }

    /// The cumulate windows holding `event_time` (see `core::window`): `size` and `step` as
    /// `Span::text` writes them, `origin_us` in absolute time for a fixed size and wall-clock
    /// time of `time_zone` otherwise; no row when it has none.
    #[pg_extern(immutable, parallel_safe)]
    fn cumulate(
        event_time: Option<TimestampWithTimeZone>,
        size: &str,
        step: &str,
        origin_us: i64,
        time_zone: Option<&str>,
    ) -> TableIterator<
        'static,
        (
            name!(window_start, TimestampWithTimeZone),
            name!(window_end, TimestampWithTimeZone),
        ),
    > {
        let windows = match (event_time, Span::parse(size), Span::parse(step)) {
            (Some(e), Some(size), Some(step)) => {
                let r = match time_zone {
                    Some(z) => WindowSpec::cumulate_windows(
                        size,
                        step,
                        origin_us,
                        &PgZone::new(z),
                        e.into_inner(),
                    ),
                    None => {
                        WindowSpec::cumulate_windows(size, step, origin_us, &Utc, e.into_inner())
                    }
                };
                r.unwrap_or_default()
            }
            _ => Vec::new(),
        };
        TableIterator::new(windows.into_iter().map(|w| (tstz(w.start), tstz(w.end))))
    }

    /// The error of a row whose event time has no window: NULL, infinite, or with a window outside
    /// the timestamp range. Raised by a pipeline's trigger function after its ingest statement
    /// found such a row, so that the error's context is the trigger function, not the statement.
    #[pg_extern(volatile, parallel_unsafe)]
    #[search_path(pg_catalog, pg_temp)]
    fn raise_event_time_error(pipeline_id: i32, event_time: Option<TimestampWithTimeZone>) {
        let (pipeline, column) = catalog::name_and_event_time(pipeline_id);
        let Some(e) = event_time else {
            EtError::NullEventTime { pipeline, column }.raise()
        };
        let micros: i64 = e.into_inner();
        EtError::EventTimeOutOfRange {
            pipeline,
            column,
            value: e.to_string(),
            infinite: !time::is_finite(micros),
        }
        .raise()
    }

    /// This backend's slot among the state rows of an open window (see `pg::overflow`).
    #[pg_extern(stable, parallel_restricted)]
    fn backend_slot() -> i32 {
        overflow::backend_slot()
    }

    /// `value`, a sum kept in the state of aggregate `aggregate` of pipeline `pipeline_id` for
    /// the window starting `window_start`, unless it is beyond the bound that keeps the window's
    /// firing from overflowing (see `pg::overflow`): then the statement fails with 22003.
    #[pg_extern(stable, strict, parallel_safe)]
    fn acc_check(
        value: AnyElement,
        pipeline_id: i32,
        aggregate: &str,
        window_start: TimestampWithTimeZone,
    ) -> AnyElement {
        let Some((type_name, limit)) = overflow::beyond_bound(value) else {
            return value;
        };
        EtError::AccumulatorOverflow {
            pipeline: catalog::name_and_event_time(pipeline_id).0,
            aggregate: aggregate.to_string(),
            window_start: window_start.to_string(),
            type_name: type_name.to_string(),
            limit,
        }
        .raise()
    }

    /// Called by a pipeline's trigger function once per statement while `eventtime.ingest` runs
    /// its INSERT (see `core::sqlgen::COLLECT_COUNTS`).
    #[pg_extern(volatile, parallel_unsafe)]
    fn note_counts(pipeline_id: i32, accepted: i64, late: i64, refused: i64, duplicates: i64) {
        note_statement_counts(pipeline_id, accepted, late, refused, duplicates)
    }
}

/// Keeps the counts of a pipeline's ingest statement for `eventtime.ingest`: called by the
/// trigger function through `_eventtime.note_counts`, and by the trigger front directly.
pub(crate) fn note_statement_counts(
    pipeline_id: i32,
    accepted: i64,
    late: i64,
    refused: i64,
    duplicates: i64,
) {
    LAST_COUNTS.with(|c| {
        c.borrow_mut().insert(
            pipeline_id,
            Counts {
                accepted,
                late,
                refused,
                duplicates,
            },
        );
    });
}

/// An `INSERT` by the caller: it needs `INSERT` on the source table and nothing else, and it runs
/// as the caller, with the caller's rights, row-level security and triggers, exactly as the
/// `INSERT` it stands for; the pipeline's trigger then runs as the pipeline's owner.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn ingest(
    pipeline: Option<&str>,
    rows: Option<RawJsonb>,
) -> TableIterator<
    'static,
    (
        name!(accepted, i64),
        name!(late, i64),
        name!(refused, i64),
        name!(duplicates, i64),
    ),
> {
    const F: &str = "eventtime.ingest";
    let pipeline = required(pipeline, F, "pipeline");
    let rows = required(rows, F, "rows");
    let p = catalog::load(pipeline);
    if !p.source_exists {
        EtError::SourceGone {
            pipeline: pipeline.to_string(),
        }
        .raise()
    }
    let caller = security::caller();
    // Any column's INSERT privilege lets the INSERT below be tried: it names only the columns the
    // rows give, and PostgreSQL checks the caller's privileges on them as for any INSERT.
    let may_insert = Spi::get_one_with_args::<bool>(
        "SELECT has_any_column_privilege($1, $2, 'INSERT')",
        &[caller.into(), p.source_oid.into()],
    )
    .expect("privilege check")
    .unwrap_or(false);
    if !may_insert {
        // The table and its owner are named only to a caller that may read the pipeline.
        let readable = p.readable();
        let hint = if readable {
            format!(
                "eventtime.ingest inserts into the source table of pipeline \"{pipeline}\": its owner, {}, can GRANT INSERT ON {} TO {}.",
                security::role_name(p.owner),
                p.def.source,
                security::role_name(caller)
            )
        } else {
            format!("eventtime.ingest inserts into the source table of pipeline \"{pipeline}\": its owner can GRANT INSERT on it.")
        };
        EtError::PermissionDenied {
            message: if readable {
                format!("permission denied for table {}", p.def.source)
            } else {
                format!("permission denied for pipeline \"{pipeline}\"")
            },
            hint,
        }
        .raise()
    }
    let doc_hint = "Pass an object keyed by source column names, or an array of such objects.";
    // The document as an array of objects, and the source columns it names.
    let (kind, keys, non_objects) = Spi::connect(|client| {
        let r = client
            .select(
                "WITH d AS (SELECT CASE jsonb_typeof($1) WHEN 'object' THEN jsonb_build_array($1) ELSE $1 END AS a) \
                 SELECT jsonb_typeof($1), \
                        CASE WHEN jsonb_typeof($1) IN ('object', 'array') THEN \
                          (SELECT array_agg(DISTINCT k ORDER BY k) FROM d, jsonb_array_elements(d.a) e, \
                             jsonb_object_keys(CASE jsonb_typeof(e) WHEN 'object' THEN e ELSE '{}' END) k) END, \
                        CASE WHEN jsonb_typeof($1) = 'array' THEN \
                          (SELECT count(*) FROM jsonb_array_elements($1) e WHERE jsonb_typeof(e) <> 'object') ELSE 0 END",
                None,
                &[rows.into()],
            )
            .expect("ingest document read")
            .first();
        (
            r.get::<String>(1).unwrap().unwrap_or_default(),
            r.get::<Vec<String>>(2).unwrap().unwrap_or_default(),
            r.get::<i64>(3).unwrap().unwrap_or(0),
        )
    });
    if kind != "object" && kind != "array" {
        invalid(
            format!("rows for pipeline \"{pipeline}\" must be a JSON object or array, not {kind}"),
            Some(doc_hint),
        )
        .raise()
    }
    if non_objects > 0 {
        invalid(
            format!("rows for pipeline \"{pipeline}\" has {non_objects} array element(s) that are not JSON objects"),
            Some(doc_hint),
        )
        .raise()
    }
    let cols = super::pipeline::source_columns(p.source_oid);
    for k in &keys {
        if !cols.iter().any(|c| &c.name == k) {
            EtError::UndefinedColumn {
                table: p.def.source.clone(),
                column: k.clone(),
                hint: Some(format!(
                    "Keys of the rows must be column names of the source table of pipeline \"{pipeline}\": {}.",
                    cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
                )),
            }
            .raise()
        }
    }
    LAST_COUNTS.with(|c| c.borrow_mut().remove(&p.id));
    // Only the named columns are inserted, so the others take their defaults. With no names at
    // all (an empty array, or empty objects), every column is inserted as NULL.
    let (col_list, select_list) = if keys.is_empty() {
        (String::new(), "*".to_string())
    } else {
        let l = keys
            .iter()
            .map(|k| quote_ident(k))
            .collect::<Vec<_>>()
            .join(", ");
        (format!(" ({l})"), l)
    };
    let rows_of = format!(
        "jsonb_populate_recordset(NULL::{src}, CASE jsonb_typeof($1) WHEN 'object' THEN jsonb_build_array($1) ELSE $1 END)",
        src = p.def.source
    );
    // Where the source's unique index is the pipeline's ledger, a redelivery is turned away by
    // the index before the pipeline sees it: the insert skips it (`ON CONFLICT` on that index's
    // columns only) and counts it, per window of its event time, as a duplicate.
    let sql = match id_index_columns(&p) {
        Some(columns) => {
            // Pairs (row, window) for a kind with several windows per row, computed from the
            // event times the rows give (rows when they give none: the column's default).
            let (wi, wn) = if keys.contains(&p.def.event_time) {
                (
                    p.def
                        .window_count(&format!("i.{}", quote_ident(&p.def.event_time))),
                    p.def.window_count("n.et"),
                )
            } else {
                ("1".to_string(), "1".to_string())
            };
            format!(
                "WITH i AS MATERIALIZED (SELECT {select_list} FROM {rows_of}), \
                 n AS (INSERT INTO {src}{col_list} SELECT {select_list} FROM i ON CONFLICT ({columns}) DO NOTHING \
                       RETURNING {ret} AS et) \
                 SELECT GREATEST((SELECT coalesce(sum({wi}), 0) FROM i)::bigint - (SELECT coalesce(sum({wn}), 0) FROM n)::bigint, 0)",
                src = p.def.source,
                ret = quote_ident(&p.def.event_time),
            )
        }
        None => format!(
            "INSERT INTO {src}{col_list} SELECT {select_list} FROM {rows_of}",
            src = p.def.source
        ),
    };
    let turned_away = p.def.id_index;
    let collect =
        |on: &str| format!("SELECT pg_catalog.set_config('{COLLECT_COUNTS}', '{on}', true)");
    let skipped = Spi::connect_mut(|client| {
        client
            .update(collect("on").as_str(), None, &[])
            .expect("collect counts");
        let result = client
            .update(sql.as_str(), None, &[rows.into()])
            .expect("ingest insert");
        let skipped = if turned_away {
            result
                .first()
                .get_one::<i64>()
                .expect("ingest insert")
                .unwrap_or(0)
        } else {
            0
        };
        client
            .update(collect("off").as_str(), None, &[])
            .expect("collect counts");
        skipped
    });
    let Some(mut c) = LAST_COUNTS.with(|c| c.borrow_mut().remove(&p.id)) else {
        // No trigger of the pipeline counted the rows: the pipeline was dropped after this call
        // read it (its trigger went with it). Fail, so that the rows are not inserted uncounted.
        EtError::UnknownPipeline {
            name: pipeline.to_string(),
        }
        .raise()
    };
    if skipped > 0 {
        // Counted where the pipeline's own duplicates are, as the pipeline's owner (the row
        // security of `duplicate_counts` lets only the owner's roles add to a pipeline's).
        security::as_owner(p.owner, || {
            Spi::run_with_args(
                "INSERT INTO _eventtime.duplicate_counts (pipeline_id, duplicates) VALUES ($1, $2)",
                &[p.id.into(), skipped.into()],
            )
            .expect("duplicate count")
        });
        c.duplicates += skipped;
    }
    TableIterator::once((c.accepted, c.late, c.refused, c.duplicates))
}

/// The key columns, quoted, of the source's unique index that is pipeline `p`'s ledger
/// (`PipelineDef::id_index`), found in the catalog as `create_pipeline` found it (so also after a
/// dump and restore, which does not keep the trigger's dependency on it); None for a pipeline
/// with a ledger of its own or none. Raises 55000 when the index is gone.
fn id_index_columns(p: &catalog::Pipeline) -> Option<String> {
    if !p.def.id_index {
        return None;
    }
    let event_id = p
        .def
        .event_id
        .as_ref()
        .expect("an id_index pipeline has an event id");
    let keys: Vec<String> = p.def.keys.iter().map(|k| k.name.clone()).collect();
    let Some(index) = super::pipeline::unique_id_index(p.source_oid, &event_id.name, &keys) else {
        EtError::LedgerIndexGone {
            pipeline: p.def.name.clone(),
            table: p.def.source.clone(),
            column: event_id.name.clone(),
        }
        .raise()
    };
    Spi::get_one_with_args::<String>(
        "SELECT (SELECT string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY u.n) \
         FROM pg_catalog.pg_index i \
         CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY u(att, n) \
         JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.att \
         WHERE i.indexrelid = $1 AND u.n <= i.indnkeyatts)",
        &[index.into()],
    )
    .expect("pg_index read")
}
