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

use crate::core::aggregates::ResolvedAgg;
use crate::core::landing::WindowState;
use crate::core::sqlgen::COLLECT_COUNTS;
use crate::core::window::{Window, WindowSpec};
use crate::engine::acc::{Accumulator, Storage};
use crate::engine::{self, Groups, Key};
use crate::pg::catalog;
use crate::pg::error::EtError;
use crate::pg::security::{as_catalog_owner, as_owner};
use crate::pg::zone::PgZone;

/// What the front of one pipeline keeps for the backend's life.
struct Front {
    pipeline: i32,
    /// The pipeline's name, for its announcements.
    name: String,
    /// Allowed lateness, in microseconds: which windows are fired rather than purged.
    lateness: i64,
    /// The source table, whose rows the transition table holds.
    source: pg_sys::Oid,
    owner: pg_sys::Oid,
    /// The PL/pgSQL function behind the front.
    fallback: pg_sys::Oid,
    /// Tumbling, or calendar periods with a slide of their size: one window per row.
    window: WindowSpec,
    /// Attribute number and type of each of `PipelineDef::front_columns`, in order.
    columns: Vec<(i16, pg_sys::Oid)>,
    /// Indexes into `columns`.
    event_time: usize,
    event_id: Option<usize>,
    /// Whether duplicates are told by the pipeline's own ledger (`PipelineDef::ledger`); with a
    /// unique index of the source on the event id, every row the trigger sees is new.
    ledger: bool,
    /// `ingest_on_time_statement`, `front_window_open_statement`, and the insert into
    /// `duplicate_counts`.
    on_time: pg_sys::SPIPlanPtr,
    window_open: pg_sys::SPIPlanPtr,
    duplicates: pg_sys::SPIPlanPtr,
    /// For statements of several rows in open windows: the engine's view
    /// of the pipeline, the state table (locked before the watermark is read) and the read of
    /// the watermark. `None` when the engine cannot take the pipeline's statements.
    engine: Option<(engine::Plan, pg_sys::Oid, pg_sys::SPIPlanPtr)>,
    /// With offsets (and an engine): how the engine reads and claims them.
    offsets: Option<FrontOffsets>,
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
        if (*relation).rd_id == front.source && (*(*relation).rd_rel).relowner != front.owner {
            forget(fn_oid);
            front = front_of(fn_oid, trigdata);
        }
        if let Some((rows, late, duplicates)) = write_groups(&front, trigdata) {
            if collects_counts() {
                super::ingest::note_statement_counts(front.pipeline, rows, late, 0, duplicates);
            }
            return pg_sys::Datum::from(0);
        }
        if let Some(wrote) = write_one_row(&front, trigdata) {
            let (accepted, duplicates) = match wrote {
                Wrote::Accepted => (1, 0),
                Wrote::Duplicate => (0, 1),
            };
            if collects_counts() {
                super::ingest::note_statement_counts(front.pipeline, accepted, 0, 0, duplicates);
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
    // With both a ledger and offsets, the PL/pgSQL function takes every statement.
    let mut engine = if p.def.ledger().is_none() || p.def.offsets.is_none() {
        engine_plan(&p, &names, &attributes)
    } else {
        None
    };
    let offsets = match (&p.def.offsets, &engine) {
        (Some(o), Some(_)) => {
            let offsets = front_offsets(&p, o, &names, &attributes);
            if offsets.is_none() {
                // No engine: its kept plans go.
                if let Some((plan, _, watermark)) = engine.take() {
                    for kept in [plan.write, plan.late_write, watermark] {
                        // SAFETY: plans kept by `keep_plan` that nothing else holds.
                        unsafe { pg_sys::SPI_freeplan(kept) };
                    }
                }
            }
            offsets
        }
        _ => None,
    };
    let front = Rc::new(Front {
        pipeline: p.id,
        name: p.def.name.clone(),
        lateness: p.def.lateness,
        source: p.source_oid,
        owner: p.owner,
        fallback,
        window: p.def.window.clone(),
        event_time: position(&p.def.event_time).expect("the event time is a front column"),
        event_id: p
            .def
            .event_id
            .as_ref()
            .map(|c| position(&c.name).expect("the event id is a front column")),
        ledger: p.def.ledger().is_some(),
        columns,
        on_time,
        window_open,
        duplicates,
        engine,
        offsets,
    });
    FRONTS.with(|m| m.borrow_mut().insert(fn_oid, front.clone()));
    front
}

/// Forgets what the backend kept for the front `fn_oid`, plans included.
fn forget(fn_oid: pg_sys::Oid) {
    if let Some(f) = FRONTS.with(|m| m.borrow_mut().remove(&fn_oid)) {
        let engine = f.engine.as_ref().map(|e| {
            [e.0.write, e.0.late_write, e.2]
                .into_iter()
                .chain(e.0.ledger.as_ref().map(|l| l.insert))
        });
        let offsets = f.offsets.as_ref().map(|o| [o.claim]);
        for plan in [f.on_time, f.window_open, f.duplicates]
            .into_iter()
            .chain(engine.into_iter().flatten())
            .chain(offsets.into_iter().flatten())
        {
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

/// The engine's view of pipeline `p` (see `engine`), whose front reads `names`, of the source's
/// `attributes` (number, type, collation): keys, accumulators, the groups statement kept as the
/// owner, the state table and the read of the watermark. `None` when a key or aggregate needs
/// what the engine does not have (a type without hash function, a cast by text), or a type has
/// no array type.
fn engine_plan(
    p: &catalog::Pipeline,
    names: &[&str],
    attributes: &[(i16, pg_sys::Oid, pg_sys::Oid)],
) -> Option<(engine::Plan, pg_sys::Oid, pg_sys::SPIPlanPtr)> {
    let position = |n: &str| names.iter().position(|c| *c == n);
    let keys: Vec<Key> = p
        .def
        .keys
        .iter()
        .map(|k| {
            let i = position(&k.name)?;
            Key::resolve(i, attributes[i].1, attributes[i].2)
        })
        .collect::<Option<_>>()?;
    let accs: Vec<Accumulator> = p
        .def
        .aggs
        .iter()
        .map(|a: &ResolvedAgg| {
            let arg = match a.spec.arg.as_deref() {
                Some(c) => Some(position(c)?),
                None => None,
            };
            let (t, coll) = arg
                .map(|i| (attributes[i].1, attributes[i].2))
                .unwrap_or_default();
            Accumulator::resolve(a, arg, t, coll)
        })
        .collect::<Option<_>>()?;
    let mut columns: Vec<Storage> = keys.iter().map(|k| k.storage).collect();
    columns.extend([
        Storage::of(pg_sys::TIMESTAMPTZOID),
        Storage::of(pg_sys::TIMESTAMPTZOID),
        Storage::of(pg_sys::INT8OID),
    ]);
    columns.extend(accs.iter().flat_map(|a| a.column_storage()));
    if columns.len() != p.def.front_group_types().len() {
        return None;
    }
    let array_types: Vec<pg_sys::Oid> = columns
        .iter()
        // SAFETY: a syscache lookup.
        .map(|c| unsafe { pg_sys::get_array_type(c.oid) })
        .collect();
    if array_types.contains(&pg_sys::InvalidOid) {
        return None;
    }
    let state = as_catalog_owner(|| {
        crate::pg::spi::read_one::<pg_sys::Oid>(
            "SELECT pg_catalog.to_regclass($1)::pg_catalog.oid",
            &[p.def.table("state").as_str().into()],
        )
    })
    .ok()
    .flatten()?;
    let watermark_sql = format!(
        "SELECT /* pg_eventtime ingest, the watermark */ p.watermark FROM _eventtime.pipeline p WHERE p.id = {}",
        p.id
    );
    let groups_sql = p.def.ingest_groups_statement();
    let late_sql = p.def.ingest_late_groups_statement();
    let late_types: Vec<pg_sys::Oid> = array_types
        .iter()
        .copied()
        .chain([pg_sys::TIMESTAMPTZOID])
        .collect();
    // With the pipeline's own ledger: the event id (hashed, for the order of the inserts) and
    // the insert of a statement's entries, whose arrays are of the window start, keys and id.
    let ledger = match p.def.ledger() {
        None => None,
        Some(eid) => {
            let sql = p.def.ingest_ledger_statement()?;
            let i = position(&eid.name)?;
            let id = Key::resolve(i, attributes[i].1, attributes[i].2)?;
            let order: Vec<(usize, pg_sys::Oid, engine::acc::Fn)> = keys
                .iter()
                .map(|k| k.column)
                .chain([i])
                .map(|c| Some((c, attributes[c].2, order_fn(attributes[c].1)?)))
                .collect::<Option<_>>()?;
            let mut types = vec![pg_sys::TIMESTAMPTZOID];
            types.extend(keys.iter().map(|k| attributes[k.column].1));
            types.push(attributes[i].1);
            let types: Vec<pg_sys::Oid> = types
                .into_iter()
                // SAFETY: a syscache lookup.
                .map(|t| unsafe { pg_sys::get_array_type(t) })
                .collect();
            if types.contains(&pg_sys::InvalidOid) {
                return None;
            }
            Some((sql, types, id, order))
        }
    };
    let (write, late_write, watermark, insert) = as_owner(p.owner, || {
        (
            keep_plan(&groups_sql, &array_types),
            keep_plan(&late_sql, &late_types),
            keep_plan(&watermark_sql, &[]),
            ledger
                .as_ref()
                .map(|(sql, types, _, _)| keep_plan(sql, types)),
        )
    });
    let ledger = ledger
        .zip(insert)
        .map(|((_, _, id, order), insert)| engine::dedup::Ledger {
            id,
            order,
            insert,
            front: attributes.iter().map(|a| Storage::of(a.1)).collect(),
        });
    Some((
        engine::Plan {
            keys,
            accs,
            write,
            late_write,
            columns,
            ledger,
        },
        state,
        watermark,
    ))
}

/// The btree comparison function of type `t`'s default operator class, if it has one.
fn order_fn(t: pg_sys::Oid) -> Option<engine::acc::Fn> {
    // SAFETY: a type cache lookup of an existing type.
    let cmp =
        unsafe { (*pg_sys::lookup_type_cache(t, pg_sys::TYPECACHE_CMP_PROC as i32)).cmp_proc };
    (cmp != pg_sys::InvalidOid).then(|| engine::acc::Fn::new(cmp))
}

/// How the engine reads and claims the offsets `o` of pipeline `p`; `None` when the source
/// column's type is not text, varchar or an integer (whose text the engine writes as `::text`
/// does), and then the pipeline has no engine.
fn front_offsets(
    p: &catalog::Pipeline,
    o: &crate::core::model::Offsets,
    names: &[&str],
    attributes: &[(i16, pg_sys::Oid, pg_sys::Oid)],
) -> Option<FrontOffsets> {
    let position = |n: &str| names.iter().position(|c| *c == n);
    let column = position(&o.column)?;
    if ![pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&attributes[column].1) {
        return None;
    }
    let source = match &o.source_column {
        None => None,
        Some(c) => {
            let i = position(c)?;
            let t = attributes[i].1;
            if ![
                pg_sys::TEXTOID,
                pg_sys::VARCHAROID,
                pg_sys::INT2OID,
                pg_sys::INT4OID,
                pg_sys::INT8OID,
            ]
            .contains(&t)
            {
                return None;
            }
            Some((i, t))
        }
    };
    let claim_sql = format!(
        "SELECT /* pg_eventtime ingest, the offsets */ _eventtime.offsets_claim({}, $1)::pg_catalog.text",
        p.id
    );
    let claim = as_owner(p.owner, || keep_plan(&claim_sql, &[pg_sys::TEXTOID]));
    Some(FrontOffsets {
        column,
        offset_type: attributes[column].1,
        source,
        claim,
    })
}

/// Runs a kept plan that returns one `timestamptz` (or none): its microseconds, `None` for NULL
/// or no row.
fn run_plan_timestamp(plan: pg_sys::SPIPlanPtr) -> Option<i64> {
    run_plan_with(plan, &[], &[], |d| d.value() as i64).1
}

/// Writes a statement of several rows by the engine (see `engine`) when the front has one for
/// the pipeline, under READ COMMITTED, on the source table itself, and every row has an event
/// time whose window is open against the watermark or fired within its grace (and, with offsets,
/// an offset and a source, rising through the statement per source); returns the rows counted in
/// open windows, in fired ones (late) and the duplicates, or `None`, having written nothing,
/// when the statement goes to the PL/pgSQL function.
///
/// # Safety
/// `trigdata` is the trigger call's.
unsafe fn write_groups(
    front: &Front,
    trigdata: *mut pg_sys::TriggerData,
) -> Option<(i64, i64, i64)> {
    let (plan, state, watermark_plan) = front.engine.as_ref()?;
    // SAFETY: reads of the trigger's call data and of a backend global.
    let (table, relation) = unsafe {
        if pg_sys::XactIsoLevel != pg_sys::XACT_READ_COMMITTED as i32 {
            return None;
        }
        ((*trigdata).tg_newtable, (*trigdata).tg_relation)
    };
    // SAFETY: the relation is open for the statement; the transition table is the statement's.
    unsafe {
        if table.is_null()
            || (*relation).rd_id != front.source
            || pg_sys::tuplestore_tuple_count(table) < 2
        {
            return None;
        }
    }
    // SAFETY: the descriptor of the open relation.
    let desc = unsafe { (*relation).rd_att };
    for (attnum, type_oid) in &front.columns {
        // SAFETY: as in `write_row`.
        let current = unsafe { pgrx::PgTupleDesc::from_pg_unchecked(desc) }
            .get((*attnum - 1) as usize)
            .map(|a| a.type_oid().value());
        if current != Some(*type_oid) {
            return None;
        }
    }
    // The watermark after the state's lock, as the ingest statements read it.
    // SAFETY: a lock on the pipeline's state table, held until the transaction ends.
    unsafe { pg_sys::LockRelationOid(*state, pg_sys::RowExclusiveLock as i32) };
    // From here on as the pipeline's owner, in a security-restricted operation: the reads and
    // writes, and the functions of the key and aggregate types, as the PL/pgSQL function runs
    // them.
    as_owner(front.owner, || {
        let watermark = run_plan_timestamp(*watermark_plan);
        // The groups of fired windows are written with the watermark they were classified
        // against, and count the late versions they wrote.
        let versions = std::cell::Cell::new(0i64);
        let run = |write: pg_sys::SPIPlanPtr, arrays: &[pg_sys::Datum], late: bool| {
            let mut values = arrays.to_vec();
            if late {
                values.push(pg_sys::Datum::from(
                    watermark.expect("a fired window has a watermark"),
                ));
            }
            let nulls = vec![b' '; values.len()];
            // The lookup of each window's main firing must be an index scan of history, whatever
            // the plan was made from (as the PL/pgSQL function runs with `enable_seqscan` off,
            // see *Ingest* in the design note): the kept plan is made, and remade, when run.
            let level =
                late.then(|| crate::pg::security::set_in_nest_level(c"enable_seqscan", c"off"));
            let (_, n) = run_plan_with(write, &values, &nulls, |d| d.value() as i64);
            if let Some(level) = level {
                // SAFETY: closes the nest level opened above; every level above it is closed.
                unsafe { pg_sys::AtEOXact_GUC(false, level) };
                versions.set(versions.get() + n.unwrap_or(0));
            }
        };
        let group_cx = pgrx::PgMemoryContexts::new("pg_eventtime groups");
        let row_cx = pgrx::PgMemoryContexts::new("pg_eventtime rows");
        let (group_cx, row) = (group_cx.value(), row_cx.value());
        // SAFETY: the transition table is read through a read pointer of its own (as in
        // `write_one_row`), each row deformed in the slot; the contexts outlive the groups, and
        // the per-row context is reset only between rows.
        unsafe {
            let slot = pg_sys::MakeSingleTupleTableSlot(desc, &pg_sys::TTSOpsMinimalTuple);
            let pointer =
                pg_sys::tuplestore_alloc_read_pointer(table, pg_sys::EXEC_FLAG_REWIND as i32);
            let result = group_rows(
                front, plan, table, pointer, slot, watermark, group_cx, row, &run,
            );
            pg_sys::ExecDropSingleTupleTableSlot(slot);
            let (rows, late, duplicates) = result?;
            if duplicates > 0 {
                run_plan(front.duplicates, &[pg_sys::Datum::from(duplicates)], b" ");
            }
            crate::pg::announce::announce(
                &front.name,
                crate::pg::announce::Versions {
                    late: versions.get(),
                    ..Default::default()
                },
                watermark,
            );
            Some((rows, late, duplicates))
        }
    })
}

/// With offsets: the front columns of a row's offset and source, the claim of a statement's
/// offsets, a kept plan.
struct FrontOffsets {
    /// Index among the front columns, and the offset's type (int2, int4 or int8).
    column: usize,
    offset_type: pg_sys::Oid,
    /// Index and type of the source column (text, varchar or an integer): `None` for one source.
    source: Option<(usize, pg_sys::Oid)>,
    claim: pg_sys::SPIPlanPtr,
}

impl FrontOffsets {
    /// The offset of a row, from its datum.
    fn offset(&self, d: pg_sys::Datum) -> i64 {
        match self.offset_type {
            pg_sys::INT2OID => d.value() as i16 as i64,
            pg_sys::INT4OID => d.value() as i32 as i64,
            _ => d.value() as i64,
        }
    }

    /// The source of a row as `::text` writes it, into `buf`.
    ///
    /// # Safety
    /// `values` are the front columns' datums of a row whose source is not NULL.
    unsafe fn source<'b>(&self, values: &[pg_sys::Datum], buf: &'b mut Vec<u8>) -> &'b [u8] {
        buf.clear();
        match self.source {
            None => buf.extend_from_slice(crate::core::model::SINGLE_SOURCE.as_bytes()),
            Some((i, t)) => match t {
                pg_sys::INT2OID => write_int(buf, values[i].value() as i16 as i64),
                pg_sys::INT4OID => write_int(buf, values[i].value() as i32 as i64),
                pg_sys::INT8OID => write_int(buf, values[i].value() as i64),
                // SAFETY: a text or varchar datum, as the caller promises.
                _ => unsafe {
                    let v = pg_sys::pg_detoast_datum_packed(values[i].cast_mut_ptr());
                    let len = pgrx::varlena::varsize_any_exhdr(v);
                    let data = pgrx::varlena::vardata_any(v) as *const u8;
                    buf.extend_from_slice(std::slice::from_raw_parts(data, len));
                },
            },
        }
        buf
    }
}

/// `v` in decimal, as `int8out` writes it, at the end of `buf`.
fn write_int(buf: &mut Vec<u8>, v: i64) {
    use std::io::Write;
    write!(buf, "{v}").expect("write to a vector");
}

/// The grouping of a statement's rows and the writes of its groups (see [`write_groups`]):
/// the rows counted in open windows, those counted in fired windows (late), and the duplicates
/// (by offset or by the ledger), or `None`, having written nothing.
///
/// # Safety
/// As [`scan`]; `group_cx` and `row` are memory contexts that outlive the call.
#[allow(clippy::too_many_arguments)]
unsafe fn group_rows(
    front: &Front,
    plan: &engine::Plan,
    table: *mut pg_sys::Tuplestorestate,
    pointer: i32,
    slot: *mut pg_sys::TupleTableSlot,
    watermark: Option<i64>,
    group_cx: pg_sys::MemoryContext,
    row: pg_sys::MemoryContext,
    run: &dyn Fn(pg_sys::SPIPlanPtr, &[pg_sys::Datum], bool),
) -> Option<(i64, i64, i64)> {
    // SAFETY: as the caller promises.
    unsafe {
        let mut groups = Groups::new(plan, group_cx);
        let add = |groups: &mut Groups,
                   values: &[pg_sys::Datum],
                   nulls: &[bool],
                   (w, late): (Window, bool)| {
            let old = pg_sys::MemoryContextSwitchTo(row);
            groups.add(values, nulls, w.start, w.end, late);
            pg_sys::MemoryContextSwitchTo(old);
        };
        let reset = |i: usize| {
            if (i + 1).is_multiple_of(engine::rows_per_reset()) {
                pg_sys::MemoryContextReset(row);
            }
        };
        let mut buf = Vec::new();
        // With offsets, a first pass checks every row and scans the offsets; the claim then moves
        // them (nothing is written before it), and the grouping skips the rows at or below their
        // source's offset committed before.
        let committed: Option<HashMap<Vec<u8>, i64>> = match &front.offsets {
            None => None,
            Some(o) => {
                let mut seen = crate::api::offsets::Scan::default();
                let ok = scan(
                    front,
                    table,
                    pointer,
                    slot,
                    watermark,
                    &mut |_, values, nulls, w| {
                        let source_null = o.source.is_some_and(|(i, _)| nulls[i]);
                        if w.is_none() || nulls[o.column] || source_null {
                            return false;
                        }
                        seen.add(o.source(values, &mut buf), o.offset(values[o.column]));
                        true
                    },
                );
                let sources = seen.result();
                if !ok || sources.iter().any(|s| !s.rising) {
                    return None;
                }
                let json = serde_json::to_string(&sources).expect("scan serializes");
                let claim = json.as_str().into_datum().expect("text datum");
                let previous = run_plan_text(o.claim, &[claim]);
                Some(
                    previous
                        .and_then(|p| serde_json::from_str::<HashMap<String, i64>>(&p).ok())
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k.into_bytes(), v))
                        .collect(),
                )
            }
        };
        let mut duplicates = 0i64;
        let mut counted = 0i64;
        if let (Some(o), Some(committed)) = (&front.offsets, &committed) {
            // Every row checked: one pass, written whenever the groups reach the bound.
            scan(
                front,
                table,
                pointer,
                slot,
                watermark,
                &mut |i, values, nulls, w| {
                    let off = o.offset(values[o.column]);
                    let at_or_below = !committed.is_empty()
                        && committed
                            .get(o.source(values, &mut buf))
                            .is_some_and(|&c| off <= c);
                    if at_or_below {
                        duplicates += 1;
                    } else {
                        if groups.full() {
                            groups.flush(run);
                        }
                        add(
                            &mut groups,
                            values,
                            nulls,
                            w.expect("checked by the first pass"),
                        );
                        counted += 1;
                    }
                    reset(i);
                    true
                },
            );
            groups.flush(run);
            return Some((counted - groups.late_rows, groups.late_rows, duplicates));
        }
        if let Some(ledger) = &plan.ledger {
            // One pass reads the rows (copied) before anything is written; then their entries go
            // into the ledger and the kept rows are grouped (see `engine::dedup`).
            let rows_cx = pgrx::PgMemoryContexts::new("pg_eventtime ledger rows");
            let mut rows = engine::dedup::Rows::new(plan, ledger, rows_cx.value());
            let read = scan(
                front,
                table,
                pointer,
                slot,
                watermark,
                &mut |_, values, nulls, w| match w {
                    Some(w) if !rows.full() => {
                        rows.push(values, nulls, w);
                        true
                    }
                    _ => false,
                },
            );
            if !read || rows.full() {
                return None;
            }
            let mut counted = 0i64;
            for (r, kept) in rows.kept().into_iter().enumerate() {
                if !kept {
                    continue;
                }
                // Entries are written: past the bound the groups are written, not handed over.
                if groups.full() {
                    groups.flush(run);
                }
                let (values, nulls, w) = rows.row(r);
                add(&mut groups, values, nulls, w);
                counted += 1;
                reset(r);
            }
            groups.flush(run);
            let duplicates = rows.len() as i64 - counted;
            drop(rows);
            drop(rows_cx);
            return Some((counted - groups.late_rows, groups.late_rows, duplicates));
        }
        // One pass: every row must be one the engine takes before anything is written, and the
        // groups must stay within the bound. A statement of more groups goes to SQL, whose
        // grouping spills to disk past `work_mem`: written in parts, each key of such a
        // statement would be upserted once per part it has rows in (twice as many writes for
        // keys seen twice), where SQL writes each group once.
        let ok = scan(
            front,
            table,
            pointer,
            slot,
            watermark,
            &mut |i, values, nulls, w| {
                let Some(w) = w else { return false };
                if groups.full() {
                    return false;
                }
                add(&mut groups, values, nulls, w);
                reset(i);
                true
            },
        );
        if !ok {
            return None;
        }
        groups.flush(run);
        let rows = pg_sys::tuplestore_tuple_count(table);
        Some((rows - groups.late_rows, groups.late_rows, 0))
    }
}

/// Runs a kept plan that returns one `text` (or none), with parameters `values` (none NULL).
fn run_plan_text(plan: pg_sys::SPIPlanPtr, values: &[pg_sys::Datum]) -> Option<String> {
    let nulls = vec![b' '; values.len()];
    // SAFETY: the first column is text; it is copied out before the connection closes.
    run_plan_with(plan, values, &nulls, |d| unsafe {
        String::from_datum(d, false)
    })
    .1
    .flatten()
}

/// What [`scan`] calls for each row: its index, the front columns' values and NULLs, its window
/// and whether that window has fired (its rows are late); false stops the scan.
type RowFn<'a> = dyn FnMut(usize, &[pg_sys::Datum], &[bool], Option<(Window, bool)>) -> bool + 'a;

/// Reads the transition table `table` from its start through read pointer `pointer`, and calls
/// `f` with each row's index, the front columns' values and NULLs, and its window when it has an
/// event time whose window is open or fired against `watermark` and `lateness` (the landing rule,
/// `core::landing::window_state`), with whether it fired (`None` otherwise: no event time, no
/// window, or a purged window); stops when `f` returns false, and returns whether it read every
/// row.
///
/// # Safety
/// `table` is the statement's transition table, `pointer` a read pointer of it, `slot` a slot
/// of the source's descriptor; the values passed to `f` are valid during the call.
unsafe fn scan(
    front: &Front,
    table: *mut pg_sys::Tuplestorestate,
    pointer: i32,
    slot: *mut pg_sys::TupleTableSlot,
    watermark: Option<i64>,
    f: &mut RowFn<'_>,
) -> bool {
    let last = front.columns.iter().map(|c| c.0).max().unwrap_or(1);
    let mut values = vec![pg_sys::Datum::from(0); front.columns.len()];
    let mut nulls = vec![false; front.columns.len()];
    let mut ok = true;
    // SAFETY: as the caller promises.
    unsafe {
        pg_sys::tuplestore_select_read_pointer(table, pointer);
        pg_sys::tuplestore_rescan(table);
        let mut i = 0usize;
        while pg_sys::tuplestore_gettupleslot(table, true, false, slot) {
            if (*slot).tts_nvalid < last {
                pg_sys::slot_getsomeattrs_int(slot, last as i32);
            }
            for (j, (attnum, _)) in front.columns.iter().enumerate() {
                let at = (*attnum - 1) as usize;
                values[j] = *(*slot).tts_values.add(at);
                nulls[j] = *(*slot).tts_isnull.add(at);
            }
            let w = (!nulls[front.event_time])
                .then(|| window_of(&front.window, values[front.event_time].value() as i64))
                .flatten()
                .and_then(|w| {
                    match crate::core::landing::window_state(w.end, front.lateness, watermark) {
                        WindowState::Open => Some((w, false)),
                        WindowState::Fired => Some((w, true)),
                        WindowState::Purged => None,
                    }
                });
            if !f(i, &values, &nulls, w) {
                ok = false;
                break;
            }
            i += 1;
        }
        pg_sys::tuplestore_select_read_pointer(table, 0);
    }
    ok
}

/// A plan of `sql` with parameters of `types`, generic (the statements have no choice a
/// parameter's value could improve), kept for the backend's life.
fn keep_plan(sql: &str, types: &[pg_sys::Oid]) -> pg_sys::SPIPlanPtr {
    let sql = std::ffi::CString::new(sql).expect("no NUL in generated SQL");
    let mut types = types.to_vec();
    // SAFETY: prepares and keeps a plan inside an SPI connection of its own; errors are raised
    // as panics by the guarded calls and end the transaction, whose abort closes the connection.
    unsafe {
        pg_sys::SPI_connect();
        let plan = pg_sys::SPI_prepare_cursor(
            sql.as_ptr(),
            types.len() as i32,
            types.as_mut_ptr(),
            pg_sys::CURSOR_OPT_GENERIC_PLAN as i32,
        );
        if plan.is_null() || pg_sys::SPI_keepplan(plan) != 0 {
            pgrx::error!("_eventtime: could not prepare a pipeline statement");
        }
        pg_sys::SPI_finish();
        plan
    }
}

/// Runs a kept plan in an SPI connection of its own: the number of rows it processed (inserted,
/// for an `INSERT` without `RETURNING`), and the first row's first column as a boolean, when it
/// returns rows (`None` too when it is NULL).
fn run_plan(
    plan: pg_sys::SPIPlanPtr,
    values: &[pg_sys::Datum],
    nulls: &[u8],
) -> (u64, Option<bool>) {
    run_plan_with(plan, values, nulls, |d| d.value() != 0)
}

/// [`run_plan`], whose first row's first column, when it is not NULL, `read` makes a value of
/// before the connection closes.
fn run_plan_with<T>(
    plan: pg_sys::SPIPlanPtr,
    values: &[pg_sys::Datum],
    nulls: &[u8],
    read: impl FnOnce(pg_sys::Datum) -> T,
) -> (u64, Option<T>) {
    let mut values = values.to_vec();
    let mut nulls: Vec<std::ffi::c_char> = nulls.iter().map(|&b| b as std::ffi::c_char).collect();
    nulls.push(0);
    // SAFETY: the plan was kept by `keep_plan` with as many parameters as values; the result is
    // read before the connection closes.
    unsafe {
        pg_sys::SPI_connect();
        let rc = pg_sys::SPI_execute_plan(plan, values.as_mut_ptr(), nulls.as_ptr(), false, 0);
        if rc < 0 {
            pgrx::error!("_eventtime: a pipeline statement failed ({rc})");
        }
        let processed = pg_sys::SPI_processed;
        let mut first = None;
        let table = pg_sys::SPI_tuptable;
        if !table.is_null() && processed > 0 {
            let mut null = false;
            let a = pg_sys::SPI_getbinval(*(*table).vals, (*table).tupdesc, 1, &mut null);
            if !null {
                first = Some(read(a));
            }
        }
        pg_sys::SPI_finish();
        (processed, first)
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
    if front.offsets.is_some() {
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
    if table.is_null() || unsafe { (*relation).rd_id } != front.source {
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
    let last = front.columns.iter().map(|c| c.0).max().unwrap_or(1);
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
    let mut params: Vec<pg_sys::Datum> = Vec::with_capacity(front.columns.len() + 2);
    let mut param_nulls: Vec<u8> = Vec::with_capacity(front.columns.len() + 2);
    for (i, (attnum, type_oid)) in front.columns.iter().enumerate() {
        let at = (*attnum - 1) as usize;
        // SAFETY: `at` is within the descriptor's attributes.
        let current = unsafe { pgrx::PgTupleDesc::from_pg_unchecked(desc) }
            .get(at)
            .map(|a| a.type_oid().value());
        if current != Some(*type_oid) {
            return None;
        }
        if nulls[at] && (i == front.event_time || (front.ledger && Some(i) == front.event_id)) {
            return None;
        }
        params.push(values[at]);
        param_nulls.push(if nulls[at] { b'n' } else { b' ' });
    }
    let micros = params[front.event_time].value() as i64;
    let window = window_of(&front.window, micros)?;
    params.splice(
        0..0,
        [
            pg_sys::Datum::from(window.start),
            pg_sys::Datum::from(window.end),
        ],
    );
    param_nulls.splice(0..0, [b' ', b' ']);
    as_owner(front.owner, || {
        if run_plan(front.on_time, &params, &param_nulls).0 > 0 {
            return Some(Wrote::Accepted);
        }
        // Nothing written: the id was in the ledger, or the watermark closed the window (then
        // the PL/pgSQL function takes the statement). Without a ledger there are no
        // duplicates, so the window was closed: nothing more to ask.
        if !front.ledger {
            return None;
        }
        let (_, open) = run_plan(front.window_open, &params[1..2], b" ");
        if open != Some(true) {
            return None;
        }
        run_plan(front.duplicates, &[pg_sys::Datum::from(1i64)], b" ");
        Some(Wrote::Duplicate)
    })
}

/// The one window of a row at `micros`, computed by the code of the SQL assignment functions
/// (`_eventtime.tumble_start`, `_eventtime.calendar`); `None` when it has none, or, for a
/// calendar spec, not exactly one.
fn window_of(spec: &WindowSpec, micros: i64) -> Option<Window> {
    match spec {
        WindowSpec::Tumbling { size, origin } => {
            WindowSpec::tumbling_window(*size, *origin, micros).ok()
        }
        WindowSpec::Calendar {
            size,
            slide,
            origin,
            time_zone,
        } => {
            let windows = WindowSpec::calendar_windows(
                *size,
                *slide,
                *origin,
                &PgZone::new(time_zone),
                micros,
            )
            .ok()?;
            match windows[..] {
                [w] => Some(w),
                _ => None,
            }
        }
        _ => None,
    }
}
