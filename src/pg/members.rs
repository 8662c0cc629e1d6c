//! The tables of a source (SPEC §14). A row inserted into a partition (or an inheritance child)
//! by name does not fire the statement triggers of the table above it: PostgreSQL fires the
//! statement triggers of the table a statement names, and gives them, in their transition table,
//! every row the statement inserted into it and the tables below it. So a pipeline's trigger is
//! on every table of its source's tree: the source, and every partition and inheritance child
//! below it at any depth (foreign tables excepted: their rows are not in this database). A
//! statement fires exactly one of them, the one on the table it names, whose transition table
//! holds every row it inserted.
//!
//! The tree changes with DDL: `CREATE TABLE ... PARTITION OF`, `ATTACH PARTITION` (pg_partman's
//! maintenance does either), `CREATE TABLE ... INHERITS`, `ALTER TABLE ... INHERIT`, and their
//! undoing, `DETACH PARTITION` and `NO INHERIT`. The event trigger `eventtime_table_change`
//! calls [`sync`] after each, which makes the triggers match the tree: a table that joined gets
//! the trigger, one that left loses it (what it counted stays counted). A source that is itself
//! a partition is refused: rows inserted through its parent fire the parent's trigger only, whose
//! transition table does not say which partition each row went to.

use pgrx::prelude::*;

use crate::core::ident::quote_ident;
use crate::pg::catalog;
use crate::pg::error::EtError;
use crate::pg::security::as_catalog_owner;

/// The name of the trigger of pipeline `id`, unquoted, the same on every table of its source.
pub fn trigger_name(id: i32) -> String {
    format!("eventtime_ingest_p{id}")
}

/// The tables below `source` at any depth (partitions, inheritance children), with their
/// qualified names, except foreign tables; the source itself is not among them.
pub fn tables_below(source: pg_sys::Oid) -> Vec<(pg_sys::Oid, String)> {
    as_catalog_owner(|| {
        Spi::connect(|client| {
            client
                .select(
                    "WITH RECURSIVE t(oid) AS (SELECT $1::oid \
                       UNION SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN t ON i.inhparent OPERATOR(pg_catalog.=) t.oid) \
                     SELECT c.oid, pg_catalog.format('%I.%I', n.nspname, c.relname) \
                     FROM t JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.oid \
                     JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
                     WHERE c.oid OPERATOR(pg_catalog.<>) $1::oid AND c.relkind IN ('r', 'p') ORDER BY c.oid",
                    None,
                    &[source.into()],
                )
                .expect("inheritance read")
                .map(|r| {
                    (
                        r.get::<pg_sys::Oid>(1).expect("oid").expect("oid"),
                        r.get::<String>(2).expect("name").expect("name"),
                    )
                })
                .collect()
        })
    })
}

/// The tables other than the source that carry the trigger of pipeline `id`.
fn tables_with_trigger(id: i32, source: pg_sys::Oid) -> Vec<(pg_sys::Oid, String)> {
    as_catalog_owner(|| {
        Spi::connect(|client| {
            client
                .select(
                    "SELECT c.oid, pg_catalog.format('%I.%I', n.nspname, c.relname) \
                     FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.tgrelid \
                     JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
                     WHERE t.tgname OPERATOR(pg_catalog.=) $1 AND t.tgrelid OPERATOR(pg_catalog.<>) $2::oid ORDER BY c.oid",
                    None,
                    &[trigger_name(id).into(), source.into()],
                )
                .expect("trigger read")
                .map(|r| {
                    (
                        r.get::<pg_sys::Oid>(1).expect("oid").expect("oid"),
                        r.get::<String>(2).expect("name").expect("name"),
                    )
                })
                .collect()
        })
    })
}

/// Whether `table` is a partition.
pub fn is_partition(table: pg_sys::Oid) -> bool {
    crate::pg::spi::read_one::<bool>(
        "SELECT relispartition FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) $1",
        &[table.into()],
    )
    .expect("pg_class read")
    .unwrap_or(false)
}

