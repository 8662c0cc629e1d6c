//! Support for the `eventtime.pipelines` view, and the guard that keeps history append-only.

use pgrx::prelude::*;

use crate::core::ident::quote_ident;
use crate::core::sqlgen::internal_table;
use crate::pg::catalog;
use crate::pg::error::EtError;

#[pg_schema]
mod _eventtime {
    use super::*;

    /// The source's unique index that is the ledger of pipeline `pipeline_id`
    /// (`PipelineDef::id_index`), found in the catalog as `create_pipeline` found it, for
    /// `eventtime.pipelines`; NULL for a pipeline with a ledger of its own or none, or when the
    /// index is gone.
    #[pg_extern(stable, parallel_safe)]
    #[search_path(pg_catalog, pg_temp)]
    fn id_index_of(pipeline_id: i32) -> Option<pg_sys::Oid> {
        let p = catalog::load_by_id(pipeline_id);
        let event_id = p.def.event_id.as_ref().filter(|_| p.def.id_index)?;
        if !p.source_exists {
            return None;
        }
        let keys: Vec<String> = p.def.keys.iter().map(|k| k.name.clone()).collect();
        crate::api::pipeline::unique_id_index(p.source_oid, &event_id.name, &keys)
    }

    /// The watermark of pipeline `pipeline_id` (NULL before the first advance), for its views
    /// `_provisional` and `_current`, which call it once per query. A view reads the catalog as
    /// its owner, but the catalog's row-level security judges `current_user`, the view's
    /// caller: so this reads the catalog as its owner, for a caller that may read the pipeline
    /// (it has the owner's privileges or `SELECT` on one of its views), and refuses others.
    #[pg_extern(stable, parallel_safe)]
    #[search_path(pg_catalog, pg_temp)]
    fn provisional_watermark(pipeline_id: i32) -> Option<TimestampWithTimeZone> {
        // One read of the catalog, as its owner: the watermark, and whether the caller may read
        // the pipeline (NULL: no such pipeline).
        let caller = crate::pg::security::caller();
        let (watermark, readable) = crate::pg::security::as_catalog_owner(|| {
            crate::pg::spi::read_two::<TimestampWithTimeZone, bool>(
                "SELECT p.watermark, _eventtime.may_read($2, _eventtime.owner_of(p.source, p.owner), p.view_schema, p.name) \
                 FROM _eventtime.pipeline p WHERE p.id = $1",
                &[pipeline_id.into(), caller.into()],
            )
            .expect("catalog read")
        });
        if readable != Some(true) {
            EtError::PermissionDenied {
                // Nothing about the pipeline, not even its name, for a role that may not read it.
                message: format!("permission denied for the watermark of pipeline #{pipeline_id}"),
                hint: "Read the pipeline's views <name>_provisional or <name>_current, with SELECT granted by its owner.".into(),
            }
            .raise()
        }
        watermark
    }

