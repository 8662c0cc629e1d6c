//! The ingest engine: a statement's rows grouped by (key, window) in the trigger's own code.
//!
//! For a pipeline with a front (one window per row, computed from the row; no watermark lag), a
//! statement of several rows whose rows all have a window (open, fired within its grace: late
//! rows, or past it: refused rows) is grouped here instead of by the SQL statement for many
//! rows: the front reads the transition table once, computes each row's window with the model's
//! code, groups the rows by key and window in a hash table whose keys are hashed and compared
//! with their types' own functions in the columns' collations (as `GROUP BY` does, NULL a group
//! of its own), adds each row to its group's accumulators (`acc`), and writes the groups of open
//! windows to this backend's state rows with one kept statement taking them as arrays
//! (`PipelineDef::ingest_groups_statement`), whose sums are checked as every append's, and those
//! of fired windows to their late rows and late versions with another
//! (`PipelineDef::ingest_late_groups_statement`). Rows past their window's grace are kept whole
//! and written as refused rows by a third (`refused`). Its memory is bounded whatever the
//! statement's size: a statement of more than [`FLUSH_GROUPS`] groups, or of more than
//! `work_mem` of their keys and values (of refused rows: [`refused::MAX_ROWS`], or `work_mem`),
//! goes to SQL before anything is written (its `GROUP BY` spills to disk past `work_mem`; written
//! in parts here, a key of such a statement would be upserted once per part), except with
//! offsets, claimed before the grouping, and with the pipeline's own ledger of event ids, whose
//! entries are inserted before the grouping (`dedup`): their groups and refused rows are written
//! whenever they reach the bound.
//!
//! The first row it cannot take (no event time, no window, a key or aggregate type it has no
//! functions for) ends the attempt before anything is written: the statement goes
//! to the PL/pgSQL function, which handles every case. The watermark is read after the state
//! table's `ROW EXCLUSIVE` lock, as the ingest statements' plans take it before their snapshot,
//! so it is the latest until the transaction ends (see *Locks* in the design note).

pub mod acc;
pub mod dedup;
pub mod refused;
pub mod route;

use std::collections::HashMap;

use pgrx::pg_sys;

use acc::{Accumulator, State, Storage};

/// Groups held in memory: a statement of more goes to SQL (with offsets: is written in parts).
pub const FLUSH_GROUPS: usize = 50_000;

/// Rows between two resets of the memory the casts and sums of rows allocate.
const ROWS_PER_RESET: usize = 1_000;

/// A key column as the engine groups by it.
pub struct Key {
    /// Index among the columns the front reads.
    pub column: usize,
    pub storage: Storage,
    pub collation: pg_sys::Oid,
    hash: acc::Fn,
    eq: acc::Fn,
}

impl Key {
    /// The key read from front column `column` of type `type_oid`; `None` when the type has no
    /// hash function (then the engine leaves the pipeline's statements to SQL).
    pub fn resolve(column: usize, type_oid: pg_sys::Oid, collation: pg_sys::Oid) -> Option<Key> {
        // SAFETY: a type cache lookup of an existing type.
        let (hash, eq) = unsafe {
            let t = pg_sys::lookup_type_cache(
                type_oid,
                (pg_sys::TYPECACHE_HASH_PROC | pg_sys::TYPECACHE_EQ_OPR) as i32,
            );
            ((*t).hash_proc, (*t).eq_opr)
        };
        if hash == pg_sys::InvalidOid || eq == pg_sys::InvalidOid {
            return None;
        }
        // SAFETY: a syscache lookup of an existing operator.
        let eq_fn = unsafe { pg_sys::get_opcode(eq) };
        Some(Key {
            column,
            storage: Storage::of(type_oid),
            collation,
            hash: acc::Fn::new(hash),
            eq: acc::Fn::new(eq_fn),
        })
    }

    /// The hash of this key in a row of front columns `values` and `nulls` (NULL: a fixed hash).
    ///
    /// # Safety
    /// `values` are datums of the front columns' types.
    pub unsafe fn hash_of(&self, values: &[pg_sys::Datum], nulls: &[bool]) -> u64 {
        if nulls[self.column] {
            0x5bd1_e995u64
        } else {
            // SAFETY: the value is of the key's type.
            unsafe { self.hash.call1(self.collation, values[self.column]).value() as u32 as u64 }
        }
    }
}