/// Raises 0A000 when `source` (named `table`), the source of pipeline `pipeline` or about to
/// be, is a partition.
pub fn refuse_partition(table: &str, source: pg_sys::Oid, pipeline: &str) {
    if is_partition(source) {
        EtError::NotSupported {
            message: format!(
                "table {table} of pipeline \"{pipeline}\" is a partition, which a pipeline cannot read"
            ),
            hint: "Rows inserted through the partitioned table fire its triggers only: create the pipeline on the partitioned table at the top, whose pipeline counts the rows of every partition, whichever table they were written to.".into(),
        }
        .raise()
    }
}

/// Makes the tables below the source of pipeline `p` carry its trigger, exactly: a table that
/// joined the tree gets it, a table that left loses it. Runs as the catalog's owner: the
/// tables below may belong to other roles (who could only put them there with the privileges of
/// the source's owner), and the statements carry names only.
pub fn sync(p: &catalog::Pipeline) {
    if !p.source_exists {
        return;
    }
    let want = tables_below(p.source_oid);
    let have = tables_with_trigger(p.id, p.source_oid);
    let name = quote_ident(&trigger_name(p.id));
    let mut stmts = Vec::new();
    for (oid, table) in &want {
        if !have.iter().any(|(h, _)| h == oid) {
            // A unique index of the source covers its partitions, never a table that inherits
            // from it: the pipeline would count a redelivery written there twice.
            if p.def.id_index && !is_partition(*oid) {
                EtError::NotSupported {
                    message: format!(
                        "table {table} cannot inherit from {}, the source of pipeline \"{}\", which dedups by a unique index of its source",
                        p.def.source, p.def.name
                    ),
                    hint: "A unique index of a table does not cover the rows of the tables that inherit from it. Write the rows into the source, or into its partitions if it is partitioned.".into(),
                }
                .raise()
            }
            stmts.push(format!(
                "CREATE TRIGGER {name} AFTER INSERT ON {table} REFERENCING NEW TABLE AS new_rows \
                 FOR EACH STATEMENT EXECUTE FUNCTION {}()",
                p.def.trigger_function()
            ));
            stmts.push(format!(
                "COMMENT ON TRIGGER {name} ON {table} IS {}",
                crate::core::ident::quote_literal(&format!(
                    "pg_eventtime: routes rows inserted into this table into pipeline {} (its source {} is above it)",
                    p.def.name, p.def.source
                ))
            ));
        }
    }
    for (oid, table) in &have {
        if !want.iter().any(|(w, _)| w == oid) {
            stmts.push(format!("DROP TRIGGER IF EXISTS {name} ON {table}"));
        }
    }
    if stmts.is_empty() {
        return;
    }
    as_catalog_owner(|| {
        Spi::connect_mut(|client| {
            for s in &stmts {
                client.update(s.as_str(), None, &[]).expect("trigger DDL");
            }
        })
    });
}

