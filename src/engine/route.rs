//! Routing: which statements the engine takes, and the pass over a statement's rows that classifies,
//! dedups (by offsets or by the ledger, `dedup`), groups (`Groups`) and writes them.
//!
//! The trigger's front (`api::front`) calls [`Engine::write`] first for a statement of several
//! rows; `None` means nothing was written, and the front goes on: a statement of one row to its
//! own path for one row on time, then, when that path wrote nothing (a late or refused row, a
//! NULL id, offsets to claim), to the engine again, and last to the PL/pgSQL function. What the engine keeps for a pipeline, for the backend's life, is an
//! [`Engine`]; what it reads from a row, shared with the front, an [`Input`].

use std::collections::HashMap;

use pgrx::prelude::*;

use super::acc::{self, Accumulator, Storage};
use super::refused::{Refuse, Refused};
use super::{dedup, Groups, Key, Plan};
use crate::core::aggregates::ResolvedAgg;
use crate::core::landing::WindowState;
use crate::core::window::{Window, WindowSpec};
use crate::pg::catalog;
use crate::pg::plans::{keep_plan, run_plan, run_plan_text, run_plan_timestamp, run_plan_with};
use crate::pg::security::{as_catalog_owner, as_owner};
use crate::pg::zone::PgZone;

/// A pipeline's rows as its trigger reads them, and what the front and the engine share.
pub struct Input {
    pub pipeline: i32,
    /// The pipeline's name, for its announcements.
    pub name: String,
    /// Allowed lateness, in microseconds: which windows are fired rather than purged.
    pub lateness: i64,
    /// The source table, whose rows the transition table holds.
    pub source: pg_sys::Oid,
    pub owner: pg_sys::Oid,
    /// Tumbling, or calendar periods with a slide of their size: one window per row.
    pub window: WindowSpec,
    /// Attribute number and type of each of `PipelineDef::front_columns`, in order.
    pub columns: Vec<(i16, pg_sys::Oid)>,
    /// Indexes into `columns`.
    pub event_time: usize,
    pub event_id: Option<usize>,
    /// Whether duplicates are told by the pipeline's own ledger (`PipelineDef::ledger`); with a
    /// unique index of the source on the event id, every row the trigger sees is new.
    pub ledger: bool,
    /// Whether the pipeline has source offsets (SPEC §12): their claim is the engine's or the
    /// PL/pgSQL function's, never that of a single row's statement.
    pub offsets: bool,
    /// The insert into `duplicate_counts`, kept as the owner.
    pub duplicates: pg_sys::SPIPlanPtr,
}

/// What the engine keeps for one pipeline: its plan of keys, accumulators and writes, the state
/// table (locked before the watermark is read), the read of the watermark, and, with offsets,
/// how it reads and claims them.
pub struct Engine {
    plan: Plan,
    state: pg_sys::Oid,
    watermark: pg_sys::SPIPlanPtr,
    offsets: Option<Offsets>,
    refuse: Refuse,
}

/// What the engine wrote for a statement: rows counted in open windows, in fired ones (late),
/// refused rows, and duplicates (by offset or by the ledger).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub accepted: i64,
    pub late: i64,
    pub refused: i64,
    pub duplicates: i64,
}

impl Engine {
    /// The engine of pipeline `p`, whose trigger reads `names`, of the source's `attributes`
    /// (number, type, collation); `None` when it cannot take the pipeline's statements: a key or
    /// aggregate needs what the engine does not have, or offsets it cannot read.
    pub fn new(
        p: &catalog::Pipeline,
        names: &[&str],
        attributes: &[(i16, pg_sys::Oid, pg_sys::Oid)],
    ) -> Option<Engine> {
        let (plan, state, watermark, refuse) = engine_plan(p, names, attributes)?;
        let mut engine = Engine {
            plan,
            state,
            watermark,
            offsets: None,
            refuse,
        };
        if let Some(o) = &p.def.offsets {
            match front_offsets(p, o, names, attributes) {
                Some(o) => engine.offsets = Some(o),
                None => {
                    engine.free();
                    return None;
                }
            }
        }
        Some(engine)
    }

