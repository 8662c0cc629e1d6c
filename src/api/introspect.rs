//! Support for the `eventtime.pipelines` view, and the guard that keeps history append-only.

use pgrx::prelude::*;

use crate::core::ident::quote_ident;
use crate::core::sqlgen::internal_table;
use crate::pg::catalog;
use crate::pg::error::EtError;

#[pg_schema]
mod _eventtime {
    use super::*;

    /// Counts over the tables of one pipeline, for `eventtime.pipelines`.
    /// Returns no row for a pipeline the caller may not read; counts as the pipeline's owner.
    #[pg_extern(stable, parallel_safe)]
    #[search_path(pg_catalog, pg_temp)]
    fn pipeline_counts(
        pipeline_id: i32,
    ) -> TableIterator<
        'static,
        (
            name!(open_windows, i64),
            name!(state_rows, i64),
            name!(firings, i64),
            name!(refused, i64),
        ),
    > {
        let p = catalog::load_by_id(pipeline_id);
        if !p.readable() {
            return TableIterator::new(Vec::new());
        }
        let t = |what: &str| internal_table(pipeline_id, what);
        // An open window has a state row per ingest statement: windows are counted once per key.
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
                    (SELECT count(*) FROM {windows} s), (SELECT count(*) FROM {history}), (SELECT count(*) FROM {refused}) \
             FROM _eventtime.pipeline p WHERE p.id = {pipeline_id}",
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
        TableIterator::new(vec![(row[0], row[1], row[2], row[3])])
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
