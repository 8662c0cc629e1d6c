//! A `jsonb` argument passed through untouched. pgrx's `JsonB` parses into `serde_json::Value`,
//! which turns numbers into `f64`: `eventtime.ingest` must hand the document to PostgreSQL's own
//! `jsonb_populate_recordset` exactly as received, so it keeps the datum as it came.

use pgrx::pg_sys;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::{FromDatum, IntoDatum};

#[derive(Clone, Copy)]
pub struct RawJsonb(pg_sys::Datum);

impl FromDatum for RawJsonb {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        if is_null {
            None
        } else {
            Some(RawJsonb(datum))
        }
    }
}

impl IntoDatum for RawJsonb {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

// SAFETY: the SQL type named here is the type of the datum the wrapper carries.
unsafe impl SqlTranslatable for RawJsonb {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(RawJsonb);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("jsonb"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
        Ok(ReturnsRef::One(SqlMappingRef::literal("jsonb")));
}

// SAFETY: the datum is taken as it is; the SQL signature declares it jsonb, and PostgreSQL only
// calls the function with a jsonb there.
unsafe impl<'fcx> pgrx::callconv::ArgAbi<'fcx> for RawJsonb {
    unsafe fn unbox_arg_unchecked(arg: pgrx::callconv::Arg<'_, 'fcx>) -> Self {
        // SAFETY: the caller guarantees a non-null jsonb argument.
        unsafe {
            arg.unbox_arg_using_from_datum()
                .expect("a non-null jsonb argument")
        }
    }
}