/// A one-dimensional array of `values` and `nulls`, of element type `s`, in the current memory
/// context.
///
/// # Safety
/// `values` are datums of type `s`, as many as `nulls`.
pub unsafe fn array(
    values: &mut [pg_sys::Datum],
    nulls: &mut [bool],
    s: &acc::Storage,
) -> pg_sys::Datum {
    let mut dims = [values.len() as i32];
    let mut lbs = [1i32];
    // SAFETY: as the caller promises.
    unsafe {
        pg_sys::Datum::from(pg_sys::construct_md_array(
            values.as_mut_ptr(),
            nulls.as_mut_ptr(),
            1,
            dims.as_mut_ptr(),
            lbs.as_mut_ptr(),
            s.oid,
            s.len as i32,
            s.byval,
            s.align,
        ))
    }
}

/// The engine's view of a pipeline, kept by the front.
pub struct Plan {
    pub keys: Vec<Key>,
    pub accs: Vec<Accumulator>,
    /// The groups statement and the element types of its arrays.
    pub write: pg_sys::SPIPlanPtr,
    /// The statement of the groups of fired windows (`PipelineDef::ingest_late_groups_statement`):
    /// the same arrays, then the watermark.
    pub late_write: pg_sys::SPIPlanPtr,
    pub columns: Vec<Storage>,
    /// With the pipeline's own ledger of event ids: how the engine writes it.
    pub ledger: Option<dedup::Ledger>,
}

/// The hash of a group, already mixed: the table uses it as it is.
#[derive(Default)]
struct Identity(u64);

impl std::hash::Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | *b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// No group in a chain after this one.
const END: u32 = u32::MAX;

/// The groups of a statement so far, kept flat: group `g`'s keys are `keys[g * nkeys ..]`, its
/// accumulators `states[g * naccs ..]`; groups of one hash are chained through `next`.
pub struct Groups<'a> {
    plan: &'a Plan,
    by_hash: HashMap<u64, u32, std::hash::BuildHasherDefault<Identity>>,
    next: Vec<u32>,
    starts: Vec<i64>,
    ends: Vec<i64>,
    rows: Vec<i64>,
    /// Whether the group's window has fired (its rows are late): then it is written by the plan's
    /// `late_write`.
    late: Vec<bool>,
    keys: Vec<Option<pg_sys::Datum>>,
    states: Vec<State>,
    cx: pg_sys::MemoryContext,
    /// Rows added to groups of fired windows, over every write.
    pub late_rows: i64,
}

