//! The front of a pipeline's trigger: the trigger's own function, in Rust, for pipelines whose
//! rows have one window computed from the row alone (`PipelineDef::has_front`).
//!
//! A single-row `INSERT` is the statement an application runs most, and the PL/pgSQL trigger
//! function spends most of its time on it before writing anything: the PL/pgSQL call, a first
//! query for the transition table's size and first row, and a plan of many nodes to start. The
//! front reads the transition table directly (its size and its one row), computes the row's
//! window with the same code as the SQL assignment functions, and runs one short statement with the
//! row's columns as parameters, from a plan kept for the backend's life
//! (`PipelineDef::ingest_on_time_statement`): the ledger entry and the appended partials, when
//! the window is open against the watermark the statement reads. When it wrote nothing, a second
//! kept statement (`PipelineDef::front_window_open_statement`) tells a duplicate (the window was
//! open) from a window the watermark closed.
//!
//! Everything else goes to the pipeline's PL/pgSQL function (`p<id>_ingest_sql`), called with the
//! trigger's own call data, as the trigger would have called it: statements of several rows,
//! isolation levels other than READ COMMITTED, a row without an event time or event id, a row
//! whose window is not open. Nothing is written before the hand-over, so the PL/pgSQL function
//! sees the statement as the trigger gave it.
//!
//! Who runs what (see `pg::security`): the front runs its statement as the pipeline's owner,
//! inside a security-restricted operation with `search_path` pinned, exactly as the `SECURITY
//! DEFINER` function and its `_eventtime.restrict()` run theirs. The plans are prepared as the
//! owner too, with the same pinned path.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CStr;
use std::rc::Rc;

use pgrx::prelude::*;

use crate::core::sqlgen::COLLECT_COUNTS;
use crate::engine::route::{window_of, Counts, Engine, Input};
use crate::pg::catalog;
use crate::pg::error::EtError;
use crate::pg::plans::{keep_plan, run_plan};
use crate::pg::security::{as_catalog_owner, as_owner};

/// What the front of one pipeline keeps for the backend's life.
struct Front {
    /// What the trigger reads from a row, shared with the engine.
    input: Input,
    /// The PL/pgSQL function behind the front.
    fallback: pg_sys::Oid,
    /// `ingest_on_time_statement` and `front_window_open_statement`.
    on_time: pg_sys::SPIPlanPtr,
    window_open: pg_sys::SPIPlanPtr,
    /// For statements of several rows: the engine, `None` when it cannot take the pipeline's
    /// statements.
    engine: Option<Engine>,
}

thread_local! {
    /// Fronts by the oid of their trigger function.
    static FRONTS: RefCell<HashMap<pg_sys::Oid, Rc<Front>>> = RefCell::new(HashMap::new());
}

/// What a statement's single row did when the front wrote it.
enum Wrote {
    Accepted,
    Duplicate,
}

#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_eventtime_ingest_front() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The trigger function of a pipeline with a front (`PipelineDef::create_front_function`).
///
/// # Safety
/// Called by PostgreSQL's function manager, as an `AFTER INSERT ... FOR EACH STATEMENT` trigger.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn eventtime_ingest_front(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: fcinfo is the function manager's call data; its context, when a TriggerData node,
    // is the trigger's.
    unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_TriggerData {
            EtError::WrongContext {
                message: "a pipeline's trigger function can only be called as a trigger".into(),
            }
            .raise()
        }
        let trigdata = context as *mut pg_sys::TriggerData;
        let fn_oid = (*(*fcinfo).flinfo).fn_oid;
        let mut front = front_of(fn_oid, trigdata);
        // The pipeline belongs to the source's current owner: after `ALTER TABLE ... OWNER TO`
        // or `REASSIGN OWNED`, what this backend kept names the previous one.
        let relation = (*trigdata).tg_relation;
        if (*relation).rd_id == front.input.source
            && (*(*relation).rd_rel).relowner != front.input.owner
        {
            forget(fn_oid);
            front = front_of(fn_oid, trigdata);
        }
        // Statements of several rows go to the engine; one of a single row to the path for one
        // row on time, and to the engine when that path cannot take it (nothing written).
        let written = front
            .engine
            .as_ref()
            .and_then(|e| e.write(&front.input, trigdata, 2));
        let written = match written {
            Some(c) => Some(c),
            None => match write_one_row(&front, trigdata) {
                Some(Wrote::Accepted) => Some(Counts {
                    accepted: 1,
                    ..Default::default()
                }),
                Some(Wrote::Duplicate) => Some(Counts {
                    duplicates: 1,
                    ..Default::default()
                }),
                None => front
                    .engine
                    .as_ref()
                    .and_then(|e| e.write(&front.input, trigdata, 1)),
            },
        };
        if let Some(c) = written {
            if collects_counts() {
                super::ingest::note_statement_counts(
                    front.input.pipeline,
                    c.accepted,
                    c.late,
                    c.refused,
                    c.duplicates,
                );
            }
            // An AFTER trigger's result is ignored; as PL/pgSQL's `RETURN NULL`, a null pointer.
            return pg_sys::Datum::from(0);
        }
        hand_over(front.fallback, fcinfo, trigdata)
    }
}

