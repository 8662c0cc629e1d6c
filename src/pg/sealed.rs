//! Window states of aggregates whose transition state is `internal` (see `core::sealed` and
//! `core::aggregates::SerialFns`). A pipeline's helper aggregates run the aggregate's own
//! transition, combine and final functions through PostgreSQL's aggregation; the two functions
//! here are what they add:
//!
//! - `_eventtime.sealed_out(internal) RETURNS bytea`, the final function of the helpers that
//!   give a state to keep: the aggregate's serialization function, sealed;
//! - `_eventtime.sealed_in(internal, bytea) RETURNS internal`, the transition function of the
//!   helpers that read kept states: each one opened (refused if another server major wrote
//!   it or no pipeline of this database did), deserialized, and combined into the state.
//!
//! Which serialization, deserialization and combine functions to call is read from the calling
//! helper aggregate's own `pg_aggregate` row, which names the target aggregate's. Only a
//! superuser creates an aggregate of transition type `internal`, so only the helpers
//! `create_pipeline` made call these two.

use std::cell::RefCell;

use pgrx::prelude::*;
use pgrx::PgMemoryContexts;

use crate::core::sealed::{self, Unsealed};
use crate::pg::error::EtError;
use crate::pg::security::as_catalog_owner;

/// The server major version running, which alone reads the states it seals.
fn running_major() -> u16 {
    (pg_sys::PG_VERSION_NUM / 10000) as u16
}

thread_local! {
    /// The database's key, read once per transaction: (database, transaction start, key).
    static KEY: RefCell<Option<(pg_sys::Oid, i64, Vec<u8>)>> = const { RefCell::new(None) };
}

/// The database's secret the seals are made with (`_eventtime.state_key`, readable by the
/// catalog's owner only; the oldest row when a restore added the dumped one to a new install's).
fn key() -> Vec<u8> {
    // SAFETY: backend globals.
    let (db, start) = unsafe {
        (
            pg_sys::MyDatabaseId,
            pg_sys::GetCurrentTransactionStartTimestamp(),
        )
    };
    if let Some(k) = KEY.with(|k| {
        k.borrow()
            .as_ref()
            .filter(|(d, s, _)| *d == db && *s == start)
            .map(|(_, _, k)| k.clone())
    }) {
        return k;
    }
    let key = as_catalog_owner(|| {
        Spi::get_one::<Vec<u8>>("SELECT key FROM _eventtime.state_key ORDER BY made, key LIMIT 1")
    })
    .expect("state key read")
    .expect("the extension's install made a state key");
    KEY.with(|k| *k.borrow_mut() = Some((db, start, key.clone())));
    key
}

/// What a helper aggregate calls, kept in its call's `fn_extra` for the query's life.
struct Fns {
    serial: pg_sys::FmgrInfo,
    deserial: pg_sys::FmgrInfo,
    combine: pg_sys::FmgrInfo,
    /// The serialization function's qualified name, which the seal is bound to.
    serial_name: String,
    /// The pipeline's aggregate, as the helper's comment names it.
    what: String,
}

/// The functions of the helper aggregate calling `fcinfo`, and the aggregate's context.
///
/// # Safety
/// `fcinfo` is the call of a transition or final function of an aggregate.
unsafe fn functions(fcinfo: pg_sys::FunctionCallInfo, name: &str) -> &'static Fns {
    // SAFETY: as the caller promises.
    unsafe {
        if pg_sys::AggCheckCallContext(fcinfo, std::ptr::null_mut()) == 0 {
            EtError::WrongContext {
                message: format!("_eventtime.{name} can only be called by an aggregate"),
            }
            .raise()
        }
        let flinfo = (*fcinfo).flinfo;
        if !(*flinfo).fn_extra.is_null() {
            return &*((*flinfo).fn_extra as *const Fns);
        }
        let aggref = pg_sys::AggGetAggref(fcinfo);
        if aggref.is_null() {
            EtError::WrongContext {
                message: format!("_eventtime.{name} can only be called by an aggregate"),
            }
            .raise()
        }
        let helper = (*aggref).aggfnoid;
        let row = Spi::connect(|client| {
            let r = client
                .select(
                    "SELECT a.aggserialfn::pg_catalog.oid, a.aggdeserialfn::pg_catalog.oid, \
                     a.aggcombinefn::pg_catalog.oid, \
                     (SELECT pg_catalog.format('%I.%I', n.nspname, p.proname) FROM pg_catalog.pg_proc p \
                      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace \
                      WHERE p.oid OPERATOR(pg_catalog.=) a.aggserialfn), \
                     COALESCE(pg_catalog.obj_description(a.aggfnoid, 'pg_proc'), \
                                         a.aggfnoid::pg_catalog.regprocedure::pg_catalog.text) \
                     FROM pg_catalog.pg_aggregate a WHERE a.aggfnoid OPERATOR(pg_catalog.=) $1",
                    None,
                    &[helper.into()],
                )
                .expect("pg_aggregate read")
                .first();
            let oid = |i: usize| {
                r.get::<pg_sys::Oid>(i)
                    .expect("oid column")
                    .unwrap_or(pg_sys::InvalidOid)
            };
            let text = |i: usize| r.get::<String>(i).expect("text column").unwrap_or_default();
            ([oid(1), oid(2), oid(3)], text(4), text(5))
        });
        let ([serial, deserial, combine], serial_name, what) = row;
        if [serial, deserial, combine].contains(&pg_sys::InvalidOid) {
            EtError::WrongContext {
                message: format!(
                    "_eventtime.{name} can only be called by an aggregate with combine and serialization functions"
                ),
            }
            .raise()
        }
        let mcxt = (*flinfo).fn_mcxt;
        let fns = PgMemoryContexts::For(mcxt).leak_and_drop_on_delete(Fns {
            serial: std::mem::zeroed(),
            deserial: std::mem::zeroed(),
            combine: std::mem::zeroed(),
            serial_name,
            what,
        });
        pg_sys::fmgr_info_cxt(serial, &mut (*fns).serial, mcxt);
        pg_sys::fmgr_info_cxt(deserial, &mut (*fns).deserial, mcxt);
        pg_sys::fmgr_info_cxt(combine, &mut (*fns).combine, mcxt);
        (*flinfo).fn_extra = fns.cast();
        &*fns
    }
}

