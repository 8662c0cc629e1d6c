//! Exact dedup by the pipeline's own ledger, for the engine.
//!
//! A statement of at most [`MAX_ROWS`] rows (and `work_mem` of their values) is read once, its
//! values copied (and the whole row of each row past its window's grace, whose id goes into the
//! ledger as the SQL path's does, so that a redelivered refused row is a duplicate). Larger ones go to SQL, whose sort of the
//! whole statement and plain insert into new windows cost less for a bulk load: inserted in parts
//! of 10,000, a `COPY` of 1,000,000 rows with ids took twice its floor (`docs/benchmark.md`), each
//! part's entries spread over the whole index. The rows' (window start, keys, event id) go into the
//! ledger with one kept statement, `INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING
//! RETURNING` (`PipelineDef::ingest_ledger_statement`), in the ledger index's order (window
//! start, keys, id, by their types' btree comparison in the columns' collations, NULL keys last,
//! as the SQL path orders them; a stable sort, so of rows equal by that comparison the first in
//! the statement is the first inserted). The insert waits for a concurrent transaction that
//! inserted the same entry, as the SQL path does, and returns the entries it inserted in the
//! order it inserted them: a subsequence of the rows'. When every entry came back (the common
//! case) every row is kept. Otherwise a row is kept when the next entry returned has its values'
//! bytes: each entry returned holds the values of one row, and of two rows with the
//! same bytes the second conflicts with the first, so a row and the next entry have the same
//! bytes only when the entry is the row's. Rows with a NULL id are kept with no entry (never
//! duplicates, as NULLs in a unique index).

use pgrx::pg_sys;

use super::acc::{Fn, Storage};
use super::refused::Refused;
use super::{array, Key, Plan};
use crate::core::landing::WindowState;
use crate::core::window::Window;

/// Rows of the largest statement whose ids the engine inserts into the ledger.
pub const MAX_ROWS: usize = 10_000;

/// The ledger as the engine writes it.
pub struct Ledger {
    /// The event id.
    pub id: Key,
    /// The keys' and the id's front columns, collations and btree comparison functions, in the
    /// ledger index's order (after the window start): the order of the inserts.
    pub order: Vec<(usize, pg_sys::Oid, Fn)>,
    /// `PipelineDef::ingest_ledger_statement`, kept as the pipeline's owner.
    pub insert: pg_sys::SPIPlanPtr,
    /// Storage of every front column, to copy a statement's rows.
    pub front: Vec<Storage>,
}

/// The rows of a statement, their values copied into a context of their own.
pub struct Rows<'a> {
    plan: &'a Plan,
    ledger: &'a Ledger,
    cx: pg_sys::MemoryContext,
    values: Vec<pg_sys::Datum>,
    nulls: Vec<bool>,
    windows: Vec<(Window, WindowState)>,
    /// The source's row of each row past its window's grace, copied (refused unless a
    /// duplicate); none for the others.
    refused: Vec<Option<pg_sys::Datum>>,
}