/// Whether `eventtime.ingest` asked the trigger for its counts.
fn collects_counts() -> bool {
    let name = std::ffi::CString::new(COLLECT_COUNTS).expect("no NUL in a setting name");
    // SAFETY: a lookup of a setting by name; NULL when it does not exist.
    let value = unsafe { pg_sys::GetConfigOption(name.as_ptr(), true, false) };
    // SAFETY: checked non-NULL; a NUL-terminated string owned by the GUC machinery.
    !value.is_null() && unsafe { CStr::from_ptr(value) }.to_bytes() == b"on"
}

/// The pipeline's PL/pgSQL function, called with the trigger's call data: it registers the
/// transition table itself, and runs as its `SECURITY DEFINER` owner.
///
/// # Safety
/// `fcinfo` and `trigdata` are the trigger call's.
unsafe fn hand_over(
    fallback: pg_sys::Oid,
    fcinfo: pg_sys::FunctionCallInfo,
    trigdata: *mut pg_sys::TriggerData,
) -> pg_sys::Datum {
    // SAFETY: a function manager lookup into a zeroed FmgrInfo, and a call with no arguments
    // whose context is the trigger's; an error raised by the function is caught at the boundary
    // and re-raised as a Rust panic.
    unsafe {
        let mut flinfo: pg_sys::FmgrInfo = std::mem::zeroed();
        pg_sys::fmgr_info(fallback, &mut flinfo);
        let mut call: pg_sys::FunctionCallInfoBaseData = std::mem::zeroed();
        call.flinfo = &mut flinfo;
        call.context = trigdata as *mut pg_sys::Node;
        call.fncollation = (*fcinfo).fncollation;
        call.nargs = 0;
        let f = flinfo.fn_addr.expect("a function manager entry point");
        // Counted in the function statistics (`track_functions`), as the trigger's call is.
        let mut usage: pg_sys::PgStat_FunctionCallUsage = std::mem::zeroed();
        pg_sys::pgstat_init_function_usage(&mut call, &mut usage);
        let result = pg_sys::ffi::pg_guard_ffi_boundary(|| f(&mut call));
        pg_sys::pgstat_end_function_usage(&mut usage, true);
        (*fcinfo).isnull = call.isnull;
        result
    }
}

