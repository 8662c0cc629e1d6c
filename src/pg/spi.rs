//! Reads through SPI that leave the transaction without an id.
//!
//! pgrx's `Spi::get_one*` run their query as an update: they first give the transaction an id
//! (`Spi::mark_mutable`), so a read-only call of ours would make the caller's transaction look
//! like one that wrote (which `eventtime.changes` refuses to read after), and on a hot standby it
//! fails (no ids are assigned in recovery). These run the query with `SpiClient::select`: read-only while the
//! transaction has no id (the statement's snapshot, as any read inside one statement), and as
//! before once it has one.

use pgrx::datum::{DatumWithOid, FromDatum, IntoDatum};
use pgrx::spi::{Spi, SpiResult};

/// The first column of the first row of `query` (NULL, or no row: `None`).
pub fn read_one<A: FromDatum + IntoDatum>(
    query: &str,
    args: &[DatumWithOid<'_>],
) -> SpiResult<Option<A>> {
    Spi::connect(|client| client.select(query, Some(1), args)?.first().get_one())
}

/// The first two columns of the first row of `query`.
pub fn read_two<A: FromDatum + IntoDatum, B: FromDatum + IntoDatum>(
    query: &str,
    args: &[DatumWithOid<'_>],
) -> SpiResult<(Option<A>, Option<B>)> {
    Spi::connect(|client| client.select(query, Some(1), args)?.first().get_two())
}