    /// Counts over the tables of one pipeline, for `eventtime.pipelines`.
    /// Returns no row for a pipeline the caller may not read; counts as the pipeline's owner.
    // pgrx reads the column names from the `name!` types of the signature.
    #[allow(clippy::type_complexity)]
    #[pg_extern(stable, parallel_safe)]
    #[search_path(pg_catalog, pg_temp)]
    fn pipeline_counts(
        pipeline_id: i32,
    ) -> TableIterator<
        'static,
        (
            name!(open_windows, Option<i64>),
            name!(state_rows, Option<i64>),
            name!(firings, Option<i64>),
            name!(refused, Option<i64>),
            name!(idle_writers, Option<Vec<String>>),
        ),
    > {
        let p = catalog::load_by_id(pipeline_id);
        if !p.readable() {
            return TableIterator::new(Vec::new());
        }
        let t = |what: &str| internal_table(pipeline_id, what);
        // A pipeline whose tables are gone (its owner dropped one, or DROP OWNED dropped them
        // all) shows without counts, rather than making the view fail for everyone who reads it.
        let state = crate::pg::spi::read_one::<pg_sys::Oid>(
            "SELECT to_regclass($1)::oid",
            &[t("state").into()],
        )
        .expect("relation lookup");
        let complete = state.is_some()
            && ["history", "refused"].iter().all(|w| {
                crate::pg::spi::read_one::<bool>(
                    "SELECT to_regclass($1) IS NOT NULL",
                    &[t(w).into()],
                )
                .expect("relation lookup")
                .unwrap_or(false)
            });
        let Some(state) = state.filter(|_| complete) else {
            return TableIterator::new(vec![(None, None, None, None, None)]);
        };
        // An open window has a state row per writing backend (per ingest statement in pipelines
        // created before slots): windows are counted once per key; `state_rows` counts rows.
        let windows = format!(
            "(SELECT DISTINCT {}s.window_start, s.window_end FROM {} s)",
            p.def
                .keys
                .iter()
                .map(|k| format!("s.{}, ", quote_ident(&k.name)))
                .collect::<String>(),
            t("state")
        );
        let sql = format!(
            "SELECT (SELECT count(*) FROM {windows} s WHERE p.watermark IS NULL OR s.window_end > p.watermark), \
                    (SELECT count(*) FROM {state}), (SELECT count(*) FROM {history}), (SELECT count(*) FROM {refused}) \
             FROM _eventtime.pipeline p WHERE p.id = {pipeline_id}",
            state = t("state"),
            history = t("history"),
            refused = t("refused"),
        );
        // The owner reads its own catalog row (row-level security lets it).
        let row = p.as_owner(|| {
            Spi::connect(|client| {
                let r = client
                    .select(sql.as_str(), None, &[])
                    .expect("pipeline counts")
                    .first();
                (1..=4)
                    .map(|i| r.get::<i64>(i).expect("count").unwrap_or(0))
                    .collect::<Vec<_>>()
            })
        });
        let idle = crate::pg::locks::idle_holders(state);
        TableIterator::new(vec![(
            Some(row[0]),
            Some(row[1]),
            Some(row[2]),
            Some(row[3]),
            Some(idle),
        )])
    }

    /// Refuses an `INSERT` into a pipeline's history, refused rows, folds or ledger (and an
    /// `UPDATE` of its offsets) unless it
    /// comes from the extension: every statement the extension runs on a pipeline's tables runs
    /// inside a security-restricted operation (`pg::security::as_owner`, and the trigger
    /// function's `_eventtime.restrict()`), which a plain statement of the owner is not. Its
    /// arguments are the pipeline's name and what the table holds.
    #[pg_trigger]
    fn guard_insert<'a>(
        trigger: &'a pgrx::PgTrigger<'a>,
    ) -> Result<
        Option<pgrx::prelude::PgHeapTuple<'a, pgrx::AllocatedByPostgres>>,
        pgrx::prelude::PgHeapTupleError,
    > {
        // SAFETY: reads the backend's security context.
        if unsafe { pg_sys::InSecurityRestrictedOperation() } {
            return Ok(None);
        }
        let args = trigger.extra_args().unwrap_or_default();
        EtError::ReadOnly {
            pipeline: args.first().cloned().unwrap_or_default(),
            what: args
                .get(1)
                .cloned()
                .unwrap_or_else(|| "history".to_string()),
            operation: match trigger.op() {
                Ok(pgrx::PgTriggerOperation::Update) => "UPDATE",
                _ => "INSERT",
            }
            .to_string(),
        }
        .raise()
    }

    /// Refuses writes to a pipeline's history and refused rows (their tables and views). Its
    /// arguments are the pipeline's name and what the object holds.
    #[pg_trigger]
    fn refuse_change<'a>(
        trigger: &'a pgrx::PgTrigger<'a>,
    ) -> Result<
        Option<pgrx::prelude::PgHeapTuple<'a, pgrx::AllocatedByPostgres>>,
        pgrx::prelude::PgHeapTupleError,
    > {
        let args = trigger.extra_args().unwrap_or_default();
        let pipeline = args.first().cloned().unwrap_or_default();
        let what = args
            .get(1)
            .cloned()
            .unwrap_or_else(|| "history".to_string());
        let operation = match trigger.op() {
            Ok(pgrx::PgTriggerOperation::Insert) => "INSERT",
            Ok(pgrx::PgTriggerOperation::Update) => "UPDATE",
            Ok(pgrx::PgTriggerOperation::Delete) => "DELETE",
            Ok(pgrx::PgTriggerOperation::Truncate) => "TRUNCATE",
            _ => "this change",
        };
        EtError::ReadOnly {
            pipeline,
            what,
            operation: operation.to_string(),
        }
        .raise()
    }
}