    /// Frees the plans the engine kept; it is not used after.
    pub fn free(&self) {
        for plan in [
            self.plan.write,
            self.plan.late_write,
            self.watermark,
            self.refuse.insert,
        ]
        .into_iter()
        .chain(self.plan.ledger.as_ref().map(|l| l.insert))
        .chain(self.offsets.as_ref().map(|o| o.claim))
        {
            // SAFETY: plans kept by `keep_plan` that nothing else holds.
            unsafe { pg_sys::SPI_freeplan(plan) };
        }
    }

    /// Writes a statement of at least `least` rows, as [`write_groups`] tells: the front asks
    /// for statements of several rows first, and for one of a single row when its own path for
    /// one row on time cannot take it (a late or refused row, or offsets to claim).
    ///
    /// # Safety
    /// `trigdata` is the trigger call's, of a trigger on a table of `input`'s pipeline.
    pub unsafe fn write(
        &self,
        input: &Input,
        trigdata: *mut pg_sys::TriggerData,
        least: i64,
    ) -> Option<Counts> {
        // SAFETY: as the caller promises.
        unsafe { write_groups(self, input, trigdata, least) }
    }
}

/// The engine's view of pipeline `p` (see `engine`), whose front reads `names`, of the source's
/// `attributes` (number, type, collation): keys, accumulators, the groups statement kept as the
/// owner, the state table, the read of the watermark and the write of refused rows. `None` when
/// a key or aggregate needs what the engine does not have (a type without hash function, a cast
/// by text), or a type has no array type.
fn engine_plan(
    p: &catalog::Pipeline,
    names: &[&str],
    attributes: &[(i16, pg_sys::Oid, pg_sys::Oid)],
) -> Option<(Plan, pg_sys::Oid, pg_sys::SPIPlanPtr, Refuse)> {
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
    // The source's row type, whose array the write of refused rows takes.
    // SAFETY: syscache lookups.
    let (row_type, rows_type) = unsafe {
        let t = pg_sys::get_rel_type_id(p.source_oid);
        (t, pg_sys::get_array_type(t))
    };
    if row_type == pg_sys::InvalidOid || rows_type == pg_sys::InvalidOid || p.def.refused_doc_once {
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
            let order: Vec<(usize, pg_sys::Oid, acc::Fn)> = keys
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
    let refused_sql = p.def.ingest_refused_rows_statement();
    let (write, late_write, watermark, refuse, insert) = as_owner(p.owner, || {
        (
            keep_plan(&groups_sql, &array_types),
            keep_plan(&late_sql, &late_types),
            keep_plan(&watermark_sql, &[]),
            keep_plan(&refused_sql, &[rows_type, pg_sys::TIMESTAMPTZOID]),
            ledger
                .as_ref()
                .map(|(sql, types, _, _)| keep_plan(sql, types)),
        )
    });
    let ledger = ledger
        .zip(insert)
        .map(|((_, _, id, order), insert)| dedup::Ledger {
            id,
            order,
            insert,
            front: attributes.iter().map(|a| Storage::of(a.1)).collect(),
        });
    Some((
        Plan {
            keys,
            accs,
            write,
            late_write,
            columns,
            ledger,
        },
        state,
        watermark,
        Refuse {
            insert: refuse,
            row: Storage::of(row_type),
        },
    ))
}

/// The btree comparison function of type `t`'s default operator class, if it has one.
fn order_fn(t: pg_sys::Oid) -> Option<acc::Fn> {
    // SAFETY: a type cache lookup of an existing type.
    let cmp =
        unsafe { (*pg_sys::lookup_type_cache(t, pg_sys::TYPECACHE_CMP_PROC as i32)).cmp_proc };
    (cmp != pg_sys::InvalidOid).then(|| acc::Fn::new(cmp))
}

/// How the engine reads and claims the offsets `o` of pipeline `p`; `None` when the source
/// column's type is not text, varchar or an integer (whose text the engine writes as `::text`
/// does), and then the pipeline has no engine.
fn front_offsets(
    p: &catalog::Pipeline,
    o: &crate::core::model::Offsets,
    names: &[&str],
    attributes: &[(i16, pg_sys::Oid, pg_sys::Oid)],
) -> Option<Offsets> {
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
    Some(Offsets {
        column,
        offset_type: attributes[column].1,
        source,
        claim,
    })
}

/// Writes a statement of at least `least` rows (and at least one) by the engine (see `engine`)
/// when the front has one for the pipeline, under READ COMMITTED, on the source table itself, and every row has an event
/// time with a window (open against the watermark, fired within its grace, or past it: a refused
/// row), and, with offsets, an offset and a source, rising through the statement per source;
/// returns what it wrote, or `None`, having written nothing, when the statement goes to the
/// PL/pgSQL function.
///
/// # Safety
/// `trigdata` is the trigger call's.
unsafe fn write_groups(
    engine: &Engine,
    input: &Input,
    trigdata: *mut pg_sys::TriggerData,
    least: i64,
) -> Option<Counts> {
    let (state, watermark_plan) = (&engine.state, &engine.watermark);
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
            || (*relation).rd_id != input.source
            || pg_sys::tuplestore_tuple_count(table) < least.max(1)
        {
            return None;
        }
    }
    // SAFETY: the descriptor of the open relation.
    let desc = unsafe { (*relation).rd_att };
    for (attnum, type_oid) in &input.columns {
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
    as_owner(input.owner, || {
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
                engine, input, table, pointer, slot, watermark, group_cx, row, &run,
            );
            pg_sys::ExecDropSingleTupleTableSlot(slot);
            let counts = result?;
            if counts.duplicates > 0 {
                run_plan(
                    input.duplicates,
                    &[pg_sys::Datum::from(counts.duplicates)],
                    b" ",
                );
            }
            crate::pg::announce::announce(
                &input.name,
                crate::pg::announce::Versions {
                    late: versions.get(),
                    ..Default::default()
                },
                watermark,
            );
            Some(counts)
        }
    })
}