/// The front of the pipeline whose trigger function is `fn_oid`, read once per backend.
///
/// # Safety
/// `trigdata` is the trigger call's.
unsafe fn front_of(fn_oid: pg_sys::Oid, trigdata: *mut pg_sys::TriggerData) -> Rc<Front> {
    if let Some(f) = FRONTS.with(|m| m.borrow().get(&fn_oid).cloned()) {
        return f;
    }
    // SAFETY: a catalog lookup; NULL when the function does not exist (it is being called).
    let name = unsafe { pg_sys::get_func_name(fn_oid) };
    let id: Option<i32> = (!name.is_null())
        .then(|| {
            // SAFETY: checked non-NULL; a palloc'd NUL-terminated name.
            let n = unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned();
            n.strip_prefix('p')?.strip_suffix("_ingest")?.parse().ok()
        })
        .flatten();
    let Some(id) = id else {
        pgrx::error!(
            "_eventtime: function {} is not a pipeline's trigger function",
            fn_oid.to_u32()
        );
    };
    let p = catalog::load_by_id(id);
    if !p.def.has_front() {
        pgrx::error!("_eventtime: pipeline {} has no front", p.def.name);
    }
    // SAFETY: the trigger's relation, open for the statement.
    let desc = unsafe { (*(*trigdata).tg_relation).rd_att };
    let names = p.def.front_columns();
    let attributes: Vec<(i16, pg_sys::Oid, pg_sys::Oid)> = names
        .iter()
        .map(|n| {
            // SAFETY: `desc` is a valid tuple descriptor of `natts` attributes.
            unsafe { attribute(desc, n) }.unwrap_or_else(|| {
                pgrx::error!(
                    "_eventtime: pipeline {} reads column {n}, which its source does not have",
                    p.def.name
                )
            })
        })
        .collect();
    let columns: Vec<(i16, pg_sys::Oid)> = attributes.iter().map(|a| (a.0, a.1)).collect();
    let position = |n: &str| names.iter().position(|c| *c == n);
    let sql_fn = p.def.sql_trigger_function();
    let fallback = as_catalog_owner(|| {
        Spi::get_one::<pg_sys::Oid>(&format!(
            "SELECT '{sql_fn}()'::pg_catalog.regprocedure::pg_catalog.oid"
        ))
        .expect("function lookup")
        .expect("the PL/pgSQL function exists beside the front")
    });
    let mut types: Vec<pg_sys::Oid> = vec![pg_sys::TIMESTAMPTZOID, pg_sys::TIMESTAMPTZOID];
    types.extend(columns.iter().map(|c| c.1));
    let on_time_sql = p.def.ingest_on_time_statement();
    let window_open_sql = p.def.front_window_open_statement();
    let duplicates_sql = format!(
        "INSERT INTO _eventtime.duplicate_counts (pipeline_id, duplicates) VALUES ({}, $1)",
        p.id
    );
    let (on_time, window_open, duplicates) = as_owner(p.owner, || {
        (
            keep_plan(&on_time_sql, &types),
            keep_plan(&window_open_sql, &[pg_sys::TIMESTAMPTZOID]),
            keep_plan(&duplicates_sql, &[pg_sys::INT8OID]),
        )
    });
    let engine = Engine::new(&p, &names, &attributes);
    let front = Rc::new(Front {
        input: Input {
            pipeline: p.id,
            name: p.def.name.clone(),
            lateness: p.def.lateness,
            source: p.source_oid,
            owner: p.owner,
            window: p.def.window.clone(),
            event_time: position(&p.def.event_time).expect("the event time is a front column"),
            event_id: p
                .def
                .event_id
                .as_ref()
                .map(|c| position(&c.name).expect("the event id is a front column")),
            ledger: p.def.ledger().is_some(),
            offsets: p.def.offsets.is_some(),
            columns,
            duplicates,
        },
        fallback,
        on_time,
        window_open,
        engine,
    });
    FRONTS.with(|m| m.borrow_mut().insert(fn_oid, front.clone()));
    front
}

/// Forgets what the backend kept for the front `fn_oid`, plans included.
fn forget(fn_oid: pg_sys::Oid) {
    if let Some(f) = FRONTS.with(|m| m.borrow_mut().remove(&fn_oid)) {
        if let Some(e) = &f.engine {
            e.free();
        }
        for plan in [f.on_time, f.window_open, f.input.duplicates] {
            // SAFETY: the plans were kept by `keep_plan` and nothing else holds them.
            unsafe { pg_sys::SPI_freeplan(plan) };
        }
    }
}

/// The attribute number and type of column `name` of `desc`.
///
/// # Safety
/// `desc` is a valid tuple descriptor.
unsafe fn attribute(
    desc: pg_sys::TupleDesc,
    name: &str,
) -> Option<(i16, pg_sys::Oid, pg_sys::Oid)> {
    // SAFETY: indexes within `natts`; attribute names are NUL-terminated.
    unsafe {
        let desc = pgrx::PgTupleDesc::from_pg_unchecked(desc);
        desc.iter()
            .find(|a| !a.is_dropped() && a.name() == name)
            .map(|a| (a.attnum, a.type_oid().value(), a.attcollation))
    }
}