/// After `ALTER TABLE ... OWNER TO` on the source of pipeline `p`: hands every object of the
/// pipeline (its internal tables, trigger functions and views) to the table's new owner, and
/// records it, so that nothing of the pipeline runs as the role that no longer owns the table
/// (SPEC §9). Nothing when the recorded owner is the table's owner. Runs as the catalog's owner,
/// within the `ALTER TABLE`'s transaction: the owner changes with the table or not at all.
pub fn follow_owner(p: &catalog::Pipeline) {
    if !p.source_exists {
        return;
    }
    let recorded = as_catalog_owner(|| {
        crate::pg::spi::read_one::<pg_sys::Oid>(
            "SELECT owner::oid FROM _eventtime.pipeline WHERE id = $1",
            &[p.id.into()],
        )
        .expect("catalog read")
    });
    if recorded == Some(p.owner) {
        return;
    }
    let owner = crate::pg::security::role_name(p.owner);
    let mut stmts = p.def.hand_over(&owner);
    for suffix in crate::core::sqlgen::VIEW_SUFFIXES {
        stmts.push(format!(
            "ALTER VIEW IF EXISTS {} OWNER TO {owner}",
            p.def.view(suffix)
        ));
    }
    // The typed feed, unless it is gone or the pipeline was made before there was one.
    let feed = format!("{}(text)", p.def.view(crate::core::sqlgen::FEED_SUFFIX));
    let feed_exists = as_catalog_owner(|| {
        crate::pg::spi::read_one::<bool>(
            "SELECT pg_catalog.to_regprocedure($1) IS NOT NULL",
            &[feed.as_str().into()],
        )
        .expect("function lookup")
        .unwrap_or(false)
    });
    if feed_exists {
        stmts.push(format!("ALTER FUNCTION {feed} OWNER TO {owner}"));
    }
    stmts.push(format!(
        "UPDATE _eventtime.pipeline SET owner = {}::oid::regrole WHERE id = {}",
        p.owner.to_u32(),
        p.id
    ));
    as_catalog_owner(|| {
        Spi::connect_mut(|client| {
            for s in &stmts {
                client.update(s.as_str(), None, &[]).expect("owner change");
            }
        })
    });
}

/// Drops the trigger of pipeline `id` from every table but its source (whose trigger goes with
/// the pipeline's other objects).
pub fn drop_below(id: i32, source: pg_sys::Oid) {
    let name = quote_ident(&trigger_name(id));
    let stmts: Vec<String> = tables_with_trigger(id, source)
        .into_iter()
        .map(|(_, table)| format!("DROP TRIGGER IF EXISTS {name} ON {table}"))
        .collect();
    as_catalog_owner(|| {
        Spi::connect_mut(|client| {
            for s in &stmts {
                client.update(s.as_str(), None, &[]).expect("trigger DDL");
            }
        })
    });
}

/// The names of the pipelines that `sql` selects (by name, in order) given `tables` as `$1`.
pub fn pipeline_names(sql: &str, tables: Vec<pg_sys::Oid>) -> Vec<String> {
    as_catalog_owner(|| {
        Spi::connect(|client| {
            client
                .select(sql, None, &[tables.into()])
                .expect("catalog read")
                .map(|r| r.get::<String>(1).expect("name").expect("name"))
                .collect()
        })
    })
}

#[pg_schema]
mod _eventtime {
    use super::*;

    /// Called by the event trigger `eventtime_table_change` after every `CREATE TABLE` and
    /// `ALTER TABLE`, with the tables they made or changed: brings the triggers of every pipeline
    /// whose source is above one of them, or whose trigger is on one of them or below, in line
    /// with its source's tree. A source that has become a partition is refused.
    #[pg_extern(volatile, parallel_unsafe)]
    #[search_path(pg_catalog, pg_temp)]
    fn sync_members(tables: Option<Vec<Option<pg_sys::Oid>>>) {
        let tables: Vec<pg_sys::Oid> = tables.unwrap_or_default().into_iter().flatten().collect();
        if tables.is_empty() {
            return;
        }
        let names = pipeline_names(
            "WITH RECURSIVE up(oid) AS (SELECT unnest($1::oid[]) \
                           UNION SELECT i.inhparent FROM pg_inherits i JOIN up ON i.inhrelid = up.oid), \
                         down(oid) AS (SELECT unnest($1::oid[]) \
                           UNION SELECT i.inhrelid FROM pg_inherits i JOIN down ON i.inhparent = down.oid) \
                         SELECT p.name FROM _eventtime.pipeline p \
                         WHERE p.source::oid IN (SELECT oid FROM up) \
                            OR EXISTS (SELECT FROM pg_trigger t WHERE t.tgname = 'eventtime_ingest_p' || p.id \
                                       AND t.tgrelid IN (SELECT oid FROM down)) \
                         ORDER BY p.name",
            tables,
        );
        for name in names {
            let p = catalog::load(&name);
            if p.source_exists {
                refuse_partition(&p.def.source, p.source_oid, &name);
            }
            follow_owner(&p);
            sync(&p);
        }
    }
}
