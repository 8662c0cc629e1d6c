//! The pipeline catalog (`_eventtime.pipeline`) and the definitions read from it.
//!
//! Each catalog row keeps what the user passed (for `eventtime.pipelines`) and the definition
//! resolved at creation (`definition jsonb`: key and event-id types, aggregate result types,
//! window and lateness in microseconds), from which the SQL of the pipeline is generated.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::core::model::PipelineDef;
use crate::pg::error::EtError;
use crate::pg::security::{self, as_catalog_owner};

/// A pipeline as read from the catalog.
pub struct Pipeline {
    pub id: i32,
    pub def: PipelineDef,
    /// False when the source table was dropped after the pipeline was created.
    pub source_exists: bool,
    pub source_oid: pg_sys::Oid,
    /// The role that owns the pipeline's objects, as whom its statements run: the source table's
    /// current owner (`_eventtime.owner_of`), or the recorded one once the table is gone.
    pub owner: pg_sys::Oid,
}

/// Reads a pipeline by id; the pipeline exists (the caller holds its id from a trigger or the
/// catalog).
pub fn load_by_id(id: i32) -> Pipeline {
    let name = as_catalog_owner(|| {
        crate::pg::spi::read_one::<String>(
            "SELECT name FROM _eventtime.pipeline WHERE id = $1",
            &[id.into()],
        )
        .expect("catalog read")
    })
    .unwrap_or_else(|| {
        EtError::UnknownPipeline {
            name: format!("#{id}"),
        }
        .raise()
    });
    load(&name)
}

/// Reads a pipeline by name, or raises 42704. The caller's rights are checked by the caller of
/// this function, for what it does with the pipeline.
pub fn load(name: &str) -> Pipeline {
    let row = as_catalog_owner(|| {
        Spi::connect(|client| {
            let t = client
            .select(
                "SELECT p.id, p.definition::text, p.source::oid, p.view_schema::text, p.event_time::text, \
                        (SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                          WHERE c.oid = p.source), \
                        _eventtime.owner_of(p.source, p.owner) \
                 FROM _eventtime.pipeline p WHERE p.name = $1",
                None,
                &[name.into()],
            )
            .expect("catalog read");
            if t.is_empty() {
                return None;
            }
            let r = t.first();
            Some((
                r.get::<i32>(1).expect("id").expect("id"),
                r.get::<String>(2).expect("definition").expect("definition"),
                r.get::<pg_sys::Oid>(3).expect("source").expect("source"),
                r.get::<String>(4)
                    .expect("view_schema")
                    .expect("view_schema"),
                r.get::<String>(5).expect("event_time").expect("event_time"),
                r.get::<String>(6).expect("source name"),
                r.get::<pg_sys::Oid>(7).expect("owner").expect("owner"),
            ))
        })
    });
    let Some((id, definition, source_oid, view_schema, event_time, source, owner)) = row else {
        EtError::UnknownPipeline {
            name: name.to_string(),
        }
        .raise()
    };
    let mut def: PipelineDef = serde_json::from_str(&definition)
        .expect("catalog definition is written by create_pipeline");
    let source_exists = source.is_some();
    def.id = id;
    def.name = name.to_string();
    def.source = source.unwrap_or_default();
    def.view_schema = view_schema;
    def.event_time = event_time;
    Pipeline {
        id,
        def,
        source_exists,
        source_oid,
        owner,
    }
}

impl Pipeline {
    /// Raises 42501 unless the caller has the privileges of the pipeline's owner.
    pub fn require_owner(&self, action: &'static str) {
        security::require_pipeline_owner(&self.def.name, self.owner, action, || self.readable())
    }

    /// Whether the caller may read the pipeline: it has the owner's privileges or may read one of
    /// its views.
    pub fn readable(&self) -> bool {
        security::may_read(
            security::caller(),
            self.owner,
            &self.def.view_schema,
            &self.def.name,
        )
    }

    /// Runs `f` as the pipeline's owner, in a security-restricted operation.
    pub fn as_owner<R>(&self, f: impl FnOnce() -> R) -> R {
        security::as_owner(self.owner, f)
    }
}

/// The name and event-time column of a pipeline by id, for the row errors raised where only the
/// id is at hand.
/// Only a role with the privileges of the pipeline's owner learns them; others get `#<id>`.
pub fn name_and_event_time(id: i32) -> (String, String) {
    let caller = security::caller();
    let (name, column) = as_catalog_owner(|| {
        crate::pg::spi::read_two::<String, String>(
            "SELECT name, event_time::text FROM _eventtime.pipeline p WHERE id = $1 AND pg_has_role($2, _eventtime.owner_of(p.source, p.owner), 'USAGE')",
            &[id.into(), caller.into()],
        )
        .unwrap_or((None, None))
    });
    (
        name.unwrap_or_else(|| format!("#{id}")),
        column.unwrap_or_default(),
    )
}

/// The pipeline watermark of pipeline `id` as the statement sees it (NULL before the first
/// advance), read as the catalog's owner.
pub fn watermark(id: i32) -> Option<i64> {
    security::as_catalog_owner(|| {
        crate::pg::spi::read_one::<TimestampWithTimeZone>(
            "SELECT watermark FROM _eventtime.pipeline WHERE id = $1",
            &[id.into()],
        )
        .expect("catalog read")
        .map(|w| w.into_inner())
    })
}