/// Writes the statement's row when the statement has exactly one, under READ COMMITTED, with
/// an event time (and an id, with an event id) whose window is open, and records a duplicate in
/// `duplicate_counts`; `None` when the statement goes to the PL/pgSQL function, having written
/// nothing.
///
/// # Safety
/// `trigdata` is the trigger call's.
unsafe fn write_one_row(front: &Front, trigdata: *mut pg_sys::TriggerData) -> Option<Wrote> {
    // A statement of one row of a pipeline with offsets claims them in the PL/pgSQL function.
    if front.input.offsets {
        return None;
    }
    // SAFETY: reads of the trigger's call data and of a backend global.
    let (table, relation) = unsafe {
        if pg_sys::XactIsoLevel != pg_sys::XACT_READ_COMMITTED as i32 {
            return None;
        }
        ((*trigdata).tg_newtable, (*trigdata).tg_relation)
    };
    // SAFETY: the relation is open for the statement.
    if table.is_null() || unsafe { (*relation).rd_id } != front.input.source {
        return None;
    }
    // SAFETY: the transition table of the statement, read through a read pointer of its own, as a
    // scan of it in a query does (and as every such scan, it selects its own pointer to read).
    unsafe {
        if pg_sys::tuplestore_tuple_count(table) != 1 {
            return None;
        }
        let desc = (*relation).rd_att;
        let slot = pg_sys::MakeSingleTupleTableSlot(desc, &pg_sys::TTSOpsMinimalTuple);
        let pointer = pg_sys::tuplestore_alloc_read_pointer(table, pg_sys::EXEC_FLAG_REWIND as i32);
        pg_sys::tuplestore_select_read_pointer(table, pointer);
        pg_sys::tuplestore_rescan(table);
        let got = pg_sys::tuplestore_gettupleslot(table, true, false, slot);
        pg_sys::tuplestore_select_read_pointer(table, 0);
        let result = if got {
            write_row(front, desc, slot)
        } else {
            None
        };
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        result
    }
}

/// [`write_one_row`] once the row is in `slot`.
///
/// # Safety
/// `slot` holds a tuple of `desc`.
unsafe fn write_row(
    front: &Front,
    desc: pg_sys::TupleDesc,
    slot: *mut pg_sys::TupleTableSlot,
) -> Option<Wrote> {
    let last = front.input.columns.iter().map(|c| c.0).max().unwrap_or(1);
    // SAFETY: deforms the slot's tuple up to the last column read; the values stay valid while
    // the slot holds the tuple.
    let (values, nulls) = unsafe {
        if (*slot).tts_nvalid < last {
            pg_sys::slot_getsomeattrs_int(slot, last as i32);
        }
        let natts = (*desc).natts as usize;
        let values = std::slice::from_raw_parts((*slot).tts_values, natts);
        let nulls = std::slice::from_raw_parts((*slot).tts_isnull, natts);
        (values, nulls)
    };
    let mut params: Vec<pg_sys::Datum> = Vec::with_capacity(front.input.columns.len() + 2);
    let mut param_nulls: Vec<u8> = Vec::with_capacity(front.input.columns.len() + 2);
    for (i, (attnum, type_oid)) in front.input.columns.iter().enumerate() {
        let at = (*attnum - 1) as usize;
        // SAFETY: `at` is within the descriptor's attributes.
        let current = unsafe { pgrx::PgTupleDesc::from_pg_unchecked(desc) }
            .get(at)
            .map(|a| a.type_oid().value());
        if current != Some(*type_oid) {
            return None;
        }
        if nulls[at]
            && (i == front.input.event_time
                || (front.input.ledger && Some(i) == front.input.event_id))
        {
            return None;
        }
        params.push(values[at]);
        param_nulls.push(if nulls[at] { b'n' } else { b' ' });
    }
    let micros = params[front.input.event_time].value() as i64;
    let window = window_of(&front.input.window, micros)?;
    params.splice(
        0..0,
        [
            pg_sys::Datum::from(window.start),
            pg_sys::Datum::from(window.end),
        ],
    );
    param_nulls.splice(0..0, [b' ', b' ']);
    as_owner(front.input.owner, || {
        if run_plan(front.on_time, &params, &param_nulls).0 > 0 {
            return Some(Wrote::Accepted);
        }
        // Nothing written: the id was in the ledger, or the watermark closed the window (then
        // the PL/pgSQL function takes the statement). Without a ledger there are no
        // duplicates, so the window was closed: nothing more to ask.
        if !front.input.ledger {
            return None;
        }
        let (_, open) = run_plan(front.window_open, &params[1..2], b" ");
        if open != Some(true) {
            return None;
        }
        run_plan(front.input.duplicates, &[pg_sys::Datum::from(1i64)], b" ");
        Some(Wrote::Duplicate)
    })
}