impl<'a> Rows<'a> {
    /// # Safety
    /// `cx` is a memory context that outlives the rows.
    pub unsafe fn new(plan: &'a Plan, ledger: &'a Ledger, cx: pg_sys::MemoryContext) -> Rows<'a> {
        Rows {
            plan,
            ledger,
            cx,
            values: Vec::new(),
            nulls: Vec::new(),
            windows: Vec::new(),
            refused: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.windows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Whether the rows are past their bound: more than [`MAX_ROWS`] rows, or `work_mem` of values.
    pub fn full(&self) -> bool {
        // SAFETY: reads the size of a live memory context and a backend setting.
        self.len() > MAX_ROWS
            || unsafe { pg_sys::MemoryContextMemAllocated(self.cx, true) }
                > unsafe { pg_sys::work_mem } as usize * 1024
    }

    /// Adds a row, its front columns' values copied into the rows' context, with its window and
    /// that window's state; of a row past its window's grace, the whole row in `slot` too.
    ///
    /// # Safety
    /// `values` are datums of the front columns' types, valid while this runs; `slot` holds the
    /// row, of the source's descriptor.
    pub unsafe fn push(
        &mut self,
        values: &[pg_sys::Datum],
        nulls: &[bool],
        w: (Window, WindowState),
        slot: *mut pg_sys::TupleTableSlot,
    ) {
        // SAFETY: as the caller promises; the copy lives in the rows' context.
        self.refused
            .push((w.1 == WindowState::Purged).then(|| unsafe { Refused::copy(slot, self.cx) }));
        // SAFETY: as the caller promises; the copies live in the rows' context.
        unsafe {
            let old = pg_sys::MemoryContextSwitchTo(self.cx);
            for ((v, null), s) in values.iter().zip(nulls).zip(&self.ledger.front) {
                self.values.push(if *null { *v } else { s.copy(*v) });
            }
            pg_sys::MemoryContextSwitchTo(old);
        }
        self.nulls.extend_from_slice(nulls);
        self.windows.push(w);
    }

    /// The copied source row of row `r` when its window is past its grace.
    pub fn refused_row(&self, r: usize) -> Option<pg_sys::Datum> {
        self.refused[r]
    }

    /// Row `r`: its front columns' values and NULLs, its window and that window's state.
    pub fn row(&self, r: usize) -> (&[pg_sys::Datum], &[bool], (Window, WindowState)) {
        let n = self.ledger.front.len();
        (
            &self.values[r * n..(r + 1) * n],
            &self.nulls[r * n..(r + 1) * n],
            self.windows[r],
        )
    }

    /// The window start of row `r`.
    fn start(&self, r: usize) -> i64 {
        self.windows[r].0.start
    }

    /// Writes the entries of the rows not `skipped` (a duplicate by its offset, with offsets)
    /// into the ledger and returns, per row, whether it is kept (not skipped, its id new or NULL)
    /// rather than a duplicate.
    ///
    /// # Safety
    /// Runs the kept insert through SPI, as the pipeline's owner (the caller's identity).
    pub unsafe fn kept(&self, skipped: Option<&[bool]>) -> Vec<bool> {
        let ledger = self.ledger;
        let id = ledger.id.column;
        let skip = |r: usize| skipped.is_some_and(|s| s[r]);
        let mut kept: Vec<bool> = (0..self.len()).map(|r| !skip(r)).collect();
        let mut order: Vec<usize> = (0..self.len())
            .filter(|&r| !skip(r) && !self.row(r).1[id])
            .collect();
        if order.is_empty() {
            return kept;
        }
        // The ledger index's order: window start, keys, id, by their types' btree comparison in
        // the columns' collations, NULL keys last (as `ORDER BY`). Stable: equal rows keep the
        // statement's order.
        let cmp = |a: &usize, b: &usize| {
            let (va, na, _) = self.row(*a);
            let sa = self.start(*a);
            let (vb, nb, _) = self.row(*b);
            let sb = self.start(*b);
            sa.cmp(&sb).then_with(|| {
                for (c, collation, f) in &ledger.order {
                    let o = match (na[*c], nb[*c]) {
                        (true, true) => std::cmp::Ordering::Equal,
                        (true, false) => std::cmp::Ordering::Greater,
                        (false, true) => std::cmp::Ordering::Less,
                        // SAFETY: both values are of the column's type, `f` its comparison.
                        (false, false) => unsafe {
                            (f.call2(*collation, va[*c], vb[*c]).value() as i32).cmp(&0)
                        },
                    };
                    if o != std::cmp::Ordering::Equal {
                        return o;
                    }
                }
                std::cmp::Ordering::Equal
            })
        };
        order.sort_by(cmp);
        let arrays_cx = pgrx::PgMemoryContexts::new("pg_eventtime ledger arrays");
        let columns = self.columns();
        // SAFETY: the arrays are built in `arrays_cx` from the rows' values, which outlive them;
        // the plan was kept with as many parameters of these element types; the result is read
        // before the SPI connection closes.
        unsafe {
            let old = pg_sys::MemoryContextSwitchTo(arrays_cx.value());
            let mut arrays: Vec<pg_sys::Datum> = columns
                .iter()
                .map(|(s, at)| {
                    let (mut vs, mut ns): (Vec<pg_sys::Datum>, Vec<bool>) = order
                        .iter()
                        .map(|o| {
                            let (values, nulls, _) = self.row(*o);
                            let start = self.start(*o);
                            match at {
                                None => (pg_sys::Datum::from(start), false),
                                Some(c) => (values[*c], nulls[*c]),
                            }
                        })
                        .unzip();
                    array(&mut vs, &mut ns, s)
                })
                .collect();
            pg_sys::MemoryContextSwitchTo(old);
            let nulls = vec![b' ' as std::ffi::c_char; arrays.len()];
            pg_sys::SPI_connect();
            let rc = pg_sys::SPI_execute_plan(
                ledger.insert,
                arrays.as_mut_ptr(),
                nulls.as_ptr(),
                false,
                0,
            );
            if rc < 0 {
                pgrx::error!("_eventtime: a pipeline statement failed ({rc})");
            }
            let processed = pg_sys::SPI_processed as usize;
            if processed < order.len() {
                let table = pg_sys::SPI_tuptable;
                let mut t = 0usize;
                for o in &order {
                    let (values, nulls, _) = self.row(*o);
                    let start = self.start(*o);
                    let same = t < processed
                        && columns.iter().enumerate().all(|(j, (s, at))| {
                            let mut null = false;
                            let got = pg_sys::SPI_getbinval(
                                *(*table).vals.add(t),
                                (*table).tupdesc,
                                j as i32 + 1,
                                &mut null,
                            );
                            let (want, want_null) = match at {
                                None => (pg_sys::Datum::from(start), false),
                                Some(c) => (values[*c], nulls[*c]),
                            };
                            match (null, want_null) {
                                (true, true) => true,
                                (false, false) => same_bytes(got, want, s),
                                _ => false,
                            }
                        });
                    if same {
                        t += 1;
                    } else {
                        kept[*o] = false;
                    }
                }
            }
            pg_sys::SPI_finish();
        }
        drop(arrays_cx);
        kept
    }

    /// The insert's columns: their storage, and the front column each comes from (`None`: the
    /// window start).
    fn columns(&self) -> Vec<(Storage, Option<usize>)> {
        let mut out = vec![(Storage::of(pg_sys::TIMESTAMPTZOID), None)];
        out.extend(self.plan.keys.iter().map(|k| (k.storage, Some(k.column))));
        out.push((self.ledger.id.storage, Some(self.ledger.id.column)));
        out
    }
}

/// Whether `a` and `b`, of a type stored as `s`, have the same bytes (once detoasted), as
/// PostgreSQL's `datum_image_eq` tells.
///
/// # Safety
/// `a` and `b` are datums of that type.
unsafe fn same_bytes(a: pg_sys::Datum, b: pg_sys::Datum, s: &Storage) -> bool {
    if s.byval {
        return a == b;
    }
    // SAFETY: as the caller promises; varlenas detoasted (packed) before their bytes are read.
    unsafe {
        let bytes = |d: pg_sys::Datum| -> &[u8] {
            match s.len {
                -1 => {
                    let v = pg_sys::pg_detoast_datum_packed(d.cast_mut_ptr());
                    std::slice::from_raw_parts(
                        pgrx::varlena::vardata_any(v) as *const u8,
                        pgrx::varlena::varsize_any_exhdr(v),
                    )
                }
                -2 => std::ffi::CStr::from_ptr(d.cast_mut_ptr()).to_bytes(),
                n => std::slice::from_raw_parts(d.cast_mut_ptr::<u8>(), n as usize),
            }
        };
        bytes(a) == bytes(b)
    }
}