impl<'a> Groups<'a> {
    /// # Safety
    /// `cx` is a memory context that outlives the groups (their keys and values live there).
    pub unsafe fn new(plan: &'a Plan, cx: pg_sys::MemoryContext) -> Groups<'a> {
        Groups {
            plan,
            by_hash: HashMap::default(),
            next: Vec::new(),
            starts: Vec::new(),
            ends: Vec::new(),
            rows: Vec::new(),
            late: Vec::new(),
            keys: Vec::new(),
            states: Vec::new(),
            cx,
            late_rows: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Whether the groups are past their bound, so that no row is added: more than
    /// [`FLUSH_GROUPS`] of them, or keys and values of more than `work_mem` in their context.
    pub fn full(&self) -> bool {
        // SAFETY: reads the size of a live memory context and a backend setting.
        self.len() > FLUSH_GROUPS
            || unsafe { pg_sys::MemoryContextMemAllocated(self.cx, true) }
                > unsafe { pg_sys::work_mem } as usize * 1024
    }

    /// Adds a row, whose front columns are `values` and `nulls`, to the group of its keys and
    /// window, which has fired when `late` (every row of a window in one statement lands alike).
    ///
    /// # Safety
    /// `values` are datums of the front columns' types, valid while this runs.
    pub unsafe fn add(
        &mut self,
        values: &[pg_sys::Datum],
        nulls: &[bool],
        start: i64,
        end: i64,
        late: bool,
    ) {
        let plan = self.plan;
        let nk = plan.keys.len();
        let mut h: u64 = (start as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for k in &plan.keys {
            // SAFETY: the values are of the front columns' types.
            let kh = unsafe { k.hash_of(values, nulls) };
            h = (h ^ kh).wrapping_mul(0x100_0000_01b3).rotate_left(29);
        }
        h ^= h >> 32;
        let same = |g: usize| {
            self.starts[g] == start
                && plan
                    .keys
                    .iter()
                    .zip(&self.keys[g * nk..(g + 1) * nk])
                    .all(|(k, have)| match (have, nulls[k.column]) {
                        (None, true) => true,
                        (Some(a), false) => {
                            // SAFETY: both values are of the key's type.
                            unsafe { k.eq.call2(k.collation, *a, values[k.column]).value() != 0 }
                        }
                        _ => false,
                    })
        };
        let first = self.by_hash.get(&h).copied().unwrap_or(END);
        let mut at = first;
        while at != END && !same(at as usize) {
            at = self.next[at as usize];
        }
        let g = if at != END {
            at as usize
        } else {
            let g = self.starts.len();
            // SAFETY: the group's keys are copied into the groups' context.
            unsafe {
                let old = pg_sys::MemoryContextSwitchTo(self.cx);
                for k in &plan.keys {
                    self.keys
                        .push((!nulls[k.column]).then(|| k.storage.copy(values[k.column])));
                }
                pg_sys::MemoryContextSwitchTo(old);
            }
            self.starts.push(start);
            self.ends.push(end);
            self.rows.push(0);
            self.late.push(late);
            self.states.extend(plan.accs.iter().map(|a| a.start()));
            self.next.push(first);
            self.by_hash.insert(h, g as u32);
            g
        };
        self.rows[g] += 1;
        self.late_rows += late as i64;
        let na = plan.accs.len();
        for (a, state) in plan.accs.iter().zip(&mut self.states[g * na..(g + 1) * na]) {
            let value = a.arg.and_then(|c| (!nulls[c]).then_some(values[c]));
            // SAFETY: the argument is of its column's type; the states live in `cx`.
            unsafe { a.add(state, value, self.cx) };
        }
    }

    /// The groups of open windows (of fired ones, when `late`) as the arrays of the groups
    /// statements, in their parameters' order; `None` when there are none.
    ///
    /// # Safety
    /// Builds arrays in the current memory context from the groups' datums.
    unsafe fn arrays(&self, late: bool) -> Option<Vec<pg_sys::Datum>> {
        let which: Vec<usize> = (0..self.len()).filter(|&g| self.late[g] == late).collect();
        if which.is_empty() {
            return None;
        }
        let n = which.len();
        let plan = self.plan;
        let (nk, na) = (plan.keys.len(), plan.accs.len());
        let mut columns: Vec<(Vec<pg_sys::Datum>, Vec<bool>)> =
            vec![(Vec::with_capacity(n), Vec::with_capacity(n)); plan.columns.len()];
        for g in which {
            let mut j = 0;
            let mut push = |d: pg_sys::Datum, null: bool| {
                columns[j].0.push(d);
                columns[j].1.push(null);
                j += 1;
            };
            for k in &self.keys[g * nk..(g + 1) * nk] {
                push(k.unwrap_or(pg_sys::Datum::from(0)), k.is_none());
            }
            push(pg_sys::Datum::from(self.starts[g]), false);
            push(pg_sys::Datum::from(self.ends[g]), false);
            push(pg_sys::Datum::from(self.rows[g]), false);
            for (a, state) in plan.accs.iter().zip(&self.states[g * na..(g + 1) * na]) {
                for (d, null) in a.columns(state) {
                    push(d, null);
                }
            }
        }
        Some(
            columns
                .iter_mut()
                .zip(&plan.columns)
                // SAFETY: `values` and `nulls` have `n` entries of the element type `s`.
                .map(|((values, nulls), s)| unsafe { array(values, nulls, s) })
                .collect(),
        )
    }

    /// Writes the groups with the plan's statements, run by `run` (which runs a kept plan as the
    /// pipeline's owner, told whether it is the statement of fired windows), and forgets them:
    /// the groups of open windows first, then those of fired windows.
    ///
    /// # Safety
    /// The groups' context is still alive.
    pub unsafe fn flush(&mut self, run: &dyn Fn(pg_sys::SPIPlanPtr, &[pg_sys::Datum], bool)) {
        if self.is_empty() {
            return;
        }
        for (late, write) in [(false, self.plan.write), (true, self.plan.late_write)] {
            // The arrays live in a context of their own, deleted once they are written.
            let arrays_cx = pgrx::PgMemoryContexts::new("pg_eventtime group arrays");
            // SAFETY: as the caller promises; the arrays are built in `arrays_cx`.
            unsafe {
                let old = pg_sys::MemoryContextSwitchTo(arrays_cx.value());
                let arrays = self.arrays(late);
                pg_sys::MemoryContextSwitchTo(old);
                if let Some(arrays) = arrays {
                    run(write, &arrays, late);
                }
            }
            drop(arrays_cx);
        }
        self.by_hash.clear();
        self.next.clear();
        self.starts.clear();
        self.ends.clear();
        self.rows.clear();
        self.late.clear();
        self.keys.clear();
        self.states.clear();
        // SAFETY: the groups' values are not used any more.
        unsafe { pg_sys::MemoryContextReset(self.cx) };
    }
}

/// Rows between resets of the per-row memory.
pub fn rows_per_reset() -> usize {
    ROWS_PER_RESET
}