/// `f` applied to `args` (value, is NULL) in the aggregate context of `outer`, as the
/// aggregate's own functions expect to be called.
///
/// # Safety
/// The arguments are of `f`'s types; `outer` is an aggregate's call.
unsafe fn call_in_aggregate(
    f: &pg_sys::FmgrInfo,
    outer: pg_sys::FunctionCallInfo,
    args: &[(pg_sys::Datum, bool)],
) -> (pg_sys::Datum, bool) {
    // SAFETY: a call frame of `args.len()` arguments, as SizeForFunctionCallInfo counts it.
    unsafe {
        let size = std::mem::size_of::<pg_sys::FunctionCallInfoBaseData>()
            + args.len() * std::mem::size_of::<pg_sys::NullableDatum>();
        let fcinfo = pg_sys::palloc0(size) as pg_sys::FunctionCallInfo;
        (*fcinfo).flinfo = f as *const _ as *mut pg_sys::FmgrInfo;
        (*fcinfo).context = (*outer).context;
        (*fcinfo).fncollation = (*outer).fncollation;
        (*fcinfo).nargs = args.len() as i16;
        for (slot, (value, isnull)) in (*fcinfo).args.as_mut_slice(args.len()).iter_mut().zip(args)
        {
            slot.value = *value;
            slot.isnull = *isnull;
        }
        let addr = f.fn_addr.expect("fmgr_info_cxt sets the address");
        let value = addr(fcinfo);
        let isnull = (*fcinfo).isnull;
        pg_sys::pfree(fcinfo.cast());
        (value, isnull)
    }
}

/// The bytes of a `bytea` datum, detoasted (into the current memory context, for the call).
///
/// # Safety
/// `d` is a non-NULL `bytea` datum.
unsafe fn bytes_of<'a>(d: pg_sys::Datum) -> &'a [u8] {
    // SAFETY: as the caller promises.
    unsafe {
        let v = pg_sys::pg_detoast_datum_packed(d.cast_mut_ptr());
        std::slice::from_raw_parts(
            pgrx::varlena::vardata_any(v) as *const u8,
            pgrx::varlena::varsize_any_exhdr(v),
        )
    }
}

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_eventtime_sealed_out() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_eventtime_sealed_in() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `_eventtime.sealed_out(internal) RETURNS bytea`: the state, serialized by the aggregate's
/// serialization function and sealed (NULL for no state).
///
/// # Safety
/// Called by PostgreSQL's function manager as an aggregate's final function.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn eventtime_sealed_out(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: the function manager's call data of the SQL signature (internal).
    unsafe {
        let fns = functions(fcinfo, "sealed_out");
        let state = (*fcinfo).args.as_slice(1)[0];
        if state.isnull {
            (*fcinfo).isnull = true;
            return pg_sys::Datum::from(0);
        }
        let (bytes, isnull) = call_in_aggregate(&fns.serial, fcinfo, &[(state.value, false)]);
        if isnull {
            (*fcinfo).isnull = true;
            return pg_sys::Datum::from(0);
        }
        let sealed = sealed::seal(&key(), running_major(), &fns.serial_name, bytes_of(bytes));
        sealed.as_slice().into_datum().expect("bytea datum")
    }
}

/// `_eventtime.sealed_in(internal, bytea) RETURNS internal`: the state combined with the kept
/// state given (a NULL one changes nothing).
///
/// # Safety
/// Called by PostgreSQL's function manager as an aggregate's transition function.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn eventtime_sealed_in(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: the function manager's call data of the SQL signature (internal, bytea); the
    // deserialization function gets bytes this database's pipelines sealed only.
    unsafe {
        let fns = functions(fcinfo, "sealed_in");
        let args = (*fcinfo).args.as_slice(2);
        let (state, kept) = (args[0], args[1]);
        if kept.isnull {
            (*fcinfo).isnull = state.isnull;
            return state.value;
        }
        let payload = match sealed::open(
            &key(),
            running_major(),
            &fns.serial_name,
            bytes_of(kept.value),
        ) {
            Ok(p) => p,
            Err(Unsealed::OtherMajor(written)) => EtError::StateOfOtherMajor {
                what: fns.what.clone(),
                written,
            }
            .raise(),
            Err(Unsealed::Foreign) => EtError::ForeignState {
                what: fns.what.clone(),
            }
            .raise(),
        };
        let serialized = payload.into_datum().expect("bytea datum");
        let (other, _) = call_in_aggregate(
            &fns.deserial,
            fcinfo,
            &[(serialized, false), (pg_sys::Datum::from(0), false)],
        );
        let (value, isnull) = call_in_aggregate(
            &fns.combine,
            fcinfo,
            &[(state.value, state.isnull), (other, false)],
        );
        (*fcinfo).isnull = isnull;
        value
    }
}
