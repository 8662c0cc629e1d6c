//! Refused rows, for the engine: the rows of a statement whose window is past its grace.
//!
//! Each is kept as the source's row, a copy of its transition table tuple (toasted values
//! flattened), and the rows are written with one kept statement taking them as an array of the
//! source's row type (`PipelineDef::ingest_refused_rows_statement`), which computes each row's
//! window and document as the statement for many rows does. Their memory is bounded: past
//! [`MAX_ROWS`] rows or `work_mem` of copies, a statement that has written nothing yet goes to
//! SQL, and one that has (with offsets, claimed first) writes them in parts, which is harmless
//! because refused rows are not grouped.

use pgrx::pg_sys;

use super::acc::Storage;
use super::array;
use crate::pg::plans::run_plan;

/// Refused rows held before they are written.
pub const MAX_ROWS: usize = 10_000;

/// How the engine writes a pipeline's refused rows.
pub struct Refuse {
    /// `PipelineDef::ingest_refused_rows_statement`, kept as the pipeline's owner.
    pub insert: pg_sys::SPIPlanPtr,
    /// The source's row type.
    pub row: Storage,
}

/// The refused rows of a statement so far.
pub struct Refused<'a> {
    refuse: &'a Refuse,
    /// Where [`Refused::copy`] puts its copies.
    cx: pg_sys::MemoryContext,
    rows: Vec<pg_sys::Datum>,
    /// Rows written so far.
    pub written: i64,
}

impl<'a> Refused<'a> {
    /// # Safety
    /// `cx` is a memory context that outlives the refused rows.
    pub unsafe fn new(refuse: &'a Refuse, cx: pg_sys::MemoryContext) -> Refused<'a> {
        Refused {
            refuse,
            cx,
            rows: Vec::new(),
            written: 0,
        }
    }

    /// Whether no more rows are held: [`MAX_ROWS`] of them, or `work_mem` of copies.
    pub fn full(&self) -> bool {
        // SAFETY: reads the size of a live memory context and a backend setting.
        self.rows.len() >= MAX_ROWS
            || unsafe { pg_sys::MemoryContextMemAllocated(self.cx, true) }
                > unsafe { pg_sys::work_mem } as usize * 1024
    }

    /// The row in `slot` as a datum of the source's row type, copied into `cx`.
    ///
    /// # Safety
    /// `slot` holds a row of the source's descriptor; `cx` is a live memory context.
    pub unsafe fn copy(
        slot: *mut pg_sys::TupleTableSlot,
        cx: pg_sys::MemoryContext,
    ) -> pg_sys::Datum {
        // SAFETY: as the caller promises; the copy is made in `cx`.
        unsafe {
            let old = pg_sys::MemoryContextSwitchTo(cx);
            let d = pg_sys::ExecFetchSlotHeapTupleDatum(slot);
            pg_sys::MemoryContextSwitchTo(old);
            d
        }
    }

    /// Holds the row in `slot`, copied into the rows' context.
    ///
    /// # Safety
    /// As [`Refused::copy`].
    pub unsafe fn push_slot(&mut self, slot: *mut pg_sys::TupleTableSlot) {
        // SAFETY: as the caller promises.
        let d = unsafe { Self::copy(slot, self.cx) };
        self.rows.push(d);
    }

    /// Holds the row in `slot` as [`Refused::push_slot`] does, having first written the rows
    /// held, refused by `watermark`, when there are as many as it holds.
    ///
    /// # Safety
    /// As [`Refused::copy`] and [`Refused::flush`].
    pub unsafe fn hold_slot(&mut self, slot: *mut pg_sys::TupleTableSlot, watermark: Option<i64>) {
        // SAFETY: as the caller promises; the copy is made after the flush resets the context.
        unsafe {
            if self.full() {
                self.flush(watermark);
            }
            self.push_slot(slot);
        }
    }

    /// Holds a row already copied (by [`Refused::copy`]) into a context that outlives the write,
    /// having first written the rows held, as [`Refused::hold_slot`].
    ///
    /// # Safety
    /// As [`Refused::flush`].
    pub unsafe fn hold(&mut self, row: pg_sys::Datum, watermark: Option<i64>) {
        if self.full() {
            // SAFETY: as the caller promises.
            unsafe { self.flush(watermark) };
        }
        self.rows.push(row);
    }

    /// Writes the rows held, refused by `watermark` (a row past its grace has one), as the
    /// pipeline's owner (the caller's identity), and forgets them; nothing when none is held.
    ///
    /// # Safety
    /// The rows' contexts are alive.
    pub unsafe fn flush(&mut self, watermark: Option<i64>) {
        if self.rows.is_empty() {
            return;
        }
        let watermark = watermark.expect("a window past its grace has a watermark");
        let arrays_cx = pgrx::PgMemoryContexts::new("pg_eventtime refused rows array");
        // SAFETY: the array is built in `arrays_cx` from the held rows, of the source's row type,
        // the plan's first parameter; the copies are released once written.
        unsafe {
            let old = pg_sys::MemoryContextSwitchTo(arrays_cx.value());
            let mut nulls = vec![false; self.rows.len()];
            let rows = array(&mut self.rows, &mut nulls, &self.refuse.row);
            pg_sys::MemoryContextSwitchTo(old);
            let (n, _) = run_plan(
                self.refuse.insert,
                &[rows, pg_sys::Datum::from(watermark)],
                b"  ",
            );
            self.written += n as i64;
            self.rows.clear();
            pg_sys::MemoryContextReset(self.cx);
        }
        drop(arrays_cx);
    }
}