/// With offsets: the front columns of a row's offset and source, the claim of a statement's
/// offsets, a kept plan.
struct Offsets {
    /// Index among the front columns, and the offset's type (int2, int4 or int8).
    column: usize,
    offset_type: pg_sys::Oid,
    /// Index and type of the source column (text, varchar or an integer): `None` for one source.
    source: Option<(usize, pg_sys::Oid)>,
    claim: pg_sys::SPIPlanPtr,
}

impl Offsets {
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

/// The grouping of a statement's rows and the writes of its groups and refused rows (see
/// [`write_groups`]), or `None`, having written nothing.
///
/// # Safety
/// As [`scan`]; `group_cx` and `row` are memory contexts that outlive the call.
#[allow(clippy::too_many_arguments)]
unsafe fn group_rows(
    engine: &Engine,
    input: &Input,
    table: *mut pg_sys::Tuplestorestate,
    pointer: i32,
    slot: *mut pg_sys::TupleTableSlot,
    watermark: Option<i64>,
    group_cx: pg_sys::MemoryContext,
    row: pg_sys::MemoryContext,
    run: &dyn Fn(pg_sys::SPIPlanPtr, &[pg_sys::Datum], bool),
) -> Option<Counts> {
    let plan = &engine.plan;
    // SAFETY: as the caller promises.
    unsafe {
        let mut groups = Groups::new(plan, group_cx);
        let refused_cx = pgrx::PgMemoryContexts::new("pg_eventtime refused rows");
        let mut refused = Refused::new(&engine.refuse, refused_cx.value());
        let add = |groups: &mut Groups,
                   values: &[pg_sys::Datum],
                   nulls: &[bool],
                   w: Window,
                   state: WindowState| {
            let old = pg_sys::MemoryContextSwitchTo(row);
            groups.add(values, nulls, w.start, w.end, state == WindowState::Fired);
            pg_sys::MemoryContextSwitchTo(old);
        };
        let reset = |i: usize| {
            if (i + 1).is_multiple_of(super::rows_per_reset()) {
                pg_sys::MemoryContextReset(row);
            }
        };
        // The counts of what was written, once every write is done.
        let counts = |groups: &Groups, refused: &Refused, counted: i64, duplicates: i64| Counts {
            accepted: counted - groups.late_rows - refused.written,
            late: groups.late_rows,
            refused: refused.written,
            duplicates,
        };
        // Every pass reads the whole transition table from its start (see [`scan`]).
        let scan_rows = |f: &mut RowFn<'_>| scan(input, table, pointer, slot, watermark, f);
        let mut buf = Vec::new();
        // With the pipeline's own ledger, the rows are read (copied) before anything is written;
        // then their entries go into the ledger and the kept rows are grouped or refused (see
        // `engine::dedup`).
        let rows_cx = plan
            .ledger
            .as_ref()
            .map(|_| pgrx::PgMemoryContexts::new("pg_eventtime ledger rows"));
        let mut rows = plan
            .ledger
            .as_ref()
            .zip(rows_cx.as_ref())
            .map(|(l, cx)| dedup::Rows::new(plan, l, cx.value()));
        let mut write_rows = |rows: &dedup::Rows, skipped: Option<&[bool]>| -> Counts {
            let mut counted = 0i64;
            for (r, kept) in rows.kept(skipped).into_iter().enumerate() {
                if !kept {
                    continue;
                }
                // Entries are written: past the bound the groups are written, not handed over.
                let (values, nulls, (w, state)) = rows.row(r);
                match rows.refused_row(r) {
                    Some(doc) => refused.hold(doc, watermark),
                    None => {
                        if groups.full() {
                            groups.flush(run);
                        }
                        add(&mut groups, values, nulls, w, state);
                    }
                }
                counted += 1;
                reset(r);
            }
            groups.flush(run);
            refused.flush(watermark);
            counts(&groups, &refused, counted, rows.len() as i64 - counted)
        };
        // With offsets, a first pass checks every row and scans the offsets (and, with the
        // ledger, copies the rows); the claim then moves them (nothing is written before it), and
        // the rows at or below their source's offset committed before are duplicates, whatever
        // their ids.
        let committed: Option<HashMap<Vec<u8>, i64>> = match &engine.offsets {
            None => None,
            Some(o) => {
                let mut seen = crate::api::offsets::Scan::default();
                let ok = scan_rows(&mut |_, values, nulls, w| {
                    let source_null = o.source.is_some_and(|(i, _)| nulls[i]);
                    let Some(w) = w else { return false };
                    if nulls[o.column] || source_null {
                        return false;
                    }
                    if let Some(rows) = rows.as_mut() {
                        if rows.full() {
                            return false;
                        }
                        rows.push(values, nulls, w, slot);
                    }
                    seen.add(o.source(values, &mut buf), o.offset(values[o.column]));
                    true
                });
                let sources = seen.result();
                if !ok
                    || rows.as_ref().is_some_and(|r| r.full())
                    || sources.iter().any(|s| !s.rising)
                {
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
        if let (Some(o), Some(committed)) = (&engine.offsets, &committed) {
            let at_or_below = |values: &[pg_sys::Datum], buf: &mut Vec<u8>| {
                let off = o.offset(values[o.column]);
                !committed.is_empty()
                    && committed
                        .get(o.source(values, buf))
                        .is_some_and(|&c| off <= c)
            };
            if let Some(rows) = &rows {
                let skipped: Vec<bool> = (0..rows.len())
                    .map(|r| at_or_below(rows.row(r).0, &mut buf))
                    .collect();
                return Some(write_rows(rows, Some(&skipped)));
            }
            // Every row checked: one pass, groups and refused rows written whenever they reach
            // their bound.
            let (mut counted, mut duplicates) = (0i64, 0i64);
            scan_rows(&mut |i, values, nulls, w| {
                let (w, state) = w.expect("checked by the first pass");
                if at_or_below(values, &mut buf) {
                    duplicates += 1;
                } else if state == WindowState::Purged {
                    refused.hold_slot(slot, watermark);
                    counted += 1;
                } else {
                    if groups.full() {
                        groups.flush(run);
                    }
                    add(&mut groups, values, nulls, w, state);
                    counted += 1;
                }
                reset(i);
                true
            });
            groups.flush(run);
            refused.flush(watermark);
            return Some(counts(&groups, &refused, counted, duplicates));
        }
        if let Some(rows) = rows.as_mut() {
            let read = scan_rows(&mut |_, values, nulls, w| match w {
                Some(w) if !rows.full() => {
                    rows.push(values, nulls, w, slot);
                    true
                }
                _ => false,
            });
            if !read || rows.full() {
                return None;
            }
            return Some(write_rows(rows, None));
        }
        // One pass: every row must be one the engine takes before anything is written, and the
        // groups and refused rows must stay within their bounds. A statement of more groups goes
        // to SQL, whose grouping spills to disk past `work_mem`: written in parts, each key of
        // such a statement would be upserted once per part it has rows in (twice as many writes
        // for keys seen twice), where SQL writes each group once.
        let ok = scan_rows(&mut |i, values, nulls, w| {
            let Some((w, state)) = w else { return false };
            if state == WindowState::Purged {
                if refused.full() {
                    return false;
                }
                refused.push_slot(slot);
            } else {
                if groups.full() {
                    return false;
                }
                add(&mut groups, values, nulls, w, state);
            }
            reset(i);
            true
        });
        if !ok {
            return None;
        }
        groups.flush(run);
        refused.flush(watermark);
        let rows = pg_sys::tuplestore_tuple_count(table);
        Some(counts(&groups, &refused, rows, 0))
    }
}

/// What [`scan`] calls for each row: its index, the front columns' values and NULLs, and its
/// window with that window's state (`None`: no event time, or no window); false stops the scan.
type RowFn<'a> =
    dyn FnMut(usize, &[pg_sys::Datum], &[bool], Option<(Window, WindowState)>) -> bool + 'a;

/// Reads the transition table `table` from its start through read pointer `pointer`, and calls
/// `f` with each row's index, the front columns' values and NULLs, and its window when it has an
/// event time with a window, with that window's state against `watermark` and `lateness` (the
/// landing rule, `core::landing::window_state`: open, fired within its grace, or past it); the
/// row itself is in `slot` during the call. Stops when `f` returns false, and returns whether it
/// read every row.
///
/// # Safety
/// `table` is the statement's transition table, `pointer` a read pointer of it, `slot` a slot
/// of the source's descriptor; the values passed to `f` are valid during the call.
unsafe fn scan(
    input: &Input,
    table: *mut pg_sys::Tuplestorestate,
    pointer: i32,
    slot: *mut pg_sys::TupleTableSlot,
    watermark: Option<i64>,
    f: &mut RowFn<'_>,
) -> bool {
    let last = input.columns.iter().map(|c| c.0).max().unwrap_or(1);
    let mut values = vec![pg_sys::Datum::from(0); input.columns.len()];
    let mut nulls = vec![false; input.columns.len()];
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
            for (j, (attnum, _)) in input.columns.iter().enumerate() {
                let at = (*attnum - 1) as usize;
                values[j] = *(*slot).tts_values.add(at);
                nulls[j] = *(*slot).tts_isnull.add(at);
            }
            let w = (!nulls[input.event_time])
                .then(|| window_of(&input.window, values[input.event_time].value() as i64))
                .flatten()
                .map(|w| {
                    (
                        w,
                        crate::core::landing::window_state(w.end, input.lateness, watermark),
                    )
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

/// The one window of a row at `micros`, computed by the code of the SQL assignment functions
/// (`_eventtime.tumble_start`, `_eventtime.calendar`); `None` when it has none, or, for a
/// calendar spec, not exactly one.
pub fn window_of(spec: &WindowSpec, micros: i64) -> Option<Window> {
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
