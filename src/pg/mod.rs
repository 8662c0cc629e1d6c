//! PostgreSQL glue: errors, the catalog, and small SPI helpers.

pub mod aggparse;
pub mod announce;
pub mod catalog;
pub mod error;
pub mod jsonb;
pub mod locks;
pub mod members;
pub mod overflow;
pub mod plans;
pub mod sealed;
pub mod security;
pub mod spi;
pub mod zone;
