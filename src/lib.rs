//! pg_eventtime: event-time windows with allowed lateness, sealed versions and refused rows,
//! inside PostgreSQL.
//!
//! Layers: `core` is pure Rust (window assignment, the landing rule, the aggregate list, the SQL
//! each pipeline runs); `pg` is the PostgreSQL glue (errors, catalog); `api` is the SQL surface,
//! one module per concept. The design note is `src/README.md`.

use pgrx::prelude::*;

pub mod api;
pub mod core;
pub mod engine;
pub mod pg;

::pgrx::pg_module_magic!(name, version);

extension_sql_file!("sql/bootstrap.sql", name = "bootstrap", bootstrap);
extension_sql_file!("sql/finalize.sql", name = "finalize", finalize);

mod tests;

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
